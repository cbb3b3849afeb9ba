// The ready loops of @paddock/sdk/tools with the official clients
// (@anthropic-ai/sdk, openai) against the fake model server and a real paddockd.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";

import { Paddock } from "@paddock/sdk";
import { ToolSession, runAnthropic, runOpenAIChat, runOpenAIResponses } from "@paddock/sdk/tools";
import { startDaemon, type Daemon } from "@paddock/sdk/test/daemon";

import { startFakeModels, type FakeModels } from "./fakemodel.js";

let daemon: Daemon;
let models: FakeModels;

before(async () => {
  daemon = await startDaemon();
  models = await startFakeModels();
});

after(async () => {
  await models?.close();
  await daemon?.stop();
});

function paddock(): Paddock {
  return new Paddock({ url: daemon.url, apiKey: daemon.keys[0] });
}

describe("tool loops with the official clients", () => {
  it("runAnthropic: run_python, one sandbox per conversation, is_error on the failing program", async () => {
    const anthropic = new Anthropic({ baseURL: models.anthropicURL, apiKey: "sk-ant-test" });
    const session = new ToolSession(paddock(), { tools: ["run_python"], create: { network: "off" } });
    const errors: boolean[] = [];
    const { message, messages } = await runAnthropic(
      anthropic,
      {
        model: "claude-sonnet-4-6",
        max_tokens: 4096,
        messages: [{ role: "user", content: "What is the 1000th prime number? Compute it with the run_python tool." }],
      },
      session,
      { maxTurns: 10, onToolCall: (_n, _i, r) => errors.push(r.isError) },
    );
    const text = message.content.filter((b: { type: string }) => b.type === "text").map((b: { text: string }) => b.text).join("");
    assert.match(text, /7919/);
    assert.ok(errors.includes(true), "the buggy program's result is flagged");
    assert.ok(messages.length >= 4);
  });

  it("runOpenAIChat: run_python with strict function tools", async () => {
    const openai = new OpenAI({ baseURL: models.openaiURL, apiKey: "sk-test" });
    const session = new ToolSession(paddock(), { tools: ["run_python"] });
    const { completion } = await runOpenAIChat(
      openai,
      { model: "gpt-5", messages: [{ role: "user", content: "What is the 40th Fibonacci number? Use run_python." }] },
      session,
      { maxTurns: 8 },
    );
    assert.match(completion.choices[0].message.content, /102334155/);
  });

  it("runOpenAIResponses: previous_response_id, a fresh sandbox per call", async () => {
    const openai = new OpenAI({ baseURL: models.openaiURL, apiKey: "sk-test" });
    const session = new ToolSession(paddock(), { tools: ["run_python"], perCall: true, create: { maxCostMicros: 50_000 } });
    const res = await runOpenAIResponses(
      openai,
      { model: "gpt-5", input: "What is the 40th Fibonacci number? Use run_python." },
      session,
      { maxTurns: 8 },
    );
    assert.match(res.output_text, /102334155/);
    const reqs = await models.requests();
    assert.ok(reqs.some((r) => r.api === "responses" && JSON.stringify(r.body).includes("previous_response_id")));
  });
});
