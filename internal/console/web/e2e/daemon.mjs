// Starts a real paddockd for the console's end-to-end tests: a temporary
// state directory (mode 755), a free port, two API keys. PADDOCK_BIN names
// the directory of paddockd (default: the repository's bin/).
import { execFile, spawn } from "node:child_process";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);

function freePort() {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.once("error", fail);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => ok(port));
    });
  });
}

export async function startDaemon() {
  const bin = join(process.env.PADDOCK_BIN || resolve(fileURLToPath(new URL("../../../../bin", import.meta.url))), "paddockd");
  const stateDir = await mkdtemp(join(tmpdir(), "paddock-console-"));
  await chmod(stateDir, 0o755);
  const keys = [];
  for (const name of ["alice", "bob"]) {
    const { stdout } = await run(bin, ["keys", "create", "--state-dir", stateDir, "--name", name]);
    keys.push(stdout.trim());
  }
  const listen = `127.0.0.1:${await freePort()}`;
  const child = spawn(bin, ["serve", "--state-dir", stateDir, "--listen", listen], { stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  const keep = (b) => (log = (log + b.toString()).slice(-100_000));
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  const exited = new Promise((ok) => child.once("exit", ok));
  const url = `http://${listen}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      if ((await fetch(url + "/v1/health")).ok) break;
    } catch {
      /* not yet */
    }
    if (Date.now() > deadline || child.exitCode !== null) {
      child.kill("SIGKILL");
      throw new Error("paddockd did not become healthy:\n" + log.slice(-4000));
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  /** api calls the REST API with key i. */
  async function api(i, method, path, body, raw = false) {
    const r = await fetch(url + "/v1" + path, {
      method,
      headers: { Authorization: "Bearer " + keys[i], ...(body !== undefined && !raw ? { "Content-Type": "application/json" } : {}) },
      body: body === undefined ? undefined : raw ? body : JSON.stringify(body),
    });
    if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`);
    return r.status === 204 ? undefined : r.headers.get("content-type")?.includes("json") ? r.json() : r.text();
  }
  return {
    url,
    keys,
    api,
    log: () => log,
    async stop() {
      for (let i = 0; i < keys.length; i++) {
        const { sandboxes } = await api(i, "GET", "/sandboxes").catch(() => ({ sandboxes: [] }));
        for (const sb of sandboxes ?? []) await api(i, "DELETE", "/sandboxes/" + sb.id).catch(() => {});
      }
      child.kill("SIGTERM");
      const t = setTimeout(() => child.kill("SIGKILL"), 15_000);
      await exited;
      clearTimeout(t);
      await rm(stateDir, { recursive: true, force: true });
    },
  };
}
