// @paddock/sdk/claude-agent-sdk: an in-process MCP server bound to one
// sandbox, for the Claude Agent SDK's `mcpServers` option.
// `@anthropic-ai/claude-agent-sdk` and `zod` are peer dependencies.

import { createSdkMcpServer, tool, type McpSdkServerConfigWithInstance } from "@anthropic-ai/claude-agent-sdk";
import { z } from "zod";

import type { Sandbox } from "../sandbox.js";
import { ToolSession, type Executor } from "../tools/session.js";
import type { ToolOptions } from "../tools/definitions.js";

/** Options of paddockMcpServer. */
export interface McpServerOptions extends ToolOptions {
  /** The MCP server's name (default "paddock"); tools are then `mcp__paddock__run_python`, ... */
  name?: string;
}

/**
 * An MCP server whose tools run in `target`: a Sandbox (never deleted by
 * the server) or an Executor such as a ToolSession.
 *
 * ```ts
 * await using sbx = await paddock.create();
 * for await (const m of query({ prompt, options: { mcpServers: { paddock: paddockMcpServer(sbx) } } })) { ... }
 * ```
 */
export function paddockMcpServer(target: Sandbox | Executor, opts: McpServerOptions = {}): McpSdkServerConfigWithInstance {
  const exec: Executor = "call" in target ? target : new ToolSession(undefined, { ...opts, sandbox: target });
  const tools = exec.tools().map((t) => {
    const shape: Record<string, z.ZodString> = {};
    for (const [k, p] of Object.entries(t.inputSchema.properties)) shape[k] = z.string().describe(p.description);
    return tool(t.name, t.description, shape, async (args) => {
      const res = await exec.call(t.name, args);
      return { content: [{ type: "text" as const, text: res.text }], isError: res.isError };
    });
  });
  return createSdkMcpServer({ name: opts.name ?? "paddock", version: "0.1.0", tools });
}
