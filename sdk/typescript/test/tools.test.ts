// @paddock/sdk/tools: definitions and formatting offline, the executor against a real paddockd (root).

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import type { ExecResult } from "../src/index.js";
import {
  ToolSession,
  anthropicTools,
  formatExec,
  openaiChatTools,
  openaiResponsesTools,
  runOpenAIResponses,
  tools,
  truncateMiddle,
} from "../src/tools/index.js";
import { startDaemon, type Daemon } from "./daemon.js";

function result(over: Partial<ExecResult>): ExecResult {
  return { exit_code: 0, signal: null, timed_out: false, stdout: "", stderr: "", stdout_truncated: false, stderr_truncated: false, stdout_bytes: 0, stderr_bytes: 0, duration_ms: 1, ...over };
}

describe("definitions and formatting", () => {
  it("has the four canonical tools in each API's shape, strict where OpenAI allows", () => {
    assert.deepEqual(tools().map((t) => t.name), ["run_python", "run_command", "write_file", "read_file"]);
    const a = anthropicTools(tools({ tools: ["run_python"] }));
    assert.deepEqual(a[0]!.input_schema.required, ["code"]);
    assert.equal(openaiChatTools()[1]!.function.strict, true);
    const r = openaiResponsesTools()[2]!;
    assert.equal(r.strict, true);
    assert.equal(r.parameters.additionalProperties, false);
    assert.deepEqual(r.parameters.required, ["path", "content"]);
    assert.match(tools({ timeoutMs: 30_000 })[0]!.description, /at most 30s/);
    assert.throws(() => tools({ tools: ["run_ruby" as never] }), RangeError);
    assert.throws(() => tools({ timeoutMs: -5 }), /timeoutMs/);
  });

  const cases: { name: string; res: Partial<ExecResult>; budget: number; isError: boolean; check: (o: Record<string, unknown>) => void }[] = [
    { name: "success", res: { stdout: "42\n" }, budget: 100, isError: false, check: (o) => assert.equal(o.stdout, "42\n") },
    { name: "non-zero exit", res: { exit_code: 1, stderr: "Traceback" }, budget: 100, isError: true, check: (o) => assert.equal(o.exit_code, 1) },
    { name: "timeout", res: { exit_code: null, signal: "SIGKILL", timed_out: true }, budget: 100, isError: true, check: (o) => assert.equal(o.stderr, "killed by SIGKILL") },
    {
      name: "head and tail kept within the budget",
      res: { stdout: "H".repeat(500) + "T".repeat(500) },
      budget: 100,
      isError: false,
      check: (o) => {
        const s = o.stdout as string;
        assert.ok(s.startsWith("H".repeat(50)) && s.endsWith("T".repeat(50)) && s.includes("900 characters cut"));
        assert.equal(o.stdout_truncated, true);
      },
    },
  ];
  for (const c of cases) {
    it(`formats ${c.name}`, () => {
      const r = formatExec(result(c.res), c.budget);
      assert.equal(r.isError, c.isError);
      c.check(JSON.parse(r.text));
    });
  }

  it("truncateMiddle leaves short text alone", () => {
    assert.deepEqual(truncateMiddle("abc", 10), ["abc", false]);
  });
});

describe("ToolSession against paddockd", () => {
  let d: Daemon;
  before(async () => {
    d = await startDaemon();
  });
  after(async () => {
    await d?.stop();
  });

  it("keeps one sandbox per conversation and deletes it on close", async () => {
    const paddock = d.client(0);
    const s = new ToolSession(paddock, { timeoutMs: 2000 });
    assert.equal((await s.call("write_file", { path: "note.txt", content: "hello" })).isError, false);
    const read = await s.call("read_file", JSON.stringify({ path: "note.txt" }));
    assert.deepEqual(read, { text: "hello", isError: false });
    const py = await s.call("run_python", { code: "print(open('note.txt').read() * 2)" });
    assert.equal(JSON.parse(py.text).stdout, "hellohello\n");
    const slow = await s.call("run_command", { command: "sleep 30" });
    assert.equal(slow.isError, true);
    assert.equal(JSON.parse(slow.text).timed_out, true);
    assert.equal((await s.call("run_ruby", {})).isError, true);
    assert.match((await s.call("run_python", {})).text, /missing required field "code"/);
    const id = (await s.sandbox()).id;
    await s.close();
    assert.equal((await paddock.get(id)).state, "terminated");
  });

  it("perCall gives each call a fresh sandbox, and the Responses loop chains previous_response_id", async () => {
    const paddock = d.client(0);
    const s = new ToolSession(paddock, { perCall: true, tools: ["run_command"] });
    const seen: unknown[] = [];
    // A duck-typed stand-in for the OpenAI client (the official one is tested in examples/typescript).
    const client = {
      responses: {
        async create(p: Record<string, unknown>) {
          seen.push(p);
          if (seen.length <= 2) {
            return { id: `resp_${seen.length}`, output: [{ type: "function_call", call_id: `c${seen.length}`, name: "run_command", arguments: JSON.stringify({ command: "ls /workspace/marker 2>/dev/null; touch /workspace/marker; echo ok" }) }] };
          }
          return { id: "resp_3", output: [{ type: "message" }], output_text: "done" };
        },
      },
    };
    const last = await runOpenAIResponses(client, { model: "m", input: "go" }, s, { maxTurns: 5 });
    assert.equal(last.output_text, "done");
    const second = seen[1] as { previous_response_id: string; input: { output: string }[] };
    assert.equal(second.previous_response_id, "resp_1");
    assert.equal(JSON.parse(second.input[0]!.output).stdout, "ok\n", "a fresh sandbox has no marker");
    const third = seen[2] as { input: { output: string }[] };
    assert.equal(JSON.parse(third.input[0]!.output).stdout, "ok\n");
  });
});
