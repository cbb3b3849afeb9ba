// Stop and start with files kept, pause retention, idle auto-resume, against a real paddockd (see daemon.ts). Needs root.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { BadRequestError, ConflictError, NotFoundError, Paddock, type SandboxInfo } from "../src/index.js";
import { startDaemon, type Daemon } from "./daemon.js";

let d: Daemon;
let paddock: Paddock;

before(async () => {
  d = await startDaemon();
  paddock = d.client(0);
});

after(async () => {
  if (d) await d.stop();
});

const history = (i: SandboxInfo): string => (i.history ?? []).map((e) => `${e.state}/${e.reason ?? ""}`).join(" ");

describe("lifecycle", () => {
  it("stop keeps the files, boot starts the sandbox again, auto_resume starts it on the next call", async () => {
    await using s = await paddock.create({ idleTimeoutSeconds: 3600, onIdle: "stop", autoResume: true });
    assert.equal(s.info.on_idle, "stop");
    assert.equal(s.info.auto_resume, true);
    await s.files.write("kept.txt", "kept");
    const stopped = await s.stop({ keepForSeconds: 600 });
    assert.equal(stopped.state, "stopped");
    assert.ok(stopped.stopped_at);
    assert.equal((Date.parse(stopped.expires_at) - Date.parse(stopped.stopped_at!)) / 1000, 600);
    assert.equal((await s.boot()).state, "running");
    assert.equal(await s.files.readText("kept.txt"), "kept");
    await s.stop();
    const res = await s.exec("cat /workspace/kept.txt");
    assert.equal(res.stdout, "kept");
    assert.match(history(await s.refresh()), /stopped\/stopped running\/auto_resume$/);
  });

  it("pause takes a retention and a later stop", async () => {
    await using s = await paddock.create({});
    await assert.rejects(s.pause({ keepForSeconds: 400 * 24 * 3600 }), BadRequestError);
    const p = await s.pause({ keepForSeconds: 900, thenStopAfterSeconds: 600 });
    assert.equal((Date.parse(p.expires_at) - Date.parse(p.paused_at!)) / 1000, 900);
    assert.ok(p.stop_at);
    assert.equal((await s.stop({ keepForSeconds: 60 })).state, "stopped");
    assert.equal((await s.resume()).state, "running");
  });

  it("bad input fails before the request", async () => {
    await using s = await paddock.create({});
    await assert.rejects(s.pause({ keepForSeconds: 5, thenStopAfterSeconds: 10 }), RangeError);
    await assert.rejects(s.stop({ keepForSeconds: -1 }), RangeError);
    await assert.rejects(paddock.create({ onIdle: "nap" as "pause" }), RangeError);
    await assert.rejects(paddock.create({ autoResume: "yes" as unknown as boolean }), TypeError);
    assert.equal(s.info.state, "running");
    await assert.rejects(s.boot(), ConflictError); // running: nothing to start
    await assert.rejects(paddock.get("sb-nope"), NotFoundError);
  });
});
