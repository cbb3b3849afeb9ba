// @paddock/sdk/ai: the Paddock tools as Vercel AI SDK (`ai` v6) tools.
// `ai` is a peer dependency; the core SDK does not load this module.

import { jsonSchema, tool, type Tool as AITool } from "ai";

import type { Executor } from "../tools/session.js";
import type { ToolResult } from "../tools/format.js";

/**
 * The executor's tools for `generateText` / `streamText`:
 *
 * ```ts
 * await using session = new ToolSession(new Paddock(), { tools: ["run_python"] });
 * await generateText({ model, tools: paddockTools(session), stopWhen: stepCountIs(10), prompt });
 * ```
 *
 * Each tool's output is the run's JSON; a failed run (non-zero exit, signal,
 * timeout) goes to the model as an error result (`is_error` on Anthropic).
 */
export function paddockTools(exec: Executor): Record<string, AITool<Record<string, string>, ToolResult>> {
  const out: Record<string, AITool<Record<string, string>, ToolResult>> = {};
  for (const t of exec.tools()) {
    out[t.name] = tool<Record<string, string>, ToolResult>({
      description: t.description,
      inputSchema: jsonSchema<Record<string, string>>(t.inputSchema),
      execute: (input, { abortSignal }) => exec.call(t.name, input, { signal: abortSignal }),
      toModelOutput: ({ output }) => (output.isError ? { type: "error-text", value: output.text } : { type: "text", value: output.text }),
    });
  }
  return out;
}
