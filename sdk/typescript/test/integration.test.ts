// The SDK against a real paddockd (see daemon.ts). Needs root.

import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";

import {
  BadRequestError,
  ConflictError,
  NotFoundError,
  Paddock,
  PaddockError,
  RequestTimeoutError,
  UnauthorizedError,
  UnknownTemplateError,
  type ExecEvent,
  type Sandbox,
} from "../src/index.js";
import { startDaemon, type Daemon } from "./daemon.js";

let d: Daemon;
let paddock: Paddock;
/** A sandbox shared by the tests that do not care about isolation. */
let shared: Sandbox;

before(async () => {
  d = await startDaemon();
  paddock = d.client(0);
  shared = await paddock.create({ metadata: { suite: "shared" } });
});

after(async () => {
  if (!d) return;
  await shared?.kill().catch(() => {});
  await d.stop();
});

function text(chunks: Uint8Array[]): string {
  return Buffer.concat(chunks).toString("utf8");
}

describe("sandbox lifecycle", () => {
  it("creates a running sandbox and deletes it at the end of an await using scope", async () => {
    let id = "";
    {
      await using sbx = await paddock.create({ metadata: { test: "dispose" }, timeout_seconds: 120 });
      id = sbx.id;
      assert.equal(sbx.state, "running");
      assert.equal(sbx.template, "base");
      assert.deepEqual(sbx.metadata, { test: "dispose" });
      assert.ok(sbx.expiresAt.getTime() > Date.now());
      const res = await sbx.run("echo hello");
      assert.equal(res.stdout, "hello\n");
    }
    const after = await paddock.get(id);
    assert.equal(after.state, "terminated");
    assert.equal(after.info.reason, "deleted");
  });

  it("kill and close are idempotent", async () => {
    const sbx = await paddock.create();
    await Promise.all([sbx.kill(), sbx.kill()]);
    await sbx.close();
    await sbx.kill();
    await sbx[Symbol.asyncDispose]();
    // A fresh handle on a deleted sandbox: the daemon still knows the record.
    const again = await paddock.get(sbx.id);
    await again.kill();
    assert.equal((await again.refresh()).state, "terminated");
  });

  it("sets the lease", async () => {
    const before = shared.expiresAt.getTime();
    const info = await shared.setTimeout(1800);
    const expires = Date.parse(info.expires_at);
    assert.ok(expires > before, "the lease was extended");
    assert.ok(Math.abs(expires - (Date.now() + 1800_000)) < 60_000, "expires_at is about now + 1800 s");
    assert.equal(shared.expiresAt.getTime(), expires);
    await assert.rejects(shared.setTimeout(-1), RangeError);
  });

  it("reports health", async () => {
    const h = await paddock.health();
    assert.equal(h.status, "ok");
  });
});

describe("exec", () => {
  it("writes a Python file and runs it", async () => {
    const code = "import sys\nprimes = [n for n in range(2, 50) if all(n % d for d in range(2, n))]\nprint(sum(primes))\nprint('warn', file=sys.stderr)\n";
    const entry = await shared.files.write("prog/main.py", code);
    assert.equal(entry.path, "/workspace/prog/main.py");
    assert.equal(entry.type, "file");
    assert.equal(entry.size, Buffer.byteLength(code));
    const res = await shared.exec({ argv: ["python3", "main.py"], cwd: "prog" });
    assert.equal(res.exit_code, 0);
    assert.equal(res.signal, null);
    assert.equal(res.timed_out, false);
    assert.equal(res.stdout, "328\n");
    assert.equal(res.stderr, "warn\n");
    assert.equal(res.stdout_bytes, 4);
    assert.equal(typeof res.duration_ms, "number");
  });

  it("runs argv without a shell and command with one", async () => {
    const direct = await shared.exec({ argv: ["echo", "$HOME", "a|b"] });
    assert.equal(direct.stdout, "$HOME a|b\n");
    const shell = await shared.exec({ command: "X=6; echo $((X*7)) | cat && echo done", env: { Y: "1" } });
    assert.equal(shell.stdout, "42\ndone\n");
    const env = await shared.exec({ command: 'echo "$GREETING"', env: { GREETING: "hi there" } });
    assert.equal(env.stdout, "hi there\n");
  });

  it("feeds stdin, text and binary", async () => {
    const up = await shared.exec({ argv: ["python3", "-c", "import sys; print(sys.stdin.read().upper())"], stdin: "hi" });
    assert.equal(up.stdout, "HI\n");
    const bytes = randomBytes(4096);
    const sum = await shared.exec({ argv: ["sha256sum"], stdin: new Uint8Array(bytes) });
    assert.equal(sum.stdout.split(" ")[0], createHash("sha256").update(bytes).digest("hex"));
    // Large ones stream through the daemon (stdin last, Paddock-Stdin-Last).
    const big = randomBytes(2 << 20);
    const bigSum = await shared.exec({ argv: ["sha256sum"], stdin: new Uint8Array(big) });
    assert.equal(bigSum.stdout.split(" ")[0], createHash("sha256").update(big).digest("hex"));
    const text = await shared.exec({ argv: ["wc", "-c"], stdin: "é".repeat(1 << 20) });
    assert.equal(text.stdout, "2097152\n");
  });

  it("returns a non-zero exit as a result", async () => {
    const res = await shared.exec({ command: "echo out; echo err >&2; exit 7" });
    assert.equal(res.exit_code, 7);
    assert.equal(res.signal, null);
    assert.equal(res.stdout, "out\n");
    assert.equal(res.stderr, "err\n");
    const tb = await shared.exec({ argv: ["python3", "-c", "1/0"] });
    assert.equal(tb.exit_code, 1);
    assert.match(tb.stderr, /ZeroDivisionError/);
  });

  it("returns a timeout as a result and kills the command's processes", async () => {
    const t0 = Date.now();
    const res = await shared.exec({ command: "echo start; sleep 100 & sleep 100", timeout_seconds: 1 });
    assert.equal(res.timed_out, true);
    assert.equal(res.exit_code, null);
    assert.equal(res.signal, "SIGKILL");
    assert.equal(res.stdout, "start\n");
    assert.ok(Date.now() - t0 < 20_000);
    const ps = await shared.exec({ command: "cat /proc/[0-9]*/comm | grep -c '^sleep$' || true" });
    assert.equal(ps.stdout, "0\n");
  });

  it("sets the truncation flags past max_output_bytes", async () => {
    const res = await shared.exec({
      argv: ["python3", "-c", "import sys; print('x' * 10000); sys.stderr.write('e' * 50)"],
      max_output_bytes: 100,
    });
    assert.equal(res.exit_code, 0);
    assert.equal(res.stdout, "x".repeat(100));
    assert.equal(res.stdout_truncated, true);
    assert.equal(res.stdout_bytes, 10001);
    assert.equal(res.stderr, "e".repeat(50));
    assert.equal(res.stderr_truncated, false);
    assert.equal(res.stderr_bytes, 50);
  });

  it("cancels through an AbortSignal and a client-side deadline", async () => {
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 300);
    await assert.rejects(shared.exec({ command: "sleep 30" }, { signal: ac.signal }), (err: unknown) => {
      assert.ok(err instanceof Error);
      assert.equal(err.name, "AbortError");
      return true;
    });
    await assert.rejects(shared.exec({ command: "sleep 30" }, { requestTimeoutMs: 300 }), RequestTimeoutError);
    const reason = new Error("stop now");
    await assert.rejects(shared.exec({ command: "sleep 30" }, { signal: AbortSignal.abort(reason) }), (err) => err === reason);
    // The sandbox still works afterwards.
    assert.equal((await shared.run("echo ok")).stdout, "ok\n");
  });
});

describe("streaming", () => {
  it("streams start, output chunks and exit", async () => {
    const events: ExecEvent[] = [];
    const out: Uint8Array[] = [];
    const err: Uint8Array[] = [];
    for await (const ev of shared.execStream({
      command: "for i in 1 2 3; do echo $i; sleep 0.2; done; echo oops >&2; exit 3",
    })) {
      events.push(ev);
      if (ev.type === "stdout") out.push(ev.data);
      if (ev.type === "stderr") err.push(ev.data);
    }
    assert.equal(events[0]?.type, "start");
    const last = events.at(-1);
    assert.equal(last?.type, "exit");
    if (last?.type !== "exit") return;
    assert.equal(last.exit_code, 3);
    assert.equal(last.stdout, "");
    assert.equal(last.stdout_bytes, 6);
    assert.equal(last.stderr_bytes, 5);
    assert.equal(text(out), "1\n2\n3\n");
    assert.equal(text(err), "oops\n");
    assert.ok(events.filter((e) => e.type === "stdout").length >= 2, "output arrived in several chunks");
    const start = events[0];
    assert.ok(start?.type === "start" && start.pid > 0);
  });

  it("delivers output live, before the command ends", async () => {
    const t0 = Date.now();
    let firstAt = 0;
    for await (const ev of shared.execStream({ command: "echo first; sleep 2; echo second" })) {
      if (ev.type === "stdout" && firstAt === 0) firstAt = Date.now() - t0;
    }
    assert.ok(firstAt > 0 && firstAt < 1500, `first chunk after ${firstAt} ms`);
  });

  it("stops the stream when the loop is left early", async () => {
    const t0 = Date.now();
    for await (const ev of shared.execStream({ command: "echo go; sleep 60" })) {
      if (ev.type === "stdout") break;
    }
    assert.ok(Date.now() - t0 < 10_000);
    assert.equal((await shared.run("echo still here")).stdout, "still here\n");
  });

  it("throws the API error of a bad stream request", async () => {
    const gone = await paddock.create();
    await gone.kill();
    const it = gone.execStream({ argv: ["true"] });
    await assert.rejects(it.next(), (err: unknown) => err instanceof PaddockError && err.status >= 400);
  });
});

describe("files", () => {
  it("round-trips binary content", async () => {
    const bytes = new Uint8Array(256 * 4);
    for (let i = 0; i < bytes.length; i++) bytes[i] = i % 256;
    const entry = await shared.files.write("bin/all.bytes", bytes, { mode: 0o600 });
    assert.equal(entry.size, bytes.length);
    assert.equal(entry.mode, "0600");
    const back = await shared.files.read("/workspace/bin/all.bytes");
    assert.ok(back instanceof Uint8Array);
    assert.deepEqual(Buffer.from(back), Buffer.from(bytes));
    // The same bytes through an exec stream.
    const chunks: Uint8Array[] = [];
    for await (const ev of shared.execStream({ argv: ["cat", "bin/all.bytes"] })) {
      if (ev.type === "stdout") chunks.push(ev.data);
    }
    assert.deepEqual(Buffer.concat(chunks), Buffer.from(bytes));
    // Bytes written by the sandbox.
    await shared.exec({ command: "printf '\\x00\\xff\\x80abc' > bin/made" });
    assert.deepEqual(Buffer.from(await shared.files.read("bin/made")), Buffer.from([0, 0xff, 0x80, 0x61, 0x62, 0x63]));
  });

  it("lists, stats, makes and removes", async () => {
    await shared.files.mkdir("tree/a/b", { mode: "0700" });
    await shared.files.write("tree/a/one.txt", "one");
    await shared.files.write("tree/two.txt", "two ✓");
    assert.equal(await shared.files.readText("tree/two.txt"), "two ✓");
    const top = await shared.files.list("tree");
    assert.deepEqual(top.map((e) => e.name).sort(), ["a", "two.txt"]);
    const deep = await shared.files.list("tree", { depth: 3 });
    assert.ok(deep.some((e) => e.path === "/workspace/tree/a/b" && e.type === "dir"));
    assert.ok(deep.some((e) => e.path === "/workspace/tree/a/one.txt"));
    const st = await shared.files.stat("tree/a/b");
    assert.equal(st.type, "dir");
    assert.equal(st.mode, "0700");
    assert.equal(await shared.files.exists("tree/a/one.txt"), true);
    assert.equal(await shared.files.exists("tree/nope"), false);
    await assert.rejects(shared.files.remove("tree"), (err: unknown) => err instanceof PaddockError && err.status >= 400);
    await shared.files.remove("tree", { recursive: true });
    assert.equal(await shared.files.exists("tree"), false);
    await assert.rejects(shared.files.read("tree/two.txt"), NotFoundError);
  });
});

describe("listing", () => {
  it("filters by metadata and state and follows pages", async () => {
    const suite = `list-${Date.now()}`;
    const a = await paddock.create({ metadata: { suite, n: "1" } });
    const b = await paddock.create({ metadata: { suite, n: "2" } });
    const c = await paddock.create({ metadata: { suite, n: "3" } });
    try {
      const all = await paddock.list({ metadata: { suite } }).toArray();
      assert.deepEqual(all.map((s) => s.id).sort(), [a.id, b.id, c.id].sort());
      const two = await paddock.list({ metadata: { suite, n: "2" } }).toArray();
      assert.deepEqual(two.map((s) => s.id), [b.id]);
      assert.equal(two[0]?.metadata.n, "2");

      const pages = [];
      for await (const page of paddock.list({ metadata: { suite }, limit: 2 }).pages()) pages.push(page);
      assert.equal(pages.length, 2);
      assert.equal(pages[0]?.sandboxes.length, 2);
      assert.ok(pages[0]?.next_cursor);
      assert.equal(pages[1]?.next_cursor, "");
      const ids: string[] = [];
      for await (const s of paddock.list({ metadata: { suite }, limit: 1 })) ids.push(s.id);
      assert.deepEqual(ids.sort(), [a.id, b.id, c.id].sort());

      await c.kill();
      const live = await paddock.list({ metadata: { suite } }).toArray();
      assert.equal(live.length, 2);
      const everything = await paddock.list({ metadata: { suite }, state: "all" }).toArray();
      assert.equal(everything.length, 3);
      const terminated = await paddock.list({ metadata: { suite }, state: "terminated" }).toArray();
      assert.deepEqual(terminated.map((s) => [s.id, s.state]), [[c.id, "terminated"]]);

      // Another key sees none of them.
      assert.deepEqual(await d.client(1).list({ metadata: { suite }, state: "all" }).toArray(), []);
      // A listed sandbox is a working handle.
      const handle = two[0];
      assert.ok(handle);
      assert.equal((await handle.run("echo listed")).stdout, "listed\n");
    } finally {
      await Promise.all([a.kill(), b.kill(), c.kill()]);
    }
  });
});

describe("background processes", () => {
  it("feeds stdin to a process and waits for its result", async () => {
    const proc = await shared.start({
      argv: ["python3", "-u", "-c", "import sys\nfor line in sys.stdin:\n    print(line.strip().upper(), flush=True)\nprint('bye')"],
      keep_stdin_open: true,
    });
    assert.equal(proc.state, "running");
    assert.ok(proc.id);
    assert.ok(proc.pid > 0);
    await proc.writeStdin("hello\n");
    await proc.writeStdin(new TextEncoder().encode("world\n"));
    const still = await proc.wait({ timeoutSeconds: 0.5 });
    assert.equal(still.state, "running");
    await proc.closeStdin();
    const done = await proc.wait();
    assert.equal(done.state, "exited");
    assert.equal(done.result?.exit_code, 0);
    assert.equal(done.result?.stdout, "HELLO\nWORLD\nbye\n");
    assert.equal(proc.result?.stdout, "HELLO\nWORLD\nbye\n");

    // The output stream replays what the exited process printed.
    const out: Uint8Array[] = [];
    let exit: ExecEvent | undefined;
    for await (const ev of proc.output()) {
      if (ev.type === "stdout") out.push(ev.data);
      if (ev.type === "exit") exit = ev;
      assert.equal(ev.process_id, proc.id);
    }
    assert.equal(text(out), "HELLO\nWORLD\nbye\n");
    assert.equal(exit?.type === "exit" && exit.exit_code, 0);

    const listed = await shared.processes();
    assert.ok(listed.some((p) => p.id === proc.id && p.state === "exited"));
    const again = await shared.process(proc.id);
    assert.equal(again.result?.stdout, "HELLO\nWORLD\nbye\n");
  });

  it("streams live output and kills a process", async () => {
    const proc = await shared.start({ command: "echo ready; exec sleep 300" });
    const seen: string[] = [];
    for await (const ev of proc.output()) {
      if (ev.type === "stdout") {
        seen.push(Buffer.from(ev.data).toString());
        break;
      }
    }
    assert.deepEqual(seen, ["ready\n"]);
    await proc.kill();
    const done = await proc.wait({ timeoutSeconds: 30 });
    assert.equal(done.state, "exited");
    assert.equal(done.result?.signal, "SIGKILL");
    assert.equal(done.result?.exit_code, null);
  });

  it("sends other signals", async () => {
    const proc = await shared.start({ argv: ["python3", "-c", "import signal, sys, time\nsignal.signal(signal.SIGTERM, lambda *a: (print('term', flush=True), sys.exit(5)))\nprint('up', flush=True)\ntime.sleep(60)"] });
    let seen = "";
    for await (const ev of proc.output()) {
      if (ev.type === "stdout") seen += Buffer.from(ev.data).toString();
      if (seen.includes("up\n")) break;
    }
    await proc.kill("SIGTERM");
    const done = await proc.wait({ timeoutSeconds: 30 });
    assert.equal(done.result?.exit_code, 5);
    assert.equal(done.result?.stdout, "up\nterm\n");
  });
});

describe("errors", () => {
  it("404: unknown sandbox, process, or another key's sandbox", async () => {
    await assert.rejects(paddock.get("sb-does-not-exist"), (err: unknown) => {
      assert.ok(err instanceof NotFoundError);
      assert.ok(err instanceof PaddockError);
      assert.equal(err.status, 404);
      assert.equal(err.code, "not_found");
      assert.equal(err.name, "NotFoundError");
      assert.ok(err.message.length > 0);
      return true;
    });
    await assert.rejects(d.client(1).get(shared.id), NotFoundError);
    await assert.rejects(shared.process("p-nope"), NotFoundError);
  });

  it("400: bad requests", async () => {
    // Caught before the request.
    const neither = {} as unknown as Parameters<Sandbox["exec"]>[0];
    await assert.rejects(shared.exec(neither), /exactly one of argv and command/);
    const both = { argv: ["true"], command: "true" } as unknown as Parameters<Sandbox["exec"]>[0];
    await assert.rejects(shared.exec(both), TypeError);
    // Refused by the daemon.
    await assert.rejects(shared.exec({ command: "true", max_output_bytes: 1 << 30 }), (err: unknown) => {
      assert.ok(err instanceof BadRequestError);
      assert.equal(err.status, 400);
      assert.equal(err.code, "bad_request");
      return true;
    });
  });

  it("401: missing or unknown key", async () => {
    const wrong = new Paddock({ url: d.url, apiKey: "pdk_wrong" });
    await assert.rejects(wrong.create(), (err: unknown) => {
      assert.ok(err instanceof UnauthorizedError);
      assert.equal(err.status, 401);
      assert.equal(err.code, "unauthorized");
      return true;
    });
    const saved = process.env.PADDOCK_API_KEY;
    delete process.env.PADDOCK_API_KEY;
    try {
      await assert.rejects(new Paddock({ url: d.url }).listPage(), UnauthorizedError);
    } finally {
      if (saved !== undefined) process.env.PADDOCK_API_KEY = saved;
    }
    // Health needs no key.
    assert.equal((await wrong.health()).status, "ok");
  });

  it("409 and 422: a deleted sandbox, an unknown template", async () => {
    const sbx = await paddock.create();
    await sbx.kill();
    await assert.rejects(sbx.run("true"), ConflictError);
    await assert.rejects(paddock.create({ template: "no-such-template" }), UnknownTemplateError);
  });

  it("uses PADDOCK_URL and PADDOCK_API_KEY", async () => {
    const saved = { url: process.env.PADDOCK_URL, key: process.env.PADDOCK_API_KEY };
    process.env.PADDOCK_URL = `${d.url}/v1/`;
    process.env.PADDOCK_API_KEY = `${d.keys[0]}\n`;
    try {
      const env = new Paddock();
      assert.equal(env.url, d.url);
      const got = await env.get(shared.id);
      assert.equal(got.id, shared.id);
    } finally {
      for (const [k, v] of [["PADDOCK_URL", saved.url], ["PADDOCK_API_KEY", saved.key]] as const) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });
});
