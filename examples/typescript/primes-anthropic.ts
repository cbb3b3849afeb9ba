// Asks a Claude model for the 1000th prime, giving it a run_python tool
// backed by a Paddock sandbox (Anthropic Messages API, tool use).
//
//   PADDOCK_URL, PADDOCK_API_KEY     the Paddock daemon (default http://127.0.0.1:7419)
//   ANTHROPIC_API_KEY                your key; ANTHROPIC_BASE_URL overrides the API's address
//   ANTHROPIC_MODEL                  default claude-sonnet-4-6
//
//   npm run build && node dist/primes-anthropic.js

import Anthropic from "@anthropic-ai/sdk";
import { Paddock } from "@paddock/sdk";

import { RUN_PYTHON, anthropicTool, describeCall, runTool } from "./tools.js";

const MAX_TURNS = 10;

async function main(): Promise<void> {
  const anthropic = new Anthropic({ baseURL: process.env.ANTHROPIC_BASE_URL || undefined });
  const model = process.env.ANTHROPIC_MODEL || "claude-sonnet-4-6";
  const paddock = new Paddock();

  // One sandbox for the conversation, deleted when main returns.
  await using sbx = await paddock.create({ metadata: { example: "primes-anthropic" } });

  const messages: Anthropic.MessageParam[] = [
    {
      role: "user",
      content: "What is the 1000th prime number? Compute it with the run_python tool, then answer with the number.",
    },
  ];
  for (let turn = 0; turn < MAX_TURNS; turn++) {
    const reply = await anthropic.messages.create({
      model,
      max_tokens: 4096,
      tools: [anthropicTool(RUN_PYTHON)],
      messages,
    });
    messages.push({ role: "assistant", content: reply.content });

    const calls = reply.content.filter((b): b is Anthropic.ToolUseBlock => b.type === "tool_use");
    if (calls.length === 0) {
      // The final answer.
      for (const block of reply.content) if (block.type === "text") console.log(block.text);
      return;
    }
    // Every tool_use gets a tool_result in the next user message, and the
    // tool_result blocks come first in it.
    const results: Anthropic.ToolResultBlockParam[] = [];
    for (const call of calls) {
      const out = await runTool(sbx, call.name, call.input);
      console.error(describeCall(call.name, out));
      results.push({ type: "tool_result", tool_use_id: call.id, content: out.content, is_error: out.isError });
    }
    messages.push({ role: "user", content: results });
  }
  throw new Error(`no answer after ${MAX_TURNS} turns`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
