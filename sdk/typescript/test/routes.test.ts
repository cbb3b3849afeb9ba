// Every route the first SDK lacked, against a real paddockd (see daemon.ts). Needs root.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { BadRequestError, NotFoundError, Paddock, RequestTimeoutError, type Sandbox } from "../src/index.js";
import { startDaemon, type Daemon } from "./daemon.js";

let d: Daemon;
let paddock: Paddock;
let sbx: Sandbox;

before(async () => {
  d = await startDaemon();
  paddock = d.client(0);
  sbx = await paddock.create({ metadata: { suite: "routes" }, timeoutMs: 600_000 });
});

after(async () => {
  if (!d) return;
  await sbx?.kill().catch(() => {});
  await d.stop();
});

describe("timeouts", () => {
  it("a command that outlives timeoutMs is a timed-out result, not an exception", async () => {
    const t0 = Date.now();
    const res = await sbx.exec("sleep 30", { timeoutMs: 1500 });
    assert.equal(res.timed_out, true);
    assert.ok(Date.now() - t0 < 15_000, "exec returned long after its timeout");
  });

  it("timeoutMs in the params works the same", async () => {
    const res = await sbx.exec({ argv: ["sleep", "30"], timeoutMs: 1000 });
    assert.equal(res.timed_out, true);
  });

  it("a command within timeoutMs is not timed out, even past the client's request deadline", async () => {
    const short = new Paddock({ url: paddock.url, apiKey: d.keys[0], requestTimeoutMs: 500 });
    const s = await short.get(sbx.id);
    const res = await s.exec("sleep 2; echo done", { timeoutMs: 10_000 });
    assert.equal(res.timed_out, false);
    assert.equal(res.stdout, "done\n");
  });

  it("requestTimeoutMs still bounds the HTTP request", async () => {
    await assert.rejects(sbx.exec("sleep 30", { timeoutMs: 60_000, requestTimeoutMs: 300 }), RequestTimeoutError);
  });
});

describe("create", () => {
  it("takes every REST field, camelCase forms and a network mode string", async () => {
    await using s = await paddock.create({
      template: "base",
      resources: { vcpus: 1, memory_mib: 256 },
      env: { GREETING: "hi" },
      metadata: { test: "create-all" },
      network: "off",
      timeoutMs: 120_000,
      onTimeout: "pause",
      maxCostMicros: 1_000_000,
    });
    assert.equal(s.info.on_timeout, "pause");
    assert.equal(s.info.max_cost_micros, 1_000_000);
    assert.equal(s.info.network.mode, "off");
    assert.equal((await s.exec("echo $GREETING")).stdout, "hi\n");
  });

  it("rejects bad input before the request, naming the parameter", async () => {
    await assert.rejects(paddock.create({ network: "restricted" as never }), (e: unknown) => e instanceof RangeError && /network/.test(e.message));
    await assert.rejects(paddock.create({ timeoutMs: -1 }), (e: unknown) => e instanceof RangeError && /timeoutMs/.test(e.message));
    await assert.rejects(paddock.create({ env: { A: 1 as never } }), (e: unknown) => e instanceof TypeError && /env/.test(e.message));
    await assert.rejects(sbx.exec(42 as never), TypeError);
    await assert.rejects(sbx.exec("true", { timeoutMs: 0 }), (e: unknown) => e instanceof RangeError && /timeoutMs/.test(e.message));
    await assert.rejects(sbx.files.list("/", { depth: 21 }), (e: unknown) => e instanceof RangeError && /depth/.test(e.message));
  });

  it("maps the server's refusal to its typed error", async () => {
    await assert.rejects(paddock.create({ secrets: ["NO_SUCH_SECRET"], network: "full" }), BadRequestError);
  });
});

describe("sandbox routes", () => {
  it("pauses and resumes", async () => {
    await using s = await paddock.create({ timeoutMs: 120_000 });
    assert.equal((await s.pause()).state, "paused");
    assert.equal(s.state, "paused");
    assert.equal((await s.resume()).state, "running");
    assert.equal((await s.run("echo back")).stdout, "back\n");
  });

  it("reads metrics", async () => {
    const m = await sbx.metrics();
    assert.equal(m.sandbox_id, sbx.id);
    assert.equal(m.state, "running");
    assert.ok(m.cpu_seconds >= 0);
    const h = await sbx.metricsHistory();
    assert.equal(h.sandbox_id, sbx.id);
    assert.equal(h.max_samples, 360);
    assert.ok(Array.isArray(h.samples));
  });

  it("updates the network policy", async () => {
    await using s = await paddock.create({ network: { mode: "allowlist", allow: ["example.org"] } });
    const info = await s.updateNetwork({ mode: "allowlist", allow: ["example.com"] });
    assert.equal(info.network.mode, "allowlist");
    assert.deepEqual(info.network.allow, ["example.com"]);
    assert.equal(s.info.network.allow?.[0], "example.com");
    await assert.rejects(s.updateNetwork("full" as never), TypeError);
  });

  it("lists ports and reaches one by URL and signed URL", async () => {
    await sbx.files.write("www/hello.txt", "hello from the port\n");
    const proc = await sbx.start({ argv: ["python3", "-m", "http.server", "8765", "--bind", "127.0.0.1"], cwd: "/workspace/www" });
    let port;
    for (let i = 0; i < 100 && !port; i++) {
      port = (await sbx.ports()).find((p) => p.port === 8765);
      if (!port) await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(port, "port 8765 never listened");
    const viaKey = await fetch(sbx.portUrl(8765, "/hello.txt"), { headers: { Authorization: `Bearer ${d.keys[0]}` } });
    assert.equal(await viaKey.text(), "hello from the port\n");
    const signed = await sbx.signedPortUrl(8765, "hello.txt");
    const viaToken = await fetch(signed);
    assert.equal(await viaToken.text(), "hello from the port\n");
    await proc.kill();
    assert.throws(() => sbx.portUrl(0), RangeError);
  });

  it("uploads and downloads a directory", async () => {
    const n = await sbx.files.uploadDir("tree", { "a.txt": "A", "sub/b.bin": new Uint8Array([1, 2, 3]), "sub/deep/c.txt": "C" });
    assert.equal(n, 3);
    const got = await sbx.files.downloadDir("tree");
    assert.deepEqual([...got.keys()].sort(), ["a.txt", "sub/b.bin", "sub/deep/c.txt"]);
    assert.deepEqual([...got.get("sub/b.bin")!], [1, 2, 3]);
    await assert.rejects(sbx.files.uploadDir("tree", { "../x": "no" }), RangeError);
  });
});

describe("client routes", () => {
  it("reports usage", async () => {
    const u = await paddock.usage({ from: new Date(Date.now() - 3600_000) });
    assert.ok(u.sandboxes >= 1);
    await assert.rejects(paddock.usage({ from: "yesterday" }), TypeError);
  });

  it("creates, lists, uses and deletes secrets", async () => {
    const sec = await paddock.secrets.create({ name: "API_TOKEN", value: "s3cret", hosts: ["example.com"] });
    assert.equal(sec.name, "API_TOKEN");
    assert.ok((await paddock.secrets.list()).some((s) => s.name === "API_TOKEN"));
    {
      await using s = await paddock.create({ network: { mode: "allowlist", allow: ["example.com"] }, secrets: ["API_TOKEN"] });
      const env = (await s.run("printenv API_TOKEN")).stdout.trim();
      assert.ok(env !== "" && env !== "s3cret", "the sandbox sees a placeholder, never the value");
    }
    await paddock.secrets.delete("API_TOKEN");
    await assert.rejects(paddock.secrets.delete("API_TOKEN"), NotFoundError);
  });

  it("lists and gets templates, snapshots a sandbox, builds with progress and deletes", async () => {
    assert.ok((await paddock.templates.list()).some((t) => t.name === "base"));
    assert.equal((await paddock.templates.get("base")).name, "base");
    await sbx.files.write("/etc/snapshot-marker", "snap\n");
    const snap = await sbx.snapshot("snap-ts:v1");
    assert.equal(snap.name, "snap-ts:v1");
    const events: string[] = [];
    const built = await paddock.templates.create(
      { name: "built-ts:v1", recipe: { from: "snap-ts:v1", steps: [{ run: "echo built > /etc/built-marker" }] } },
      { onEvent: (ev) => events.push(ev.type) },
    );
    assert.equal(built.name, "built-ts:v1");
    assert.ok(events.includes("step") && events.at(-1) === "done", `events: ${events.join(",")}`);
    {
      await using s = await paddock.create({ template: "built-ts:v1" });
      assert.equal((await s.run("cat /etc/snapshot-marker /etc/built-marker")).stdout, "snap\nbuilt\n");
    }
    await paddock.templates.delete("built-ts:v1");
    await paddock.templates.delete("snap-ts:v1");
    await assert.rejects(paddock.templates.get("snap-ts:v1"), NotFoundError);
  });

  it("serves the OpenAPI document", async () => {
    assert.match(await paddock.openapi(), /^openapi: /m);
  });

  it("the client disposes with await using", async () => {
    await using p = new Paddock({ url: paddock.url, apiKey: d.keys[0] });
    assert.equal((await p.health()).status, "ok");
  });
});
