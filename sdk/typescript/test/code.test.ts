// Code contexts (sbx.runCode, sbx.code) against a real paddockd (see daemon.ts). Needs root.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { BadRequestError, NotFoundError, Paddock, type CodeExecution, type Sandbox } from "../src/index.js";
import { startDaemon, type Daemon } from "./daemon.js";

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
