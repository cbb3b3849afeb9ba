// Runs the examples against a real paddockd and the fake model server, and
// checks that the fake validates conversations like the real APIs.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";

import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";

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

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs dist/<name>.js with the daemon and the fake models in its environment. */
function runExample(name: string, extraEnv: NodeJS.ProcessEnv = {}): Promise<Run> {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!/^(ANTHROPIC|OPENAI|PADDOCK)_/.test(k)) env[k] = v;
  }
  Object.assign(env, {
    PADDOCK_URL: daemon.url,
    PADDOCK_API_KEY: daemon.keys[0],
    ANTHROPIC_BASE_URL: models.anthropicURL,
    ANTHROPIC_API_KEY: "sk-ant-test",
    OPENAI_BASE_URL: models.openaiURL,
    OPENAI_API_KEY: "sk-test",
  }, extraEnv);
  const script = fileURLToPath(new URL(`../${name}.js`, import.meta.url));
  return new Promise((ok, fail) => {
    const child = spawn(process.execPath, [script], { env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (b: Buffer) => (stdout += b));
    child.stderr.on("data", (b: Buffer) => (stderr += b));
    const timer = setTimeout(() => child.kill("SIGKILL"), 120_000);
    child.once("error", fail);
    child.once("close", (code) => {
      clearTimeout(timer);
      ok({ code, stdout, stderr });
    });
  });
}

/** The examples' one line per tool call, from their stderr. */
function toolLines(stderr: string): string[] {
  return stderr.split("\n").filter((l) => l.startsWith("[run_"));
}

async function requestsSince(n: number) {
  return (await models.requests()).slice(n);
}

async function assertSandboxesGone(example: string, count = 1): Promise<void> {
  const all = await daemon.client(0).list({ metadata: { example }, state: "all" }).toArray();
  assert.equal(all.length, count, `the example created ${count} sandbox(es)`);
  assert.equal(all[0]?.state, "terminated", "the example deleted its sandbox");
}

describe("examples", () => {
  it("primes-anthropic prints the 1000th prime", async () => {
    const n = (await models.requests()).length;
    const run = await runExample("primes-anthropic");
    assert.equal(run.code, 0, `exit ${run.code}\nstdout:\n${run.stdout}\nstderr:\n${run.stderr}`);
    assert.match(run.stdout, /\b7919\b/);
    const reqs = await requestsSince(n);
    assert.deepEqual(reqs.map((r) => [r.path, r.status]), [["/v1/messages", 200], ["/v1/messages", 200], ["/v1/messages", 200]]);
    // The buggy program failed, the check passed, the fix passed.
    assert.deepEqual(toolLines(run.stderr), ["[run_python] exit 1", "[run_python] exit 0", "[run_python] exit 0"]);
    await assertSandboxesGone("primes-anthropic");
  });

  it("primes-ai-sdk prints the 1000th prime through the Vercel AI SDK", async () => {
    const run = await runExample("primes-ai-sdk");
    assert.equal(run.code, 0, `exit ${run.code}\nstdout:\n${run.stdout}\nstderr:\n${run.stderr}`);
    assert.match(run.stdout, /\b7919\b/);
    assert.deepEqual(toolLines(run.stderr), ["[run_python] exit 1", "[run_python] exit 0", "[run_python] exit 0"]);
    await assertSandboxesGone("primes-ai-sdk");
  });

  it("primes-claude-agent-sdk prints the 1000th prime through query() and the bundled Claude Code CLI", async () => {
    const n = (await models.requests()).length;
    // The CLI keeps its state under HOME: a throwaway one, and no traffic
    // but the model's.
    const home = await mkdtemp(join(tmpdir(), "paddock-claude-home-"));
    const run = await runExample("primes-claude-agent-sdk", { HOME: home, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1" });
    await rm(home, { recursive: true, force: true });
    assert.equal(run.code, 0, `exit ${run.code}\nstdout:\n${run.stdout}\nstderr:\n${run.stderr}`);
    assert.match(run.stdout, /\b7919\b/);
    // Claude Code also sends side requests without tools, which the fake
    // refuses; the conversation's three turns are accepted.
    const convo = (await requestsSince(n)).filter((r) => JSON.stringify(r.body).includes("mcp__paddock__run_python"));
    assert.deepEqual(convo.map((r) => r.status), [200, 200, 200]);
    assert.deepEqual(toolLines(run.stderr), ["[run_python] exit 1", "[run_python] exit 0", "[run_python] exit 0"]);
    await assertSandboxesGone("primes-claude-agent-sdk");
  });

  it("sieve-c compiles and runs a C sieve", async () => {
    const n = (await models.requests()).length;
    const run = await runExample("sieve-c");
    assert.equal(run.code, 0, `exit ${run.code}\nstdout:\n${run.stdout}\nstderr:\n${run.stderr}`);
    assert.match(run.stdout, /\b78498 primes below 1000000\b/);
    assert.match(run.stdout, /\b999983\b/);
    const [sbx] = await daemon.client(0).list({ metadata: { example: "sieve-c" }, state: "all" }).toArray();
    assert.equal(sbx?.info.network.mode, "off");
    assert.equal(sbx?.info.on_timeout, "stop");
    assert.deepEqual((await requestsSince(n)).map((r) => r.status), [200, 200, 200]);
    assert.deepEqual(toolLines(run.stderr), ["[run_command] exit 1", "[run_command] exit 0"]);
    await assertSandboxesGone("sieve-c");
  });

  it("fibonacci-openai-responses prints the 40th Fibonacci number", async () => {
    const n = (await models.requests()).length;
    const run = await runExample("fibonacci-openai-responses");
    assert.equal(run.code, 0, `exit ${run.code}\nstdout:\n${run.stdout}\nstderr:\n${run.stderr}`);
    assert.match(run.stdout, /\b102334155\b/);
    assert.deepEqual((await requestsSince(n)).map((r) => [r.path, r.status]), [["/v1/responses", 200], ["/v1/responses", 200], ["/v1/responses", 200]]);
    assert.deepEqual(toolLines(run.stderr), ["[run_python] exit 1", "[run_python] exit 0"]);
    // A fresh sandbox per call, each with the cost cap.
    await assertSandboxesGone("fibonacci-openai-responses", 2);
    const all = await daemon.client(0).list({ metadata: { example: "fibonacci-openai-responses" }, state: "all" }).toArray();
    assert.ok(all.every((s) => s.info.max_cost_micros === 50_000));
  });

  it("fibonacci-openai-chat prints the 40th Fibonacci number", async () => {
    const n = (await models.requests()).length;
    const run = await runExample("fibonacci-openai-chat");
    assert.equal(run.code, 0, `exit ${run.code}\nstdout:\n${run.stdout}\nstderr:\n${run.stderr}`);
    assert.match(run.stdout, /\b102334155\b/);
    assert.deepEqual((await requestsSince(n)).map((r) => [r.path, r.status]), [["/v1/chat/completions", 200], ["/v1/chat/completions", 200], ["/v1/chat/completions", 200]]);
    assert.deepEqual(toolLines(run.stderr), ["[run_python] exit 1", "[run_python] exit 0"]);
    await assertSandboxesGone("fibonacci-openai-chat");
  });
});

describe("the fake model server validates like the real APIs", () => {
  const tools = [{ name: "run_python", description: "d", input_schema: { type: "object" as const, properties: { code: { type: "string" } }, required: ["code"] } }];

  async function firstTurn(client: Anthropic) {
    const messages: Anthropic.MessageParam[] = [{ role: "user", content: "What is the 1000th prime?" }];
    const reply = await client.messages.create({ model: "m", max_tokens: 100, tools, messages });
    messages.push({ role: "assistant", content: reply.content });
    const uses = reply.content.filter((b): b is Anthropic.ToolUseBlock => b.type === "tool_use");
    return { messages, uses };
  }

  it("rejects unanswered tool_use, misplaced and unknown tool_result ids", async () => {
    const client = new Anthropic({ baseURL: models.anthropicURL, apiKey: "k", maxRetries: 0 });
    const { messages, uses } = await firstTurn(client);
    assert.equal(uses.length, 2);
    const result = (id: string): Anthropic.ToolResultBlockParam => ({ type: "tool_result", tool_use_id: id, content: "{}" });

    const oneMissing = [...messages, { role: "user" as const, content: [result(uses[0]!.id)] }];
    await assert.rejects(client.messages.create({ model: "m", max_tokens: 100, tools, messages: oneMissing }), (err: unknown) => {
      assert.ok(err instanceof Anthropic.BadRequestError);
      assert.match(err.message, /tool_use` ids were found without `tool_result` blocks immediately after/);
      assert.ok(err.message.includes(uses[1]!.id));
      return true;
    });

    const textFirst = [...messages, { role: "user" as const, content: [{ type: "text" as const, text: "here" }, result(uses[0]!.id), result(uses[1]!.id)] }];
    await assert.rejects(client.messages.create({ model: "m", max_tokens: 100, tools, messages: textFirst }), /`tool_result` block\(s\) at the beginning of this message/);

    const wrongId = [...messages, { role: "user" as const, content: [result(uses[0]!.id), result(uses[1]!.id), result("toolu_nope")] }];
    await assert.rejects(client.messages.create({ model: "m", max_tokens: 100, tools, messages: wrongId }), /unexpected `tool_use_id`/);

    const noKey = await fetch(`${models.anthropicURL}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "anthropic-version": "2023-06-01" },
      body: JSON.stringify({ model: "m", max_tokens: 100, messages: messages.slice(0, 1) }),
    });
    assert.equal(noKey.status, 401);
    assert.equal(((await noKey.json()) as { error: { type: string } }).error.type, "authentication_error");
  });

  it("rejects tool results without is_error when the code failed", async () => {
    const client = new Anthropic({ baseURL: models.anthropicURL, apiKey: "k", maxRetries: 0 });
    const { messages, uses } = await firstTurn(client);
    const ok = JSON.stringify({ exit_code: 0, timed_out: false, stdout: "3\n", stderr: "" });
    const failed = JSON.stringify({ exit_code: 1, timed_out: false, stdout: "", stderr: "NameError: name 'prime' is not defined" });
    const results: Anthropic.ToolResultBlockParam[] = [
      { type: "tool_result", tool_use_id: uses[0]!.id, content: failed },
      { type: "tool_result", tool_use_id: uses[1]!.id, content: ok },
    ];
    await assert.rejects(
      client.messages.create({ model: "m", max_tokens: 100, tools, messages: [...messages, { role: "user", content: results }] }),
      /is_error: true/,
    );
    results[0]!.is_error = true;
    const reply = await client.messages.create({ model: "m", max_tokens: 100, tools, messages: [...messages, { role: "user", content: results }] });
    assert.equal(reply.stop_reason, "tool_use");
  });

  it("rejects an unknown previous_response_id and unanswered function calls", async () => {
    const client = new OpenAI({ baseURL: models.openaiURL, apiKey: "k", maxRetries: 0 });
    const tools = [{ type: "function" as const, name: "run_python", parameters: { type: "object", properties: { code: { type: "string" } }, required: ["code"], additionalProperties: false }, strict: true }];
    const first = await client.responses.create({ model: "m", tools, input: "fib(40)?" });
    const call = first.output.find((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === "function_call");
    assert.ok(call);
    await assert.rejects(
      client.responses.create({ model: "m", tools, previous_response_id: "resp_unknown", input: [{ type: "function_call_output", call_id: call.call_id, output: "{}" }] }),
      (err: unknown) => err instanceof OpenAI.BadRequestError && /Previous response with id 'resp_unknown' not found/.test(err.message),
    );
    await assert.rejects(
      client.responses.create({ model: "m", tools, previous_response_id: first.id, input: [{ role: "user", content: "go on" }] }),
      new RegExp(`No tool output found for function call ${call.call_id}`),
    );
    await assert.rejects(
      client.responses.create({ model: "m", tools, previous_response_id: first.id, input: [{ type: "function_call_output", call_id: "call_other", output: "{}" }] }),
      /No tool call found for function call output with call_id call_other/,
    );
    // Without previous_response_id the call is unknown too.
    await assert.rejects(
      client.responses.create({ model: "m", tools, input: [{ type: "function_call_output", call_id: call.call_id, output: "{}" }] }),
      /No tool call found/,
    );
  });
});
