// Asks a Claude model for the 1000th prime through the Vercel AI SDK,
// giving it a run_python tool backed by one Paddock sandbox for the
// conversation (@paddock/sdk/ai turns the Paddock tools into `ai` tools).
//
//   PADDOCK_URL, PADDOCK_API_KEY     the Paddock daemon (default http://127.0.0.1:7419)
//   ANTHROPIC_API_KEY                your key; ANTHROPIC_BASE_URL overrides the API's address
//   ANTHROPIC_MODEL                  default claude-sonnet-4-6
//
//   npm run build && node dist/primes-ai-sdk.js

import { createAnthropic } from "@ai-sdk/anthropic";
import { generateText, stepCountIs } from "ai";
import { Paddock } from "@paddock/sdk";
import { paddockTools } from "@paddock/sdk/ai";
import { ToolSession } from "@paddock/sdk/tools";

async function main(): Promise<void> {
  const base = process.env.ANTHROPIC_BASE_URL;
  const anthropic = createAnthropic(base ? { baseURL: `${base.replace(/\/+$/, "")}/v1` } : {});
  const model = process.env.ANTHROPIC_MODEL || "claude-sonnet-4-6";

  // One sandbox for the conversation, created on the first call and deleted when main returns.
  await using session = new ToolSession(new Paddock(), { tools: ["run_python"], create: { metadata: { example: "primes-ai-sdk" } } });

  const { text } = await generateText({
    model: anthropic(model),
    tools: paddockTools(session),
    stopWhen: stepCountIs(10),
    prompt: "What is the 1000th prime number? Compute it with the run_python tool, then answer with the number.",
    onStepFinish: (step) => {
      for (const r of step.toolResults) {
        const out = JSON.parse((r.output as { text: string }).text) as { exit_code: number | null };
        console.error(`[${r.toolName}] exit ${out.exit_code ?? "signal"}`);
      }
    },
  });
  console.log(text);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
