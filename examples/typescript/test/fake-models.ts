// A local stand-in for the Anthropic Messages API and the OpenAI Responses
// API, for testing the examples without a model. It speaks their wire
// formats, validates requests the way the real APIs do (every tool call
// answered in the next turn, ids matching, tool results first, known
// previous_response_id), and plays a scripted model: it sends buggy code
// first, expects the failure back (is_error and the traceback), sends the
// fix, and answers with the number the sandbox printed.

import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** An HTTP error answer of the fake, in the API's own error format. */
class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    super(JSON.stringify(body));
  }
}

const id = (prefix: string) => `${prefix}${randomBytes(12).toString("hex")}`;

// ---------------------------------------------------------------- Anthropic

type Block = { type: string; [k: string]: unknown };
type Message = { role: string; content: string | Block[] };

function anthropicError(status: number, type: string, message: string): ApiError {
  return new ApiError(status, { type: "error", error: { type, message }, request_id: id("req_") });
}

const invalid = (message: string) => anthropicError(400, "invalid_request_error", message);

/** A scripted conversation, chosen by the tool it is offered. */
interface AnthropicScript {
  tool: string;
  /** The model's turn n (0-based), given the results of its previous turn's calls. */
  turn(n: number, results: Map<string, { text: string; isError: boolean }>, calls: Block[]): Block[];
}

const PRIMES_BUGGY = `def primes(n):
    found = []
    candidate = 2
    while len(found) < n:
        if all(candidate % p for p in found if p * p <= candidate):
            found.append(candidate)
        candidate += 1
    return found

print(prime(1000)[-1])
`;

const PRIMES_FIXED = PRIMES_BUGGY.replace("print(prime(1000)[-1])", "print(primes(1000)[-1])");

const SIEVE_C = `#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    const int n = 1000000;
    char *composite = calloc(n, 1);
    int count = 0, largest = 0;
    for (long i = 2; i < n; i++) {
        if (composite[i]) continue;
        count++;
        largest = (int)i;
        for (long j = i * i; j < n; j += i) composite[j] = 1;
    }
    printf("%d primes below %d, the largest is %d\\n", count, n, largest)BUG
    free(composite);
    return 0;
}
`;

function sieveCommand(fixed: boolean): string {
  const src = SIEVE_C.replace("BUG", fixed ? ";" : "");
  return `cat > sieve.c <<'EOF'\n${src}EOF\ngcc -O2 -Wall -o sieve sieve.c && ./sieve`;
}

/** Parses a run_* tool result (the examples' JSON) or fails the request. */
function runResult(text: string): { exit_code: number | null; stdout: string; stderr: string } {
  try {
    return JSON.parse(text) as { exit_code: number | null; stdout: string; stderr: string };
  } catch {
    throw invalid(`fake model: a tool result is not the JSON of a run: ${text.slice(0, 200)}`);
  }
}

function expect(cond: boolean, what: string): void {
  if (!cond) throw invalid(`fake model: ${what}`);
}

const SCRIPTS: AnthropicScript[] = [
  {
    tool: "run_python",
    turn(n, results, calls) {
      const toolUse = (code: string): Block => ({ type: "tool_use", id: id("toolu_"), name: "run_python", input: { code } });
      if (n === 0) {
        // Two calls at once: the buggy program and a harmless check.
        return [
          { type: "text", text: "I'll compute it with a quick program." },
          toolUse(PRIMES_BUGGY),
          toolUse("import sys\nprint(sys.version_info[0])\n"),
        ];
      }
      if (n === 1) {
        const [buggy, check] = calls.map((c) => results.get(String(c.id)));
        expect(!!buggy && buggy.isError, "the failing program's tool_result must have is_error: true");
        expect(!!buggy && runResult(buggy.text).exit_code === 1, "the failing program must exit with 1");
        expect(!!buggy && /NameError: name 'prime' is not defined/.test(runResult(buggy.text).stderr), "the traceback must reach the model");
        expect(!!check && !check.isError && runResult(check.text).stdout.trim() === "3", "the check must succeed and print 3");
        return [{ type: "text", text: "Typo: prime → primes. Fixed." }, toolUse(PRIMES_FIXED)];
      }
      const fixed = results.get(String(calls[0]?.id));
      expect(!!fixed && !fixed.isError, "the fixed program must succeed");
      const answer = runResult(fixed!.text).stdout.trim();
      return [{ type: "text", text: `The 1000th prime number is ${answer}.` }];
    },
  },
  {
    tool: "run_command",
    turn(n, results, calls) {
      const toolUse = (command: string): Block => ({ type: "tool_use", id: id("toolu_"), name: "run_command", input: { command } });
      if (n === 0) return [toolUse(sieveCommand(false))];
      if (n === 1) {
        const r = results.get(String(calls[0]?.id));
        expect(!!r && r.isError, "the failed compile's tool_result must have is_error: true");
        const run = runResult(r!.text);
        expect(run.exit_code !== 0 && /error: expected ['‘];['’]/.test(run.stderr), "gcc's error must reach the model");
        return [{ type: "text", text: "A missing semicolon; fixing it." }, toolUse(sieveCommand(true))];
      }
      const r = results.get(String(calls[0]?.id));
      expect(!!r && !r.isError, "the fixed sieve must compile and run");
      const m = /(\d+) primes below (\d+), the largest is (\d+)/.exec(runResult(r!.text).stdout);
      expect(!!m, "the sieve must print its result");
      return [{ type: "text", text: `The sieve finds ${m![1]} primes below ${m![2]}; the largest is ${m![3]}.` }];
    },
  },
];

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((b: Block) => (b.type === "text" && typeof b.text === "string" ? b.text : "")).join("");
  }
  return "";
}

/** Checks a Messages API request as the real API does; returns the script's next turn. */
function anthropicMessages(req: IncomingMessage, body: Record<string, unknown>, issued: Map<string, Block>): unknown {
  if (!req.headers["x-api-key"] && !req.headers.authorization) {
    throw anthropicError(401, "authentication_error", "x-api-key header is required");
  }
  if (!req.headers["anthropic-version"]) throw invalid("anthropic-version: header is required");
  if (typeof body.model !== "string" || body.model === "") throw invalid("model: Field required");
  if (!Number.isInteger(body.max_tokens) || (body.max_tokens as number) < 1) throw invalid("max_tokens: Field required");
  const tools = (body.tools ?? []) as Block[];
  if (!Array.isArray(tools)) throw invalid("tools: Input should be a valid list");
  tools.forEach((t, i) => {
    if (typeof t.name !== "string" || !/^[a-zA-Z0-9_-]{1,128}$/.test(t.name)) {
      throw invalid(`tools.${i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'`);
    }
    const schema = t.input_schema as { type?: string } | undefined;
    if (!schema || schema.type !== "object") throw invalid(`tools.${i}.custom.input_schema.type: Input should be 'object'`);
  });
  const messages = body.messages as Message[];
  if (!Array.isArray(messages) || messages.length === 0) throw invalid("messages: at least one message is required");
  if (messages[0]?.role !== "user") throw invalid("messages: first message must use the \"user\" role");

  messages.forEach((m, i) => {
    if (m.role !== "user" && m.role !== "assistant") throw invalid(`messages.${i}.role: Input should be 'user' or 'assistant'`);
    if (i > 0 && messages[i - 1]?.role === m.role) {
      throw invalid(`messages: roles must alternate between "user" and "assistant", but found multiple "${m.role}" roles in a row`);
    }
    const blocks = typeof m.content === "string" ? [] : m.content;
    if (!Array.isArray(blocks)) throw invalid(`messages.${i}.content: Input should be a valid list`);
    if (m.role === "assistant") {
      blocks.forEach((b, j) => {
        if (b.type !== "tool_use") return;
        const orig = issued.get(String(b.id));
        if (!orig || orig.name !== b.name || JSON.stringify(orig.input) !== JSON.stringify(b.input)) {
          throw invalid(`messages.${i}.content.${j}: tool_use block ${String(b.id)} is not the one the model sent`);
        }
      });
      const uses = blocks.filter((b) => b.type === "tool_use").map((b) => String(b.id));
      if (uses.length === 0) return;
      const next = messages[i + 1];
      const nextBlocks = next && Array.isArray(next.content) ? next.content : [];
      const answered = new Set(nextBlocks.filter((b) => b.type === "tool_result").map((b) => String(b.tool_use_id)));
      const missing = uses.filter((u) => !answered.has(u));
      if (!next || missing.length > 0) {
        throw invalid(
          `messages.${i + 1}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(", ") || uses.join(", ")}. ` +
            "Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
        );
      }
    } else {
      const prev = messages[i - 1];
      const prevUses = new Set(
        prev && Array.isArray(prev.content) ? prev.content.filter((b) => b.type === "tool_use").map((b) => String(b.id)) : [],
      );
      let seenOther = false;
      const seen = new Set<string>();
      blocks.forEach((b, j) => {
        if (b.type !== "tool_result") {
          seenOther = true;
          return;
        }
        if (seenOther) throw invalid(`messages.${i}.content.${j}: \`tool_result\` blocks must come first in the user message, before any other content`);
        const useId = String(b.tool_use_id);
        if (!prevUses.has(useId)) {
          throw invalid(
            `messages.${i}.content.${j}: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${useId}. ` +
              "Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
          );
        }
        if (seen.has(useId)) throw invalid(`messages.${i}.content.${j}: duplicate \`tool_result\` for ${useId}`);
        seen.add(useId);
        if (b.is_error !== undefined && typeof b.is_error !== "boolean") throw invalid(`messages.${i}.content.${j}.is_error: Input should be a valid boolean`);
        if (b.content !== undefined && typeof b.content !== "string" && !Array.isArray(b.content)) {
          throw invalid(`messages.${i}.content.${j}.content: Input should be a valid string or list`);
        }
      });
    }
  });
  const last = messages[messages.length - 1]!;
  if (last.role !== "user") throw invalid("fake model: the last message must be the user's");

  const script = SCRIPTS.find((s) => tools.some((t) => t.name === s.tool));
  if (!script) throw invalid("fake model: no script for these tools");
  const n = messages.filter((m) => m.role === "assistant").length;
  const results = new Map<string, { text: string; isError: boolean }>();
  if (Array.isArray(last.content)) {
    for (const b of last.content) {
      if (b.type === "tool_result") results.set(String(b.tool_use_id), { text: textOf(b.content), isError: b.is_error === true });
    }
  }
  const prev = messages[messages.length - 2];
  const calls = prev && Array.isArray(prev.content) ? prev.content.filter((b) => b.type === "tool_use") : [];
  const content = script.turn(n, results, calls);
  for (const b of content) if (b.type === "tool_use") issued.set(String(b.id), b);
  const usesTool = content.some((b) => b.type === "tool_use");
  return {
    id: id("msg_"),
    type: "message",
    role: "assistant",
    model: body.model,
    content,
    stop_reason: usesTool ? "tool_use" : "end_turn",
    stop_sequence: null,
    usage: { input_tokens: 100 * (n + 1), output_tokens: 50, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
  };
}

// ------------------------------------------------------------------- OpenAI

interface StoredResponse {
  id: string;
  previous: string | undefined;
  /** Its function calls, by call_id. */
  calls: Map<string, Block>;
  /** Position in the chain: 0 for a response without previous_response_id. */
  depth: number;
}

function openaiError(status: number, message: string, param: string | null, code: string | null, type = "invalid_request_error"): ApiError {
  return new ApiError(status, { error: { message, type, param, code } });
}

const FIB_BUGGY = `def fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a

print(fib(40)
`;

const FIB_FIXED = FIB_BUGGY.replace("print(fib(40)\n", "print(fib(40))\n");

function openaiResponses(req: IncomingMessage, body: Record<string, unknown>, store: Map<string, StoredResponse>): unknown {
  const auth = req.headers.authorization ?? "";
  if (!/^Bearer \S+/.test(auth)) {
    throw openaiError(401, "You didn't provide an API key.", null, null);
  }
  if (typeof body.model !== "string" || body.model === "") throw openaiError(400, "Missing required parameter: 'model'.", "model", "missing_required_parameter");
  const tools = (body.tools ?? []) as Block[];
  tools.forEach((t, i) => {
    if (t.type !== "function") return;
    if (typeof t.name !== "string" || !/^[a-zA-Z0-9_-]{1,64}$/.test(t.name)) {
      throw openaiError(400, `Invalid 'tools[${i}].name': string does not match pattern.`, `tools[${i}].name`, "invalid_value");
    }
    if (t.strict === true) {
      const p = t.parameters as { additionalProperties?: unknown; properties?: object; required?: string[] } | undefined;
      const props = Object.keys(p?.properties ?? {});
      if (p?.additionalProperties !== false || props.some((k) => !p?.required?.includes(k))) {
        throw openaiError(400, `Invalid schema for function '${String(t.name)}': strict mode needs additionalProperties false and every property required.`, `tools[${i}].parameters`, "invalid_function_parameters");
      }
    }
  });
  const input = body.input;
  const items: Block[] = typeof input === "string" ? [{ type: "message", role: "user", content: input }] : Array.isArray(input) ? (input as Block[]) : [];
  if (items.length === 0) throw openaiError(400, "Missing required parameter: 'input'.", "input", "missing_required_parameter");

  // Calls the input may answer: those of the previous response, and those
  // given as function_call items in this input.
  const pending = new Map<string, Block>();
  let prev: StoredResponse | undefined;
  if (body.previous_response_id !== undefined && body.previous_response_id !== null) {
    prev = store.get(String(body.previous_response_id));
    if (!prev) {
      throw openaiError(400, `Previous response with id '${String(body.previous_response_id)}' not found.`, "previous_response_id", "previous_response_not_found");
    }
    for (const [callId, call] of prev.calls) pending.set(callId, call);
  }
  const outputs = new Map<string, string>();
  items.forEach((item, i) => {
    if (item.type === "function_call") pending.set(String(item.call_id), item);
    if (item.type === "function_call_output") {
      const callId = String(item.call_id);
      if (!pending.has(callId)) {
        throw openaiError(400, `No tool call found for function call output with call_id ${callId}.`, `input[${i}]`, null);
      }
      if (typeof item.output !== "string" && !Array.isArray(item.output)) {
        throw openaiError(400, `Invalid type for 'input[${i}].output': expected a string or an array.`, `input[${i}].output`, "invalid_type");
      }
      outputs.set(callId, typeof item.output === "string" ? item.output : textOf(item.output));
    }
  });
  for (const callId of pending.keys()) {
    if (!outputs.has(callId)) throw openaiError(400, `No tool output found for function call ${callId}.`, "input", null);
  }

  const depth = prev ? prev.depth + 1 : 0;
  const call = (code: string): Block => ({
    type: "function_call",
    id: id("fc_"),
    call_id: id("call_"),
    name: "run_python",
    arguments: JSON.stringify({ code }),
    status: "completed",
  });
  const message = (text: string): Block => ({
    type: "message",
    id: id("msg_"),
    role: "assistant",
    status: "completed",
    content: [{ type: "output_text", text, annotations: [] }],
  });
  const fail = (what: string) => openaiError(400, `fake model: ${what}`, null, null);
  const only = prev ? [...outputs.values()][0] : undefined;
  let output: Block[];
  if (!tools.some((t) => t.type === "function" && t.name === "run_python")) throw fail("no run_python tool offered");
  if (depth === 0) {
    output = [call(FIB_BUGGY)];
  } else if (depth === 1) {
    let r: { exit_code: number | null; stderr: string };
    try {
      r = JSON.parse(only ?? "");
    } catch {
      throw fail("the function_call_output is not the JSON of a run");
    }
    if (r.exit_code === 0 || !/SyntaxError/.test(r.stderr)) throw fail("the SyntaxError must reach the model");
    output = [call(FIB_FIXED)];
  } else {
    let r: { exit_code: number | null; stdout: string };
    try {
      r = JSON.parse(only ?? "");
    } catch {
      throw fail("the function_call_output is not the JSON of a run");
    }
    if (r.exit_code !== 0) throw fail("the fixed program must succeed");
    output = [message(`The 40th Fibonacci number is ${r.stdout.trim()}.`)];
  }
  const stored: StoredResponse = { id: id("resp_"), previous: prev?.id, calls: new Map(), depth };
  for (const o of output) if (o.type === "function_call") stored.calls.set(String(o.call_id), o);
  store.set(stored.id, stored);
  return {
    id: stored.id,
    object: "response",
    created_at: Math.floor(Date.now() / 1000),
    status: "completed",
    error: null,
    incomplete_details: null,
    instructions: null,
    max_output_tokens: null,
    model: body.model,
    output,
    parallel_tool_calls: true,
    previous_response_id: prev?.id ?? null,
    reasoning: { effort: null, summary: null },
    store: true,
    temperature: 1,
    text: { format: { type: "text" } },
    tool_choice: "auto",
    tools,
    top_p: 1,
    truncation: "disabled",
    usage: {
      input_tokens: 100,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 20,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 120,
    },
    user: null,
    metadata: {},
  };
}

// ------------------------------------------------------------------- server

export interface FakeModels {
  /** For ANTHROPIC_BASE_URL. */
  anthropicURL: string;
  /** For OPENAI_BASE_URL. */
  openaiURL: string;
  /** Every request: its path, status and, for errors, the answer. */
  log: { path: string; status: number; error?: string }[];
  close(): Promise<void>;
}

export async function startFakeModels(): Promise<FakeModels> {
  const issued = new Map<string, Block>();
  const store = new Map<string, StoredResponse>();
  const log: FakeModels["log"] = [];
  const server: Server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const path = (req.url ?? "").split("?")[0] ?? "";
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json", "request-id": id("req_") });
      res.end(JSON.stringify(body));
    };
    try {
      if (req.method !== "POST" || (path !== "/v1/messages" && path !== "/v1/responses")) {
        throw new ApiError(404, { type: "error", error: { type: "not_found_error", message: `no route ${req.method} ${path}` } });
      }
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>;
      } catch {
        throw path === "/v1/messages" ? invalid("the request body is not valid JSON") : openaiError(400, "We could not parse the JSON body of your request.", null, null);
      }
      const answer = path === "/v1/messages" ? anthropicMessages(req, body, issued) : openaiResponses(req, body, store);
      log.push({ path, status: 200 });
      send(200, answer);
    } catch (err) {
      const e = err instanceof ApiError ? err : new ApiError(500, { type: "error", error: { type: "api_error", message: String(err) } });
      log.push({ path, status: e.status, error: e.message });
      send(e.status, e.body);
    }
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    anthropicURL: base,
    openaiURL: `${base}/v1`,
    log,
    close: async () => {
      server.closeAllConnections();
      await new Promise((ok) => server.close(ok));
    },
  };
}
