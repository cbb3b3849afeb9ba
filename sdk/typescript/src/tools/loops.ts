// Ready tool loops for the Anthropic Messages API, OpenAI Chat Completions and
// the OpenAI Responses API. Each takes the caller's own official client
// object, duck-typed: this SDK depends on none of the model SDKs.

import { imageNote } from "./code.js";
import { anthropicTools, openaiChatTools, openaiResponsesTools } from "./definitions.js";
import type { ToolResult } from "./format.js";
import type { Executor } from "./session.js";

/** The default bound on model calls of a loop. */
export const DEFAULT_MAX_TURNS = 20;

/** The model still called tools after maxTurns calls; `last` is its last answer. */
export class MaxTurnsError extends Error {
  constructor(
    readonly turns: number,
    readonly last: unknown,
  ) {
    super(`turn limit reached: the model still called tools after ${turns} turns`);
    this.name = "MaxTurnsError";
  }
}

/** Options of every loop. */
export interface LoopOptions {
  /** Bound on model calls (default 20). */
  maxTurns?: number;
  /** Leave the executor open when the loop returns (default: close it). */
  keepSession?: boolean;
  /** Called after each tool call. */
  onToolCall?: (name: string, input: unknown, result: ToolResult) => void;
  /** Cancels tool calls in flight. */
  signal?: AbortSignal;
}

type Obj = Record<string, unknown>;

function maxTurns(o: LoopOptions): number {
  const n = o.maxTurns ?? DEFAULT_MAX_TURNS;
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`maxTurns must be an integer >= 1, got ${String(n)}`);
  return n;
}

async function call(exec: Executor, name: string, input: unknown, o: LoopOptions): Promise<ToolResult> {
  const res = await exec.call(name, input, { signal: o.signal });
  o.onToolCall?.(name, input, res);
  return res;
}

async function loop<T>(exec: Executor, o: LoopOptions, body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } finally {
    if (!o.keepSession) await exec.close();
  }
}

/** The part of `new Anthropic()` the loop uses. */
export interface AnthropicLike {
  messages: { create(params: any, options?: any): Promise<any> };
}

/** An Anthropic message's tool_use blocks answered as one user message, or undefined without any. */
export async function anthropicToolResults(exec: Executor, msg: { content: Obj[] }, o: LoopOptions = {}) {
  const blocks: Obj[] = [];
  for (const b of msg.content ?? []) {
    if (b.type !== "tool_use") continue;
    const res = await call(exec, b.name as string, b.input, o);
    // run_code figures go back as image blocks inside the tool_result.
    const content = res.images?.length
      ? [{ type: "text", text: res.text }, ...res.images.map((i) => ({ type: "image", source: { type: "base64", media_type: i.mediaType, data: i.data } }))]
      : res.text;
    blocks.push({ type: "tool_result", tool_use_id: b.id, content, is_error: res.isError });
  }
  return blocks.length ? { role: "user" as const, content: blocks } : undefined;
}

/**
 * Drives a Messages conversation: creates a message, runs its tool_use
 * blocks, sends the results back, until the model stops calling tools.
 * Offers `exec.tools()` when params has no tools. Resolves with the last
 * message and the whole conversation.
 */
export async function runAnthropic(client: AnthropicLike, params: Obj & { messages: Obj[] }, exec: Executor, o: LoopOptions = {}) {
  const turns = maxTurns(o);
  return loop(exec, o, async () => {
    const messages = [...params.messages];
    const tools = params.tools ?? anthropicTools(exec.tools());
    let last: any;
    for (let i = 0; i < turns; i++) {
      last = await client.messages.create({ ...params, tools, messages });
      messages.push({ role: "assistant", content: last.content });
      const reply = await anthropicToolResults(exec, last, o);
      if (!reply) return { message: last, messages };
      messages.push(reply);
    }
    throw new MaxTurnsError(turns, last);
  });
}

/** The part of `new OpenAI()` the Chat Completions loop uses. */
export interface OpenAIChatLike {
  chat: { completions: { create(params: any, options?: any): Promise<any> } };
}

/**
 * Drives a Chat Completions conversation: runs each assistant message's
 * function calls and answers each with a role "tool" message (the error
 * flag is in the JSON's exit code and in a leading "error:"), until a
 * message has no tool calls.
 */
export async function runOpenAIChat(client: OpenAIChatLike, params: Obj & { messages: Obj[] }, exec: Executor, o: LoopOptions = {}) {
  const turns = maxTurns(o);
  return loop(exec, o, async () => {
    const messages = [...params.messages];
    const tools = params.tools ?? openaiChatTools(exec.tools());
    let last: any;
    for (let i = 0; i < turns; i++) {
      last = await client.chat.completions.create({ ...params, tools, messages });
      const msg = last.choices?.[0]?.message;
      if (!msg) throw new Error("chat completion without a message");
      messages.push(msg);
      const calls: Obj[] = msg.tool_calls ?? [];
      if (calls.length === 0) return { completion: last, messages };
      for (const tc of calls) {
        const fn = tc.function as Obj | undefined;
        const text =
          tc.type === "function" && fn
            ? imageNote(await call(exec, fn.name as string, fn.arguments, o)) // chat tool messages are text only
            : `error: tool ${JSON.stringify((tc.custom as Obj | undefined)?.name)} is not a function tool`;
        messages.push({ role: "tool", tool_call_id: tc.id, content: text });
      }
    }
    throw new MaxTurnsError(turns, last);
  });
}

/** The part of `new OpenAI()` the Responses loop uses. */
export interface OpenAIResponsesLike {
  responses: { create(params: any, options?: any): Promise<any> };
}

/**
 * Drives a Responses API conversation with `previous_response_id`: runs the
 * response's function calls and sends their `function_call_output` items
 * as the next input, until a response has no function calls. Needs stored
 * responses (`store` must not be false).
 */
export async function runOpenAIResponses(client: OpenAIResponsesLike, params: Obj, exec: Executor, o: LoopOptions = {}) {
  const turns = maxTurns(o);
  if (params.store === false) throw new TypeError("runOpenAIResponses continues with previous_response_id, which needs store not false");
  return loop(exec, o, async () => {
    const tools = params.tools ?? openaiResponsesTools(exec.tools());
    let next: Obj = { ...params, tools };
    let last: any;
    for (let i = 0; i < turns; i++) {
      last = await client.responses.create(next);
      const outputs: Obj[] = [];
      for (const item of (last.output ?? []) as Obj[]) {
        if (item.type !== "function_call") continue;
        const res = await call(exec, item.name as string, item.arguments, o);
        const output = res.images?.length
          ? [{ type: "input_text", text: res.text }, ...res.images.map((i) => ({ type: "input_image", image_url: `data:${i.mediaType};base64,${i.data}` }))]
          : res.text;
        outputs.push({ type: "function_call_output", call_id: item.call_id, output });
      }
      if (outputs.length === 0) return last;
      next = { ...params, tools, input: outputs, previous_response_id: last.id };
    }
    throw new MaxTurnsError(turns, last);
  });
}
