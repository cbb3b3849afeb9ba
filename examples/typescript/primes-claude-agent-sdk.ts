// Asks Claude for the 1000th prime through the Claude Agent SDK's query(),
// with Paddock's run_python tool as an in-process MCP server bound to one
// sandbox (@paddock/sdk/claude-agent-sdk) instead of a hand-written one.
// query() runs the Claude Code CLI the SDK bundles; it reaches the model at
// ANTHROPIC_BASE_URL (or the API) and calls the tool as
// mcp__paddock__run_python. Only the sandbox's tool is offered: none of
// Claude Code's built-in tools touch this machine.
//
//   PADDOCK_URL, PADDOCK_API_KEY     the Paddock daemon (default http://127.0.0.1:7419)
//   ANTHROPIC_API_KEY                your key; ANTHROPIC_BASE_URL overrides the API's address
//   ANTHROPIC_MODEL                  default claude-sonnet-4-6
//
//   npm run build && node dist/primes-claude-agent-sdk.js

import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { query } from "@anthropic-ai/claude-agent-sdk";
import { Paddock } from "@paddock/sdk";
import { paddockMcpServer } from "@paddock/sdk/claude-agent-sdk";

async function main(): Promise<void> {
  const paddock = new Paddock();
  // One sandbox for the conversation, deleted when main returns.
  await using sbx = await paddock.create({ metadata: { example: "primes-claude-agent-sdk" } });
  const cwd = await mkdtemp(join(tmpdir(), "primes-claude-"));
  try {
    for await (const m of query({
      prompt: "What is the 1000th prime number? Compute it with the run_python tool, then answer with the number.",
      options: {
        model: process.env.ANTHROPIC_MODEL || "claude-sonnet-4-6",
        maxTurns: 10,
        tools: [],
        mcpServers: { paddock: paddockMcpServer(sbx, { tools: ["run_python"] }) },
        allowedTools: ["mcp__paddock__run_python"],
        cwd,
      },
    })) {
      if (m.type === "user" && Array.isArray(m.message.content)) {
        for (const b of m.message.content) {
          if (b.type !== "tool_result") continue;
          const text = typeof b.content === "string" ? b.content : (b.content?.[0] as { text?: string } | undefined)?.text ?? "";
          const out = JSON.parse(text.slice(0, text.lastIndexOf("}") + 1)) as { exit_code: number | null };
          console.error(`[run_python] exit ${out.exit_code ?? "signal"}`);
        }
      }
      if (m.type === "result") {
        if (m.subtype !== "success") throw new Error(`query ended with ${m.subtype}`);
        console.log(m.result);
      }
    }
  } finally {
    await rm(cwd, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
