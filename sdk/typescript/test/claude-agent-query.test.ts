// The Claude Agent SDK's query() end to end, offline: the SDK starts the
// Claude Code CLI it bundles (the native binary of the platform package
// @anthropic-ai/claude-agent-sdk-<os>-<arch>), which talks to the fake
// model server through ANTHROPIC_BASE_URL and calls Paddock's tools through
// paddockMcpServer, an in-process MCP server bound to one sandbox of a real
// paddockd. Needs root (paddockd).

import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import { query, type SDKMessage } from "@anthropic-ai/claude-agent-sdk";

import { paddockMcpServer } from "../src/integrations/claude-agent-sdk.js";
import { startDaemon, type Daemon } from "./daemon.js";
import { startFakeModels, type FakeModels } from "./fakemodel.js";

let d: Daemon;
let models: FakeModels;
let home: string;

before(async () => {
  d = await startDaemon();
  models = await startFakeModels();
  home = await mkdtemp(join(tmpdir(), "paddock-claude-home-"));
});

after(async () => {
  await models?.close();
  await d?.stop();
  if (home) await rm(home, { recursive: true, force: true });
});

describe("Claude Agent SDK query()", () => {
  it("runs the run_python conversation through the bundled CLI, the fake model and paddockMcpServer", async () => {
    const paddock = d.client(0);
    await using sbx = await paddock.create({ metadata: { test: "claude-agent-query" } });
    const n = (await models.requests()).length;
    const messages: SDKMessage[] = [];
    for await (const m of query({
      prompt: "What is the 1000th prime number? Compute it with the run_python tool.",
      options: {
        model: "claude-sonnet-4-6",
        maxTurns: 6,
        tools: [], // no built-in tools: only the sandbox's
        mcpServers: { paddock: paddockMcpServer(sbx, { tools: ["run_python"] }) },
        allowedTools: ["mcp__paddock__run_python"],
        cwd: home,
        env: {
          PATH: process.env.PATH ?? "/usr/bin:/bin",
          HOME: home,
          ANTHROPIC_BASE_URL: models.anthropicURL,
          ANTHROPIC_API_KEY: "sk-ant-test",
          CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
        },
      },
    })) {
      messages.push(m);
    }
    const init = messages.find((m) => m.type === "system" && m.subtype === "init");
    assert.deepEqual(init && "tools" in init ? init.tools : undefined, ["mcp__paddock__run_python"]);
    const result = messages.at(-1);
    assert.ok(result?.type === "result" && result.subtype === "success", JSON.stringify(result));
    assert.equal(result.result, "The 1000th prime number is 7919.");

    // The three turns of the conversation reached the fake model and were
    // accepted; the failing program's result came back with is_error.
    const convo = (await models.requests()).slice(n).filter((r) => JSON.stringify(r.body).includes("mcp__paddock__run_python"));
    assert.deepEqual(convo.map((r) => r.status), [200, 200, 200]);
    const toolResults = messages.flatMap((m) =>
      m.type === "user" && Array.isArray(m.message.content) ? m.message.content.filter((b) => b.type === "tool_result") : [],
    );
    assert.equal(toolResults.length, 3);
    assert.equal((toolResults[0] as { is_error?: boolean }).is_error, true);
    // The calls ran in the bound sandbox, which the session leaves running.
    const ls = await sbx.exec("ls /tmp");
    assert.match(ls.stdout, /run_python_3\.py/);
    assert.equal((await sbx.refresh()).state, "running");
  });
});
