// The unmodified `@e2b/code-interpreter` npm package against paddockd's
// E2B-compatible endpoint (cells run in Paddock's code contexts).

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { NotFoundError, Sandbox, TimeoutError } from "@e2b/code-interpreter";

import { startDaemon } from "./daemon.mjs";

let daemon;
let sbx;

before(async () => {
  daemon = await startDaemon();
  sbx = await Sandbox.create(); // the SDK's default template, code-interpreter-v1
});

after(async () => {
  await sbx?.kill().catch(() => {});
  await daemon?.stop();
});

test("runCode keeps state across calls", async () => {
  await sbx.runCode("x = 21");
  const ex = await sbx.runCode("x * 2");
  assert.equal(ex.text, "42");
  assert.equal(ex.error, undefined);
});

test("stdout and stderr are logs, streamed to the callbacks", async () => {
  const seen = [];
  const ex = await sbx.runCode("import sys\nprint('out')\nprint('err', file=sys.stderr)", {
    onStdout: (m) => seen.push(m.line),
  });
  // Chunks are as the program wrote them (print may write "out" and "\n").
  assert.equal(ex.logs.stdout.join(""), "out\n");
  assert.equal(ex.logs.stderr.join(""), "err\n");
  assert.equal(seen.join(""), "out\n");
});

test("a matplotlib chart is a PNG result", async () => {
  const ex = await sbx.runCode("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.title('t')\nplt.show()");
  const png = ex.results.find((r) => r.png);
  assert.ok(png, JSON.stringify(ex.results.map((r) => r.formats())));
  assert.equal(Buffer.from(png.png, "base64").subarray(1, 4).toString(), "PNG");
});

test("an error has name, value and traceback", async () => {
  const ex = await sbx.runCode("1 / 0");
  assert.equal(ex.error?.name, "ZeroDivisionError");
  assert.match(ex.error?.value ?? "", /division by zero/);
  assert.ok((ex.error?.traceback ?? "").length > 0);
});

test("rich results: html and json", async () => {
  const ex = await sbx.runCode(
    "class R:\n    def _repr_html_(self): return '<b>hi</b>'\n    def _repr_json_(self): return {'a': 1}\nR()",
  );
  assert.equal(ex.results[0].html, "<b>hi</b>");
  assert.deepEqual(ex.results[0].json, { a: 1 });
  assert.equal(ex.results[0].isMainResult, true);
});

test("errors: unknown context is NotFoundError, a slow cell past timeoutMs is TimeoutError", async () => {
  await assert.rejects(sbx.runCode("1", { context: { id: "nope", language: "python", cwd: "/" } }), NotFoundError);
  await assert.rejects(sbx.runCode("import time; time.sleep(30)", { timeoutMs: 1000 }), TimeoutError);
  // The interrupted context works again once the interrupt has landed
  // (until then a cell is refused: the context is busy).
  let text;
  for (let i = 0; i < 100 && text === undefined; i++) {
    text = await sbx.runCode("x").then((ex) => ex.text, () => new Promise((r) => setTimeout(r, 100)));
  }
  assert.equal(text, "21");
});

test("contexts: create, run in, list, restart, remove", async () => {
  const ctx = await sbx.createCodeContext({ language: "python", cwd: "/tmp" });
  assert.ok(ctx.id);
  await sbx.runCode("y = 7", { context: ctx });
  assert.equal((await sbx.runCode("y", { context: ctx })).text, "7");
  assert.equal((await sbx.runCode("import os; os.getcwd()", { context: ctx })).text, "'/tmp'");
  const inDefault = await sbx.runCode("y");
  assert.equal(inDefault.error?.name, "NameError");
  const list = await sbx.listCodeContexts();
  assert.ok(list.some((c) => c.id === ctx.id), JSON.stringify(list));
  await sbx.restartCodeContext(ctx);
  assert.equal((await sbx.runCode("y", { context: ctx })).error?.name, "NameError");
  await sbx.removeCodeContext(ctx.id);
  assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === ctx.id));
});

test("javascript and bash cells", async () => {
  assert.equal((await sbx.runCode("1 + 1", { language: "js" })).text, "2");
  assert.equal((await sbx.runCode("echo hi", { language: "bash" })).logs.stdout.join(""), "hi\n");
});
