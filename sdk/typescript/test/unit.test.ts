// Tests of the HTTP layer against a scripted local server (no paddockd).

import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";

import {
  BadRequestError,
  ConnectionError,
  InternalError,
  NoSpaceError,
  NotFoundError,
  NotSupportedError,
  Paddock,
  PaddockError,
  RequestTimeoutError,
  UnavailableError,
  VERSION,
  type ExecEvent,
} from "../src/index.js";
import { errorFor, errorFromBody } from "../src/errors.js";
import { resolveURL } from "../src/http.js";

type Handler = (req: IncomingMessage, body: Buffer, res: ServerResponse) => void | Promise<void>;

let server: Server;
let base = "";
const routes = new Map<string, Handler>();
const seen: { method: string; url: string; headers: IncomingMessage["headers"]; body: Buffer }[] = [];

before(async () => {
  server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body });
    const path = (req.url ?? "").split("?")[0] ?? "";
    const h = routes.get(`${req.method} ${path}`);
    if (!h) {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { code: "not_found", message: `no route ${req.method} ${path}` } }));
      return;
    }
    await h(req, body, res);
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  server.closeAllConnections();
  await new Promise((ok) => server.close(ok));
});

const sandboxInfo = {
  id: "sb1",
  template: "base",
  state: "running",
  created_at: "2025-06-01T12:00:00Z",
  expires_at: "2025-06-01T12:05:00Z",
  metadata: {},
  resources: { vcpus: 1, memory_mib: 512, disk_mib: 1024, pids: 256 },
};

function json(res: ServerResponse, status: number, v: unknown): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(v));
}

async function sandbox(p: Paddock) {
  routes.set("GET /v1/sandboxes/sb1", (_q, _b, res) => json(res, 200, sandboxInfo));
  return p.get("sb1");
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("configuration", () => {
  it("resolves the base URL like the Go SDK", () => {
    assert.equal(resolveURL("http://h:1/"), "http://h:1");
    assert.equal(resolveURL("http://h:1/v1"), "http://h:1");
    assert.equal(resolveURL("http://h:1/v1/"), "http://h:1");
    assert.equal(resolveURL("h:7419"), "http://h:7419");
    assert.equal(resolveURL("https://x.example/paddock"), "https://x.example/paddock");
    const saved = process.env.PADDOCK_URL;
    delete process.env.PADDOCK_URL;
    try {
      assert.equal(resolveURL(), "http://127.0.0.1:7419");
      process.env.PADDOCK_URL = "10.0.0.1:9";
      assert.equal(new Paddock().url, "http://10.0.0.1:9");
    } finally {
      if (saved === undefined) delete process.env.PADDOCK_URL;
      else process.env.PADDOCK_URL = saved;
    }
  });

  it("sends the key, the user agent, JSON and escaped paths and queries", async () => {
    const p = new Paddock({ url: base, apiKey: " key-1\n" });
    const sbx = await sandbox(p);
    routes.set("PUT /v1/sandboxes/sb1/files", (_q, body, res) => json(res, 200, { path: "/workspace/a b", name: "a b", type: "file", size: body.length, mode: "0755", modified_at: "" }));
    seen.length = 0;
    await sbx.files.write("dir/a b&c=d", "héllo", { mode: 0o755 });
    const r = seen[0];
    assert.ok(r);
    assert.equal(r.method, "PUT");
    assert.equal(r.url, "/v1/sandboxes/sb1/files?path=dir%2Fa+b%26c%3Dd&mode=0755");
    assert.equal(r.headers.authorization, "Bearer key-1");
    assert.equal(r.headers["user-agent"], `paddock-ts/${VERSION}`);
    assert.equal(r.headers["content-type"], "application/octet-stream");
    assert.equal(r.body.toString(), "héllo");

    routes.set("GET /v1/sandboxes", (_q, _b, res) => json(res, 200, { sandboxes: [], next_cursor: "" }));
    seen.length = 0;
    await p.listPage({ metadata: { user: "a&b", "x.y": "1" }, state: "all", limit: 5 });
    assert.equal(seen[0]?.url, "/v1/sandboxes?limit=5&state=all&metadata.user=a%26b&metadata.x.y=1");

    routes.set("POST /v1/sandboxes/sb1/exec", (_q, _b, res) => json(res, 200, {}));
    seen.length = 0;
    await sbx.exec({ argv: ["cat"], stdin: new Uint8Array([0, 255, 1]) });
    assert.equal(seen[0]?.headers["content-type"], "application/json");
    assert.deepEqual(JSON.parse(seen[0]?.body.toString() ?? ""), { argv: ["cat"], stdin_base64: "AP8B" });
  });
});

describe("errors", () => {
  it("maps codes and statuses to classes", () => {
    assert.ok(errorFor(404, "not_found", "x") instanceof NotFoundError);
    // An unknown code falls back on the status.
    const e = errorFor(404, "gone_fishing", "x");
    assert.ok(e instanceof NotFoundError);
    assert.equal(e.code, "gone_fishing");
    assert.ok(errorFor(599, "", "x") instanceof InternalError);
    const plain = errorFor(418, "", "teapot");
    assert.equal(plain.constructor, PaddockError);
    assert.equal(plain.code, "http_418");
    // Bodies that are not the JSON error format.
    const html = errorFromBody(502, "Bad Gateway", "<html><body>bad gateway</body></html>");
    assert.ok(html instanceof UnavailableError);
    assert.equal(html.message, "bad gateway");
    const textBody = errorFromBody(400, "Bad Request", "missing path\nmore");
    assert.ok(textBody instanceof BadRequestError);
    assert.equal(textBody.message, "missing path");
  });

  it("knows not_supported (501)", () => {
    const e = errorFromBody(501, "Not Implemented", JSON.stringify({ error: { code: "not_supported", message: "networking is not available" } }));
    assert.ok(e instanceof NotSupportedError);
    assert.ok(e instanceof PaddockError);
    assert.equal(e.status, 501);
    assert.equal(e.code, "not_supported");
    assert.equal(e.name, "NotSupportedError");
    assert.equal(e.message, "networking is not available");
    // Without a code in the body, the status picks the class.
    assert.ok(errorFromBody(501, "Not Implemented", "") instanceof NotSupportedError);
    assert.equal(new NotSupportedError("no").status, 501);
  });

  it("throws typed errors from answers", async () => {
    const p = new Paddock({ url: base, apiKey: "k" });
    const sbx = await sandbox(p);
    routes.set("PUT /v1/sandboxes/sb1/files", (_q, _b, res) => json(res, 507, { error: { code: "no_space", message: "disk full" } }));
    await assert.rejects(sbx.files.write("x", "y"), (err: unknown) => {
      assert.ok(err instanceof NoSpaceError);
      assert.equal(err.status, 507);
      assert.equal(err.message, "disk full");
      return true;
    });
  });

  it("reports an unreachable daemon as a ConnectionError", async () => {
    const dead = createServer();
    await new Promise<void>((ok) => dead.listen(0, "127.0.0.1", ok));
    const port = (dead.address() as AddressInfo).port;
    await new Promise((ok) => dead.close(ok));
    const p = new Paddock({ url: `http://127.0.0.1:${port}`, apiKey: "k" });
    await assert.rejects(p.health(), (err: unknown) => {
      assert.ok(err instanceof ConnectionError);
      assert.equal(err.status, 0);
      assert.match(err.message, /ECONNREFUSED|fetch failed/);
      return true;
    });
  });
});

describe("deadlines and cancellation", () => {
  it("times out a request that gets no answer", async () => {
    routes.set("GET /v1/health", async (_q, _b, res) => {
      await sleep(2000);
      json(res, 200, { status: "ok", version: "x" });
    });
    const p = new Paddock({ url: base, requestTimeoutMs: 200 });
    const t0 = Date.now();
    await assert.rejects(p.health(), RequestTimeoutError);
    assert.ok(Date.now() - t0 < 1500);
    await assert.rejects(new Paddock({ url: base }).health({ requestTimeoutMs: 100 }), (err: unknown) => {
      assert.ok(err instanceof RequestTimeoutError);
      assert.ok(err instanceof ConnectionError);
      assert.equal(err.code, "timeout");
      return true;
    });
  });

  it("extends the default deadline of exec by its timeout_seconds", async () => {
    const p = new Paddock({ url: base, apiKey: "k", requestTimeoutMs: 100 });
    const sbx = await sandbox(p);
    routes.set("POST /v1/sandboxes/sb1/exec", async (_q, _b, res) => {
      await sleep(400);
      json(res, 200, { exit_code: 0, signal: null, timed_out: false, stdout: "ok", stderr: "" });
    });
    const res = await sbx.exec({ command: "x", timeout_seconds: 1 });
    assert.equal(res.stdout, "ok");
    await assert.rejects(sbx.exec({ command: "x" }, { requestTimeoutMs: 100 }), RequestTimeoutError);
  });

  it("aborts with the signal's reason", async () => {
    routes.set("GET /v1/health", async (_q, _b, res) => {
      await sleep(2000);
      json(res, 200, { status: "ok", version: "x" });
    });
    const p = new Paddock({ url: base });
    const ac = new AbortController();
    setTimeout(() => ac.abort(new Error("user gave up")), 100);
    await assert.rejects(p.health({ signal: ac.signal }), /user gave up/);
    await assert.rejects(p.health({ signal: AbortSignal.timeout(50) }), (err: unknown) => {
      assert.ok(err instanceof Error);
      assert.equal(err.name, "TimeoutError");
      return true;
    });
  });
});

describe("event streams", () => {
  const b64 = (s: string | Buffer) => Buffer.from(s).toString("base64");

  it("reassembles lines split across writes and decodes data", async () => {
    const p = new Paddock({ url: base, apiKey: "k" });
    const sbx = await sandbox(p);
    routes.set("POST /v1/sandboxes/sb1/exec", async (req, _b, res) => {
      assert.equal(req.headers.accept, "application/x-ndjson");
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      const lines =
        [
          { type: "start", pid: 7, time: "t0" },
          { type: "stdout", data: b64("héllo\n") },
          { type: "stderr", data: b64(Buffer.from([0, 1, 254, 255])) },
          { type: "future-type", x: 1 },
          { type: "exit", exit_code: 2, signal: null, timed_out: false, stdout: "", stderr: "", stdout_truncated: false, stderr_truncated: false, stdout_bytes: 7, stderr_bytes: 4, duration_ms: 5 },
        ]
          .map((l) => JSON.stringify(l))
          .join("\n") + "\n";
      const bytes = Buffer.from(lines);
      for (let i = 0; i < bytes.length; i += 7) {
        res.write(bytes.subarray(i, i + 7));
        await sleep(1);
      }
      res.end();
    });
    const evs: ExecEvent[] = [];
    for await (const ev of sbx.execStream({ command: "x" })) evs.push(ev);
    assert.deepEqual(evs.map((e) => e.type), ["start", "stdout", "stderr", "exit"]);
    assert.deepEqual(evs[0], { type: "start", pid: 7, time: "t0" });
    const out = evs[1];
    assert.ok(out?.type === "stdout" && out.data instanceof Uint8Array);
    assert.equal(Buffer.from(out.data).toString(), "héllo\n");
    const err = evs[2];
    assert.ok(err?.type === "stderr");
    assert.deepEqual([...err.data], [0, 1, 254, 255]);
    const exit = evs[3];
    assert.ok(exit?.type === "exit");
    assert.equal(exit.exit_code, 2);
    assert.equal(exit.stdout_bytes, 7);
  });

  it("throws the error of an error event", async () => {
    const p = new Paddock({ url: base, apiKey: "k" });
    const sbx = await sandbox(p);
    routes.set("POST /v1/sandboxes/sb1/exec", (_q, _b, res) => {
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.write(JSON.stringify({ type: "start", pid: 1 }) + "\n");
      res.end(JSON.stringify({ type: "error", error: { code: "unavailable", message: "agent went away" } }) + "\n");
    });
    const types: string[] = [];
    await assert.rejects(
      (async () => {
        for await (const ev of sbx.execStream({ command: "x" })) types.push(ev.type);
      })(),
      (err: unknown) => err instanceof UnavailableError && err.message === "agent went away" && err.status === 502,
    );
    assert.deepEqual(types, ["start"]);
  });

  it("throws when the stream ends without an exit event", async () => {
    const p = new Paddock({ url: base, apiKey: "k" });
    const sbx = await sandbox(p);
    routes.set("POST /v1/sandboxes/sb1/exec", (_q, _b, res) => {
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.end(JSON.stringify({ type: "stdout", data: b64("partial") }) + "\n");
    });
    await assert.rejects(
      (async () => {
        for await (const _ of sbx.execStream({ command: "x" })) {
          // drain
        }
      })(),
      (err: unknown) => err instanceof ConnectionError && /without an exit event/.test(err.message),
    );
  });

  it("turns a plain JSON answer into events", async () => {
    const p = new Paddock({ url: base, apiKey: "k" });
    const sbx = await sandbox(p);
    routes.set("POST /v1/sandboxes/sb1/exec", (_q, _b, res) =>
      json(res, 200, { exit_code: 0, signal: null, timed_out: false, stdout: "out", stderr: "err", stdout_truncated: false, stderr_truncated: false, stdout_bytes: 3, stderr_bytes: 3, duration_ms: 1 }),
    );
    const evs: ExecEvent[] = [];
    for await (const ev of sbx.execStream({ command: "x" })) evs.push(ev);
    assert.deepEqual(evs.map((e) => e.type), ["stdout", "stderr", "exit"]);
    const exit = evs[2];
    assert.ok(exit?.type === "exit" && exit.stdout === "" && exit.stdout_bytes === 3);
  });

  it("cancels the request when the loop is left", async () => {
    const p = new Paddock({ url: base, apiKey: "k" });
    const sbx = await sandbox(p);
    let closed: () => void = () => {};
    const gone = new Promise<void>((ok) => (closed = ok));
    routes.set("POST /v1/sandboxes/sb1/exec", (_q, _b, res) => {
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.write(JSON.stringify({ type: "start", pid: 1 }) + "\n");
      const timer = setInterval(() => res.write(JSON.stringify({ type: "stdout", data: b64("x") }) + "\n"), 10);
      res.on("close", () => {
        clearInterval(timer);
        closed();
      });
    });
    let n = 0;
    for await (const ev of sbx.execStream({ command: "x" })) {
      if (ev.type === "stdout" && ++n === 3) break;
    }
    await gone;
  });

  it("aborts a stream through its signal while reading", async () => {
    const p = new Paddock({ url: base, apiKey: "k" });
    const sbx = await sandbox(p);
    routes.set("POST /v1/sandboxes/sb1/exec", (_q, _b, res) => {
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.write(JSON.stringify({ type: "start", pid: 1 }) + "\n");
    });
    const ac = new AbortController();
    const reason = new Error("enough");
    await assert.rejects(
      (async () => {
        for await (const ev of sbx.execStream({ command: "x" }, { signal: ac.signal, requestTimeoutMs: 50 })) {
          if (ev.type === "start") setTimeout(() => ac.abort(reason), 200);
        }
      })(),
      (err: unknown) => err === reason,
    );
  });
});

describe("sandbox handle", () => {
  it("exec sends stdin last with Paddock-Stdin-Last", async () => {
    const p = new Paddock({ url: base, apiKey: "k" });
    const sbx = await sandbox(p);
    routes.set("POST /v1/sandboxes/sb1/exec", (_q, _b, res) =>
      json(res, 200, { exit_code: 0, signal: null, timed_out: false, stdout: "3\n", stderr: "" }),
    );
    const cases: [Parameters<typeof sbx.exec>[0], string | undefined, string][] = [
      [{ argv: ["wc", "-c"], stdin: "abc", max_output_bytes: 10 }, "true", "stdin"],
      [{ command: "wc -c", stdin: new Uint8Array([1, 2, 3]), timeoutMs: 1000 }, "true", "stdin_base64"],
      [{ command: "wc -c", stdin_base64: "AQID", cwd: "/" }, "true", "stdin_base64"],
      [{ command: "true" }, undefined, "command"],
    ];
    for (const [params, header, last] of cases) {
      seen.length = 0;
      await sbx.exec(params);
      const sent = seen.find((r) => r.url === "/v1/sandboxes/sb1/exec");
      assert.ok(sent);
      assert.equal(sent.headers["paddock-stdin-last"], header);
      assert.equal(Object.keys(JSON.parse(sent.body.toString()) as object).at(-1), last);
    }
  });

  it("kill treats 404 as done and shares one request", async () => {
    const p = new Paddock({ url: base, apiKey: "k" });
    const sbx = await sandbox(p);
    let deletes = 0;
    routes.set("DELETE /v1/sandboxes/sb1", (_q, _b, res) => {
      deletes++;
      json(res, 404, { error: { code: "not_found", message: "gone" } });
    });
    await Promise.all([sbx.kill(), sbx.close(), sbx[Symbol.asyncDispose]()]);
    await sbx.kill();
    assert.equal(deletes, 1);
  });

  it("kill can be retried after a failure", async () => {
    const p = new Paddock({ url: base, apiKey: "k" });
    const sbx = await sandbox(p);
    let deletes = 0;
    routes.set("DELETE /v1/sandboxes/sb1", (_q, _b, res) => {
      deletes++;
      if (deletes === 1) json(res, 500, { error: { code: "internal", message: "boom" } });
      else {
        res.writeHead(204);
        res.end();
      }
    });
    await assert.rejects(sbx.kill(), InternalError);
    await sbx.kill();
    await sbx.kill();
    assert.equal(deletes, 2);
  });

  it("waits in chunks until the process exits", async () => {
    const p = new Paddock({ url: base, apiKey: "k" });
    const sbx = await sandbox(p);
    routes.set("POST /v1/sandboxes/sb1/processes", (_q, _b, res) =>
      json(res, 201, { id: "p1", pid: 3, cwd: "/workspace", state: "running", started_at: "" }),
    );
    let waits = 0;
    const queries: string[] = [];
    routes.set("POST /v1/sandboxes/sb1/processes/p1/wait", (req, _b, res) => {
      waits++;
      queries.push(new URL(req.url ?? "", base).searchParams.get("timeout_seconds") ?? "");
      const exited = waits >= 3;
      json(res, 200, { id: "p1", pid: 3, cwd: "/workspace", state: exited ? "exited" : "running", started_at: "", ...(exited ? { result: { exit_code: 0, signal: null, timed_out: false, stdout: "", stderr: "" } } : {}) });
    });
    const proc = await sbx.start({ command: "x" });
    const info = await proc.wait();
    assert.equal(info.state, "exited");
    assert.equal(waits, 3);
    assert.deepEqual(queries, ["300", "300", "300"]);
    waits = 0;
    queries.length = 0;
    const limited = await proc.wait({ timeoutSeconds: 2.5 });
    assert.equal(waits, 1);
    assert.equal(limited.state, "running");
    assert.deepEqual(queries, ["2.5"]);
  });
});
