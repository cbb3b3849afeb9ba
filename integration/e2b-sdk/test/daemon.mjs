// Starts a real paddockd with its E2B-compatible endpoint for the tests and
// points the unmodified e2b SDK at it through its environment variables
// only. PADDOCK_BIN names the directory of paddockd (default: the
// repository's bin/).

import { execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);

function binDir() {
  return process.env.PADDOCK_BIN || resolve(fileURLToPath(new URL("../../../bin", import.meta.url)));
}

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

/** The sandbox domain of getHost() names in the tests (resolved by hand). */
export const DOMAIN = "e2b.paddock.test";

export async function startDaemon() {
  if (process.getuid?.() !== 0) throw new Error("the paddockd tests need root");
  const bin = join(binDir(), "paddockd");
  if (!existsSync(bin)) throw new Error(`no paddockd at ${bin}: run \`make build\` first or set PADDOCK_BIN`);
  const stateDir = await mkdtemp(join(tmpdir(), "paddock-e2b-"));
  await chmod(stateDir, 0o755);
  const { stdout } = await run(bin, ["keys", "create", "--state-dir", stateDir, "--name", "e2b"]);
  const key = stdout.trim();
  const api = `127.0.0.1:${await freePort()}`;
  const e2b = `127.0.0.1:${await freePort()}`;
  const args = ["serve", "--state-dir", stateDir, "--listen", api, "--e2b-listen", e2b, "--e2b-domain", DOMAIN, "--log-level", "debug"];
  if (process.env.PADDOCK_TEST_RUNTIME) args.push("--runtime", process.env.PADDOCK_TEST_RUNTIME);
  const child = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  const keep = (b) => (log = (log + b.toString()).slice(-200_000));
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  const exited = new Promise((ok) => child.once("exit", () => ok()));
  const url = `http://${e2b}`;
  const deadline = Date.now() + 30_000;
  let healthy = false;
  while (Date.now() < deadline && child.exitCode === null) {
    try {
      if ((await fetch(`${url}/health`)).ok) {
        healthy = true;
        break;
      }
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  if (!healthy) {
    child.kill("SIGKILL");
    throw new Error(`paddockd did not start:\n${log}`);
  }
  // The SDK's own configuration, nothing else.
  process.env.E2B_API_URL = url;
  process.env.E2B_SANDBOX_URL = url;
  process.env.E2B_API_KEY = key;
  process.env.E2B_DOMAIN = DOMAIN;
  return {
    url,
    key,
    log: () => log,
    async stop() {
      // SIGTERM leaves sandboxes running (re-adopted on restart): delete
      // what the tests left first.
      try {
        const headers = { "X-API-KEY": key };
        const res = await fetch(`${url}/v2/sandboxes`, { headers });
        for (const s of await res.json()) await fetch(`${url}/sandboxes/${s.sandboxID}`, { method: "DELETE", headers });
      } catch {
        // best effort
      }
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
      await exited;
      clearTimeout(timer);
      await rm(stateDir, { recursive: true, force: true });
    },
  };
}
