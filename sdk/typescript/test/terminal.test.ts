// Terminals (openPty, ptys, killPty) and file watches (files.watch) against a
// real paddockd (see daemon.ts). Needs root.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { BadRequestError, LimitExceededError, NotFoundError, type Paddock, type Sandbox } from "../src/index.js";
import { startDaemon, type Daemon } from "./daemon.js";

let d: Daemon;
let paddock: Paddock;
let sbx: Sandbox;
const BASH = ["bash", "--norc", "--noprofile", "-i"];

before(async () => {
  d = await startDaemon();
  paddock = d.client(0);
  sbx = await paddock.create({ metadata: { suite: "terminal" }, timeoutMs: 600_000 });
});

after(async () => {
  if (!d) return;
  await sbx?.kill().catch(() => {});
  await d.stop();
});

describe("terminal", () => {
  it("runs bash: prompt, keys, resize, exit code", async () => {
    await using t = await sbx.openPty({ cmd: BASH, env: { PS1: "ts$ " }, cols: 80, rows: 24 });
    assert.ok(t.id && t.pid > 1);
    await t.readUntil("ts$ ");
    await t.write("stty size\n");
    await t.readUntil("24 80");
    await t.resize(132, 43);
    await t.write("stty size\n");
    await t.readUntil("43 132");
    await t.write("exit 6\n");
    assert.equal(await t.wait(), 6);
    assert.equal(t.exited, true);
  });

  it("several terminals, list and kill", async () => {
    const a = await sbx.openPty({ cmd: "echo one; exec sleep 100" });
    const b = await sbx.openPty({ cmd: ["sleep", "100"] });
    try {
      await a.readUntil("one");
      const ids = (await sbx.ptys()).map((p) => p.id);
      assert.ok(ids.includes(a.id) && ids.includes(b.id), `listed ${ids.join(",")}`);
      await sbx.killPty(b.id);
      assert.equal(await b.wait(), null);
      assert.equal(b.signal, "SIGKILL");
    } finally {
      a.close();
      b.close();
    }
    await assert.rejects(sbx.killPty("t_424242"), NotFoundError);
  });

  it("errors before the upgrade are API errors", async () => {
    await assert.rejects(sbx.openPty({ cwd: "/nonexistent" }), BadRequestError);
    await assert.rejects(sbx.openPty({ cols: 0 }), BadRequestError);
    const other = await d.client(1).get(sbx.id).catch((e: unknown) => e);
    assert.ok(other instanceof NotFoundError);
  });
});

describe("files.watch", () => {
  it("reports create, write, rename and remove", async () => {
    await sbx.exec("mkdir -p wt");
    await using w = await sbx.files.watch("wt", { recursive: true });
    await sbx.exec("touch wt/a && mv wt/a wt/b && rm wt/b");
    const got: string[] = [];
    for await (const ev of w) {
      got.push(`${ev.type} ${ev.path}${ev.old_path ? " from " + ev.old_path : ""}`);
      if (ev.type === "remove") break;
    }
    assert.deepEqual(got, ["create /workspace/wt/a", "rename /workspace/wt/b from /workspace/wt/a", "remove /workspace/wt/b"]);
  });

  it("bounds the watches of a sandbox", async () => {
    await using s = await paddock.create({ timeoutMs: 120_000 });
    const ws = [];
    try {
      for (let i = 0; i < 8; i++) ws.push(await s.files.watch("."));
      await assert.rejects(s.files.watch("."), LimitExceededError);
    } finally {
      for (const w of ws) w.close();
    }
    await assert.rejects(sbx.files.watch("/etc/hostname"), BadRequestError);
  });
});
