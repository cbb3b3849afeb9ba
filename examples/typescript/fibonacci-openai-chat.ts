// Asks an OpenAI model for the 40th Fibonacci number through Chat
// Completions, giving it a run_python tool backed by one Paddock sandbox
// for the whole conversation.
//
//   PADDOCK_URL, PADDOCK_API_KEY     the Paddock daemon (default http://127.0.0.1:7419)
//   OPENAI_API_KEY                   your key; OPENAI_BASE_URL overrides the API's address
//   OPENAI_MODEL                     default gpt-5
//
//   npm run build && node dist/fibonacci-openai-chat.js

import OpenAI from "openai";
import { Paddock } from "@paddock/sdk";

import { RUN_PYTHON, describeCall, openaiChatTool, runTool } from "./tools.js";

const MAX_TURNS = 10;

async function main(): Promise<void> {
  const openai = new OpenAI({ baseURL: process.env.OPENAI_BASE_URL || undefined });
  const model = process.env.OPENAI_MODEL || "gpt-5";
  const paddock = new Paddock();

  // One sandbox for the conversation, deleted when main returns.
  await using sbx = await paddock.create({ metadata: { example: "fibonacci-openai-chat" } });

  const tools = [openaiChatTool(RUN_PYTHON)];
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
    { role: "user", content: "What is the 40th Fibonacci number (F(1) = F(2) = 1)? Compute it with the run_python tool, then answer with the number." },
  ];
  for (let turn = 0; turn < MAX_TURNS; turn++) {
    const completion = await openai.chat.completions.create({ model, tools, messages });
    const msg = completion.choices[0]!.message;
    messages.push(msg);
    const calls = (msg.tool_calls ?? []).filter((c) => c.type === "function");
    if (calls.length === 0) {
      console.log(msg.content);
      return;
    }
    // Every tool call gets a role "tool" message with its tool_call_id.
    for (const call of calls) {
      const out = await runTool(sbx, call.function.name, call.function.arguments);
      console.error(describeCall(call.function.name, out));
      messages.push({ role: "tool", tool_call_id: call.id, content: out.content });
    }
  }
  throw new Error(`no answer after ${MAX_TURNS} turns`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
