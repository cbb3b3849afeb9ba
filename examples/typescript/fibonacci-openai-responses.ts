// Asks an OpenAI model for the 40th Fibonacci number, giving it a
// run_python function backed by a Paddock sandbox (OpenAI Responses API:
// function_call → function_call_output, chained with previous_response_id;
// a strict function, a fresh sandbox per call, a cost cap, eight turns at most).
//
//   PADDOCK_URL, PADDOCK_API_KEY     the Paddock daemon (default http://127.0.0.1:7419)
//   OPENAI_API_KEY                   your key; OPENAI_BASE_URL overrides the API's address
//   OPENAI_MODEL                     default gpt-5
//
//   npm run build && node dist/fibonacci-openai-responses.js

import OpenAI from "openai";
import { Paddock } from "@paddock/sdk";

import { RUN_PYTHON, describeCall, openaiTool, runTool } from "./tools.js";

const MAX_TURNS = 8;

async function main(): Promise<void> {
  const openai = new OpenAI({ baseURL: process.env.OPENAI_BASE_URL || undefined });
  const model = process.env.OPENAI_MODEL || "gpt-5";
  const paddock = new Paddock();

  const tools = [openaiTool(RUN_PYTHON)];
  let response = await openai.responses.create({
    model,
    tools,
    input:
      "What is the 40th Fibonacci number (F(1) = F(2) = 1)? Compute it with the run_python tool, then answer with the number.",
  });
  for (let turn = 0; turn < MAX_TURNS; turn++) {
    const calls = response.output.filter((item): item is OpenAI.Responses.ResponseFunctionToolCall => item.type === "function_call");
    if (calls.length === 0) {
      console.log(response.output_text);
      return;
    }
    // Every function_call gets a function_call_output with its call_id; the
    // previous response carries the rest of the conversation.
    const outputs: OpenAI.Responses.ResponseInputItem[] = [];
    for (const call of calls) {
      // A fresh sandbox for each call, with a cost cap, deleted right after.
      const sbx = await paddock.create({ metadata: { example: "fibonacci-openai-responses" }, maxCostMicros: 50_000 });
      let out;
      try {
        out = await runTool(sbx, call.name, call.arguments);
      } finally {
        await sbx.close();
      }
      console.error(describeCall(call.name, out));
      outputs.push({ type: "function_call_output", call_id: call.call_id, output: out.content });
    }
    response = await openai.responses.create({ model, tools, previous_response_id: response.id, input: outputs });
  }
  throw new Error(`no answer after ${MAX_TURNS} turns`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
