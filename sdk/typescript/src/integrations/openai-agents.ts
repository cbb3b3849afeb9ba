// @paddock/sdk/openai-agents: the Paddock tools as OpenAI Agents SDK function tools.
// `@openai/agents` is a peer dependency; the core SDK does not load this module.

import { tool, type FunctionTool } from "@openai/agents";

import type { Executor } from "../tools/session.js";

/**
 * The executor's tools for an `Agent` (strict JSON schemas):
 *
 * ```ts
 * const session = new ToolSession(new Paddock(), { tools: ["run_python"] });
 * const agent = new Agent({ name: "coder", instructions, tools: paddockAgentTools(session) });
 * ```
 *
 * Each tool returns the run's JSON text (a failed run starts with its
 * non-zero `exit_code` or `timed_out`; a bad call starts with "error:").
 */
export function paddockAgentTools(exec: Executor): FunctionTool<unknown, any, string>[] {
  return exec.tools().map((t) =>
    tool({
      name: t.name,
      description: t.description,
      parameters: t.inputSchema as any,
      strict: true,
      execute: async (input: unknown) => (await exec.call(t.name, input)).text,
    }) as FunctionTool<unknown, any, string>,
  );
}
