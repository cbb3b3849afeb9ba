// Starts a real paddockd for the tests: a temporary state directory, a free
// port, two API keys. PADDOCK_BIN names the directory of paddockd (default:
// the repository's bin/); PADDOCK_TEST_RUNTIME picks the OCI runtime.
//
// The one daemon harness of the TypeScript suites: the SDK's tests import it
// from here, the examples' tests as "@paddock/sdk/test/daemon", a test-only
// subpath export of the SDK's test build (dist-test/, never packed).

import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { Paddock } from "../src/index.js";

const run = promisify(execFile);

/** The repository's bin/ (this file is compiled to sdk/typescript/dist-test/test/). */
export function binDir(): string {
  return process.env.PADDOCK_BIN || resolve(fileURLToPath(new URL("../../../../bin", import.meta.url)));
}

function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.once("error", fail);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() => (addr && typeof addr === "object" ? ok(addr.port) : fail(new Error("no port"))));
    });
  });
}

export interface Daemon {
  url: string;
  /** API keys: [alice, bob]. */
  keys: string[];
  client(i?: number): Paddock;
  log(): string;
  stop(): Promise<void>;
}

/** Options of startDaemon: `config` is written as the daemon's --config file. */
export interface DaemonOptions {
  config?: unknown;
}

export async function startDaemon(opts: DaemonOptions = {}): Promise<Daemon> {
  if (process.getuid?.() !== 0) throw new Error("the paddockd tests need root");
  const bin = join(binDir(), "paddockd");
  if (!existsSync(bin)) throw new Error(`no paddockd at ${bin}: run \`make build\` first or set PADDOCK_BIN`);
  const stateDir = await mkdtemp(join(tmpdir(), "paddock-ts-"));
  const keys: string[] = [];
  for (const name of ["alice", "bob"]) {
    const { stdout } = await run(bin, ["keys", "create", "--state-dir", stateDir, "--name", name]);
    keys.push(stdout.trim());
  }
  const listen = `127.0.0.1:${await freePort()}`;
  const args = ["serve", "--state-dir", stateDir, "--listen", listen, "--log-level", "debug"];
  if (process.env.PADDOCK_TEST_RUNTIME) args.push("--runtime", process.env.PADDOCK_TEST_RUNTIME);
  if (opts.config !== undefined) {
    const cfg = join(stateDir, "config.json");
    await writeFile(cfg, JSON.stringify(opts.config), { mode: 0o600 });
    args.push("--config", cfg);
  }
  const child: ChildProcess = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  const keep = (b: Buffer) => {
    log = (log + b.toString()).slice(-200_000);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const exited = new Promise<void>((ok) => child.once("exit", () => ok()));
  const url = `http://${listen}`;

  const deadline = Date.now() + 30_000;
  let healthy = false;
  while (Date.now() < deadline && child.exitCode === null) {
    try {
      const res = await fetch(`${url}/v1/health`);
      if (res.ok) {
        healthy = true;
        break;
      }
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  if (!healthy) {
    child.kill("SIGKILL");
    await exited;
    await rm(stateDir, { recursive: true, force: true });
    throw new Error(`paddockd did not become healthy:\n${log.slice(-4000)}`);
  }

  const client = (i = 0) => new Paddock({ url, apiKey: keys[i] ?? "" });
  return {
    url,
    keys,
    client,
    log: () => log,
    async stop() {
      // SIGTERM leaves sandboxes running (they are re-adopted on restart):
      // delete what the tests left first.
      for (let i = 0; i < keys.length; i++) {
        try {
          for await (const sbx of client(i).list()) await sbx.kill().catch(() => {});
        } catch {
          // best effort
        }
      }
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
      await exited;
      clearTimeout(timer);
      await rm(stateDir, { recursive: true, force: true });
    },
  };
}
