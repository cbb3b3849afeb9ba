// Code contexts (sbx.runCode, sbx.code) against a real paddockd (see daemon.ts). Needs root.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { BadRequestError, NotFoundError, Paddock, type CodeExecution, type Sandbox } from "../src/index.js";
import { ToolSession, formatCode, runAnthropic, runOpenAIChat, runOpenAIResponses } from "../src/tools/index.js";
import { startDaemon, type Daemon } from "./daemon.js";
import { startFakeModels } from "./fakemodel.js";

let d: Daemon;
let paddock: Paddock;
let sbx: Sandbox;

before(async () => {
  d = await startDaemon();
  paddock = d.client(0);
  sbx = await paddock.create({ metadata: { suite: "code" }, timeoutMs: 600_000 });
});

after(async () => {
  if (!d) return;
  await sbx?.kill().catch(() => {});
  await d.stop();
});

const mainText = (ex: CodeExecution): string => ex.results.find((r) => r.is_main_result)?.data["text/plain"] ?? "";

describe("runCode", () => {
  it("keeps state, returns values, errors and timeouts as results", async () => {
    await sbx.runCode("x = 41");
    const ex = await sbx.runCode("print('hi')\nx + 1");
    assert.equal(mainText(ex), "42");
    assert.equal(ex.stdout, "hi\n");
    assert.equal((await sbx.runCode("1/0")).error?.name, "ZeroDivisionError");
    const t = await sbx.runCode("while True: pass", { timeoutMs: 1000 });
    assert.equal(t.timed_out, true);
    assert.equal(mainText(await sbx.runCode("x")), "41");
  });

  it("streams output and figures to callbacks", async () => {
    let out = "";
    const images: string[] = [];
    const ex = await sbx.runCode("import matplotlib.pyplot as plt\nprint('plotting')\nplt.plot([1, 2, 3])", {
      onStdout: (s) => (out += s),
      onResult: (r) => {
        if (r.data["image/png"]) images.push(r.data["image/png"]);
      },
    });
    assert.equal(out, "plotting\n");
    assert.equal(ex.stdout, "plotting\n");
    assert.equal(images.length, 1);
    assert.equal(Buffer.from(images[0]!, "base64").subarray(1, 4).toString(), "PNG");
  });

  it("runs JavaScript with top-level await and bash with state", async () => {
    assert.equal(mainText(await sbx.runCode("const v = await Promise.resolve(21); v * 2", { language: "javascript" })), "42");
    await sbx.runCode("cd /tmp; N=5", { language: "bash" });
    assert.equal((await sbx.runCode("echo $N; pwd", { language: "bash" })).stdout, "5\n/tmp\n");
    await assert.rejects(sbx.runCode("1", { language: "cobol" as "bash" }), BadRequestError);
  });
});

describe("sbx.code contexts", () => {
  it("creates, lists, isolates, restarts, interrupts and deletes", async () => {
    const c = await sbx.code.create("python");
    assert.equal((await sbx.runCode("x", { context: c })).error?.name, "NameError");
    await sbx.runCode("y = 1", { context: c.id });
    assert.ok((await sbx.code.list()).some((x) => x.id === c.id));
    assert.equal((await sbx.code.get(c)).execution_count, 2);
    assert.equal((await sbx.code.interrupt(c)).busy, false);
    assert.equal((await sbx.code.restart(c)).execution_count, 0);
    assert.equal((await sbx.runCode("y", { context: c })).error?.name, "NameError");
    await sbx.code.delete(c);
    await assert.rejects(sbx.code.get(c), NotFoundError);
  });
});

/** A duck-typed model client: POSTs params as JSON to url. */
function api(url: string, headers: Record<string, string>) {
  return {
    async create(params: unknown) {
      const r = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(params) });
      const body = await r.json();
      if (!r.ok) throw new Error(JSON.stringify(body));
      return body;
    },
  };
}

describe("run_code tool", () => {
  it("formats a cell with its images like Go", () => {
    const r = formatCode({ context_id: "c", language: "python", execution_count: 1, stdout: "", stderr: "", stdout_truncated: false, stderr_truncated: false,
      results: [{ data: { "text/plain": "<Figure>", "image/png": "iVBORw0KGgo=" } }, { data: { "text/plain": "45" }, is_main_result: true }],
      timed_out: false, interrupted: false, restarted: false, duration_ms: 1 });
    assert.equal(r.images?.length, 1);
    assert.deepEqual(JSON.parse(r.text).images, ["image/png shown as image 1"]);
    assert.equal(JSON.parse(r.text).result, "45");
  });

  it("delivers the chart to the model as an image (Anthropic, Responses) or a note (Chat)", async () => {
    const models = await startFakeModels();
    try {
      const want = "The chart is a 640x480 PNG; the sum is 45.";
      {
        await using s = new ToolSession(paddock, { tools: ["run_code"] });
        const { message } = await runAnthropic({ messages: api(models.anthropicURL + "/v1/messages", { "x-api-key": "k", "anthropic-version": "2023-06-01" }) },
          { model: "m", max_tokens: 100, messages: [{ role: "user", content: "plot" }] }, s);
        assert.equal(message.content[0].text, want);
      }
      {
        await using s = new ToolSession(paddock, { tools: ["run_code"] });
        const resp = await runOpenAIResponses({ responses: api(models.openaiURL + "/responses", { authorization: "Bearer k" }) }, { model: "m", input: "plot" }, s);
        assert.equal(resp.output.find((o: { type: string }) => o.type === "message").content[0].text, want);
      }
      {
        await using s = new ToolSession(paddock, { tools: ["run_code"] });
        const { completion } = await runOpenAIChat({ chat: { completions: api(models.openaiURL + "/chat/completions", { authorization: "Bearer k" }) } },
          { model: "m", messages: [{ role: "user", content: "plot" }] }, s);
        assert.equal(completion.choices[0].message.content, "The chart was made (not visible here); the sum is 45.");
      }
    } finally {
      await models.close();
    }
  });
});
