// The framework integrations with their real npm packages, against the fake
// model server (bin/paddock-fakemodel) and a real paddockd. Needs root.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { createAnthropic } from "@ai-sdk/anthropic";
import { Agent, run, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled } from "@openai/agents";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { generateText, stepCountIs } from "ai";
import OpenAI from "openai";

import { paddockTools } from "../src/integrations/ai.js";
import { paddockMcpServer } from "../src/integrations/claude-agent-sdk.js";
import { paddockAgentTools } from "../src/integrations/openai-agents.js";
import { ToolSession } from "../src/tools/index.js";
import { startDaemon, type Daemon } from "./daemon.js";
import { startFakeModels, type FakeModels } from "./fakemodel.js";

let d: Daemon;
let models: FakeModels;

before(async () => {
  d = await startDaemon();
  models = await startFakeModels();
});

after(async () => {
  await models?.close();
  await d?.stop();
});

describe("framework integrations", () => {
  it("Vercel AI SDK: generateText with paddockTools, errors as is_error", async () => {
    const anthropic = createAnthropic({ baseURL: `${models.anthropicURL}/v1`, apiKey: "sk-ant-test" });
    await using session = new ToolSession(d.client(0), { tools: ["run_python"] });
    const res = await generateText({
      model: anthropic("claude-sonnet-4-6"),
      tools: paddockTools(session),
      stopWhen: stepCountIs(10),
      prompt: "What is the 1000th prime number? Compute it with the run_python tool.",
    });
    assert.match(res.text, /7919/);
    const results = res.steps.flatMap((s) => s.toolResults);
    assert.ok(results.some((r) => (r.output as { isError: boolean }).isError));
  });

  it("OpenAI Agents SDK: an Agent with paddockAgentTools", async () => {
    setTracingDisabled(true);
    setOpenAIAPI("responses");
    setDefaultOpenAIClient(new OpenAI({ baseURL: models.openaiURL, apiKey: "sk-test" }));
    await using session = new ToolSession(d.client(0), { tools: ["run_python"] });
    const agent = new Agent({ name: "coder", instructions: "Use run_python.", model: "gpt-5", tools: paddockAgentTools(session) });
    const result = await run(agent, "What is the 40th Fibonacci number? Use run_python.", { maxTurns: 8 });
    assert.match(String(result.finalOutput), /102334155/);
  });

  it("Claude Agent SDK: an in-process MCP server bound to one sandbox", async () => {
    const paddock = d.client(0);
    await using sbx = await paddock.create();
    const server = paddockMcpServer(sbx);
    assert.equal(server.type, "sdk");
    const [ct, st] = InMemoryTransport.createLinkedPair();
    await server.instance.connect(st);
    const client = new Client({ name: "test", version: "1" });
    await client.connect(ct);
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name), ["run_python", "run_command", "write_file", "read_file"]);
    const ok = await client.callTool({ name: "run_command", arguments: { command: "echo hi > f; cat f" } });
    assert.equal(ok.isError, false);
    assert.equal(JSON.parse((ok.content as { text: string }[])[0]!.text).stdout, "hi\n");
    const bad = await client.callTool({ name: "run_python", arguments: { code: "raise SystemExit(3)" } });
    assert.equal(bad.isError, true);
    assert.equal((await sbx.files.readText("f")), "hi\n", "the calls ran in the bound sandbox");
    await client.close();
    assert.equal((await paddock.get(sbx.id)).state, "running", "the server never deletes the sandbox");
  });
});
