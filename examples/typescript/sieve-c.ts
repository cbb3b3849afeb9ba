// Has a Claude model write a prime sieve in C, compile it and run it with a
// run_command tool backed by a Paddock sandbox (Anthropic Messages API).
//
//   PADDOCK_URL, PADDOCK_API_KEY     the Paddock daemon (default http://127.0.0.1:7419)
//   ANTHROPIC_API_KEY                your key; ANTHROPIC_BASE_URL overrides the API's address
//   ANTHROPIC_MODEL                  default claude-sonnet-4-6
//
//   npm run build && node dist/sieve-c.js

import Anthropic from "@anthropic-ai/sdk";
import { Paddock } from "@paddock/sdk";

import { RUN_COMMAND, anthropicTool, describeCall, runTool } from "./tools.js";

const MAX_TURNS = 10;

const PROMPT =
  "Write a sieve of Eratosthenes in C that counts the primes below 1000000 and prints the count " +
  "and the largest of them. Compile it with gcc and run it with the run_command tool, " +
  "then tell me both numbers.";

async function main(): Promise<void> {
  const anthropic = new Anthropic({ baseURL: process.env.ANTHROPIC_BASE_URL || undefined });
  const model = process.env.ANTHROPIC_MODEL || "claude-sonnet-4-6";
  const paddock = new Paddock();

  // The sandbox lives for the conversation: the C file and the binary stay
  // between calls. It is deleted when main returns.
  // No network, a 30-minute lease; at its end the sandbox's processes stop
  // (paddockd handles "stop" as "kill" until stopped sandboxes keep files).
  await using sbx = await paddock.create({
    metadata: { example: "sieve-c" },
    network: "off",
    timeoutMs: 1_800_000,
    onTimeout: "stop",
  });

  const messages: Anthropic.MessageParam[] = [{ role: "user", content: PROMPT }];
  for (let turn = 0; turn < MAX_TURNS; turn++) {
    const reply = await anthropic.messages.create({
      model,
      max_tokens: 4096,
      tools: [anthropicTool(RUN_COMMAND)],
      messages,
    });
    messages.push({ role: "assistant", content: reply.content });

    const calls = reply.content.filter((b): b is Anthropic.ToolUseBlock => b.type === "tool_use");
    if (calls.length === 0) {
      for (const block of reply.content) if (block.type === "text") console.log(block.text);
      return;
    }
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
