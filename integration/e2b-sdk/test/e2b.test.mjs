// The unmodified `e2b` npm package against paddockd's E2B-compatible
// endpoint, configured only through its environment variables
// (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY, E2B_DOMAIN).

import assert from "node:assert/strict";
import { request } from "node:http";
import { after, before, describe, test } from "node:test";

import {
  AuthenticationError,
  CommandExitError,
  NotFoundError,
  Sandbox,
  SandboxNotFoundError,
  TimeoutError,
} from "e2b";

import { startDaemon } from "./daemon.mjs";

let daemon;
let sbx;

before(async () => {
  daemon = await startDaemon();
  sbx = await Sandbox.create({ metadata: { suite: "e2b-compat" }, timeoutMs: 300_000 });
});

after(async () => {
  await daemon?.stop();
});

/** GET url through the daemon as if its host name resolved to it (wildcard DNS). */
function getVia(daemonUrl, hostUrl) {
  const d = new URL(daemonUrl);
  const u = new URL(`http://${hostUrl}`);
  return new Promise((ok, fail) => {
    const req = request({ host: d.hostname, port: d.port, path: u.pathname, headers: { Host: u.host } }, (res) => {
      let body = "";
      res.on("data", (c) => (body += c));
      res.on("end", () => ok({ status: res.statusCode, body }));
    });
    req.on("error", fail);
    req.end();
  });
}

describe("commands", () => {
  test("foreground: output and exit code", async () => {
    const r = await sbx.commands.run("echo out; echo err >&2");
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout, "out\n");
    assert.equal(r.stderr, "err\n");
  });

  test("a non-zero exit is CommandExitError", async () => {
    await assert.rejects(sbx.commands.run("echo bad >&2; exit 3"), (e) => {
      assert.ok(e instanceof CommandExitError, String(e));
      assert.equal(e.exitCode, 3);
      assert.equal(e.stderr, "bad\n");
      return true;
    });
  });

  test("envs and cwd", async () => {
    const r = await sbx.commands.run('echo "$GREETING $(pwd)"', { envs: { GREETING: "hi" }, cwd: "/tmp" });
    assert.equal(r.stdout, "hi /tmp\n");
  });

  test("background and wait, with streamed output", async () => {
    const seen = [];
    const h = await sbx.commands.run("echo one; sleep 1; echo two", { background: true, onStdout: (d) => seen.push(d) });
    assert.ok(h.pid > 0);
    const r = await h.wait();
    assert.equal(r.stdout, "one\ntwo\n");
    assert.equal(seen.join(""), "one\ntwo\n");
  });

  test("stdin: send, close, wait", async () => {
    const h = await sbx.commands.run("cat", { background: true, stdin: true });
    await sbx.commands.sendStdin(h.pid, "hello ");
    await h.sendStdin("stdin");
    await h.closeStdin();
    const r = await h.wait();
    assert.equal(r.stdout, "hello stdin");
  });

  test("list, connect and kill", async () => {
    const h = await sbx.commands.run("sleep 120", { background: true });
    const procs = await sbx.commands.list();
    assert.ok(procs.some((p) => p.pid === h.pid), JSON.stringify(procs));
    const again = await sbx.commands.connect(h.pid);
    assert.equal(again.pid, h.pid);
    assert.equal(await sbx.commands.kill(h.pid), true);
    await assert.rejects(h.wait(), CommandExitError);
    assert.equal(await sbx.commands.kill(h.pid), false);
  });

  test("a command past its timeoutMs is TimeoutError", async () => {
    await assert.rejects(sbx.commands.run("sleep 30", { timeoutMs: 1000 }), TimeoutError);
  });
});

describe("files", () => {
  test("write, read, list, exists, getInfo", async () => {
    const info = await sbx.files.write("/tmp/e2b/a.txt", "content");
    assert.equal(info.path, "/tmp/e2b/a.txt");
    assert.equal(await sbx.files.read("/tmp/e2b/a.txt"), "content");
    const bytes = await sbx.files.read("/tmp/e2b/a.txt", { format: "bytes" });
    assert.deepEqual(Buffer.from(bytes).toString(), "content");
    const list = await sbx.files.list("/tmp/e2b");
    assert.deepEqual(list.map((e) => [e.name, e.type]), [["a.txt", "file"]]);
    assert.equal(await sbx.files.exists("/tmp/e2b/a.txt"), true);
    assert.equal(await sbx.files.exists("/tmp/e2b/none"), false);
    const st = await sbx.files.getInfo("/tmp/e2b/a.txt");
    assert.equal(st.size, 7);
  });

  test("writeFiles (multipart, several files)", async () => {
    await sbx.files.write([
      { path: "/tmp/multi/x", data: "x" },
      { path: "/tmp/multi/y", data: "yy" },
    ]);
    assert.equal(await sbx.files.read("/tmp/multi/y"), "yy");
  });

  test("makeDir, rename, remove", async () => {
    assert.equal(await sbx.files.makeDir("/tmp/e2b/dir/sub"), true);
    assert.equal(await sbx.files.makeDir("/tmp/e2b/dir/sub"), false);
    await sbx.files.write("/tmp/e2b/old.txt", "moved");
    const e = await sbx.files.rename("/tmp/e2b/old.txt", "/tmp/e2b/dir/new.txt");
    assert.equal(e.path, "/tmp/e2b/dir/new.txt");
    assert.equal(await sbx.files.read("/tmp/e2b/dir/new.txt"), "moved");
    await sbx.files.remove("/tmp/e2b/dir");
    assert.equal(await sbx.files.exists("/tmp/e2b/dir"), false);
  });

  test("reading a missing file is NotFoundError", async () => {
    await assert.rejects(sbx.files.read("/tmp/e2b/missing"), NotFoundError);
  });

  test("signed download URL", async () => {
    await sbx.files.write("/tmp/e2b/signed.txt", "signed");
    const url = await sbx.downloadUrl("/tmp/e2b/signed.txt");
    const res = await fetch(url, { headers: { "E2b-Sandbox-Id": sbx.sandboxId } });
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "signed");
    const bad = new URL(url);
    bad.searchParams.set("signature", "v1_forged");
    assert.equal((await fetch(bad, { headers: { "E2b-Sandbox-Id": sbx.sandboxId } })).status, 401);
  });

  test("watchDir reports a created file", async () => {
    await sbx.files.makeDir("/tmp/watched");
    const events = [];
    let seen;
    const got = new Promise((ok) => (seen = ok));
    const w = await sbx.files.watchDir("/tmp/watched", (ev) => {
      events.push(ev);
      if (ev.name === "new.txt") seen();
    });
    await sbx.files.write("/tmp/watched/new.txt", "x");
    await got;
    await w.stop();
    assert.ok(events.some((e) => e.name === "new.txt" && e.type === "create"), JSON.stringify(events));
  });
});

describe("sandbox", () => {
  test("getInfo, setTimeout, list with a metadata filter", async () => {
    const before = await sbx.getInfo();
    assert.equal(before.sandboxId, sbx.sandboxId);
    assert.equal(before.metadata.suite, "e2b-compat");
    assert.equal(before.state, "running");
    await sbx.setTimeout(600_000);
    const afterInfo = await sbx.getInfo();
    assert.ok(afterInfo.endAt > before.endAt);
    const page = await Sandbox.list({ query: { metadata: { suite: "e2b-compat" } } }).nextItems();
    assert.deepEqual(page.map((s) => s.sandboxId), [sbx.sandboxId]);
    const none = await Sandbox.list({ query: { metadata: { suite: "other" } } }).nextItems();
    assert.deepEqual(none, []);
  });

  test("getHost and an HTTP request to a server in the sandbox", async () => {
    await sbx.files.write("/tmp/www/index.html", "hello from the sandbox");
    await sbx.commands.run("cd /tmp/www && python3 -m http.server 8000", { background: true, timeoutMs: 0 });
    const host = sbx.getHost(8000);
    assert.equal(host, `8000-${sbx.sandboxId}.${process.env.E2B_DOMAIN}`);
    let res;
    for (let i = 0; i < 100; i++) {
      res = await getVia(daemon.url, host + "/index.html");
      if (res.status === 200) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(res.status, 200);
    assert.equal(res.body, "hello from the sandbox");
  });

  test("pause and connect: resumes with state kept", async () => {
    const s = await Sandbox.create({ metadata: { suite: "pause" } });
    await s.files.write("/tmp/state.txt", "kept");
    assert.equal(await s.pause(), true);
    const paused = await Sandbox.list({ query: { state: ["paused"], metadata: { suite: "pause" } } }).nextItems();
    assert.deepEqual(paused.map((x) => x.sandboxId), [s.sandboxId]);
    const back = await Sandbox.connect(s.sandboxId);
    assert.equal((await back.getInfo()).state, "running");
    assert.equal(await back.files.read("/tmp/state.txt"), "kept");
    await back.kill();
  });

  test("kill, then the sandbox is gone", async () => {
    const s = await Sandbox.create();
    assert.equal(await Sandbox.kill(s.sandboxId), true);
    await assert.rejects(Sandbox.getInfo(s.sandboxId), SandboxNotFoundError);
    assert.equal(await Sandbox.kill(s.sandboxId), false);
  });
});

describe("errors", () => {
  test("unknown sandbox: SandboxNotFoundError", async () => {
    await assert.rejects(Sandbox.connect("sbdoesnotexist"), SandboxNotFoundError);
    await assert.rejects(Sandbox.getInfo("sbdoesnotexist"), SandboxNotFoundError);
  });

  test("the key in E2B's shape (e2b_ + hex) works too", async () => {
    const apiKey = "e2b_" + Buffer.from(process.env.E2B_API_KEY).toString("hex");
    const page = await Sandbox.list({ apiKey, query: { metadata: { suite: "e2b-compat" } } }).nextItems();
    assert.deepEqual(page.map((s) => s.sandboxId), [sbx.sandboxId]);
  });

  test("wrong API key: AuthenticationError", async () => {
    await assert.rejects(Sandbox.create({ apiKey: "e2b_wrong" }), AuthenticationError);
    await assert.rejects(Sandbox.list({ apiKey: "e2b_wrong" }).nextItems(), AuthenticationError);
  });

  test("envd with a wrong access token: AuthenticationError", async () => {
    // The SDK reads the token when it builds its transports: build one.
    const s = new Sandbox({ sandboxId: sbx.sandboxId, envdAccessToken: "wrong", envdVersion: "0.5.7" });
    await assert.rejects(s.commands.run("true"), AuthenticationError);
    await assert.rejects(s.files.read("/etc/hostname"), AuthenticationError);
  });
});
