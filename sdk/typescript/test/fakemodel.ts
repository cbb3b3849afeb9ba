// Starts the fake model API every test suite shares: the Go binary
// paddock-fakemodel (internal/fakemodel), named by PADDOCK_FAKEMODEL_BIN
// (default: the repository's bin/paddock-fakemodel, built by `make build`).
// It speaks the Anthropic Messages and OpenAI Responses wire formats,
// validates requests like the real APIs, and plays the examples' scripted
// model (fakemodel.Examples): buggy code first, the fix once the failure
// comes back, then an answer made of what the sandbox printed.

import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/** One request the fake received. */
export interface FakeRequest {
  api: string;
  path: string;
  status: number;
  error?: string;
  body: unknown;
}

export interface FakeModels {
  /** For ANTHROPIC_BASE_URL. */
  anthropicURL: string;
  /** For OPENAI_BASE_URL. */
  openaiURL: string;
  /** Every request so far, oldest first. */
  requests(): Promise<FakeRequest[]>;
  close(): Promise<void>;
}

/** bin/paddock-fakemodel (this file is compiled to sdk/typescript/dist-test/test/). */
function fakemodelBin(): string {
  return process.env.PADDOCK_FAKEMODEL_BIN || fileURLToPath(new URL("../../../../bin/paddock-fakemodel", import.meta.url));
}

export async function startFakeModels(): Promise<FakeModels> {
  const bin = fakemodelBin();
  if (!existsSync(bin)) throw new Error(`no paddock-fakemodel at ${bin}: run \`make build\` first or set PADDOCK_FAKEMODEL_BIN`);
  const child = spawn(bin, [], { stdio: ["ignore", "pipe", "inherit"] });
  const exited = new Promise<void>((ok) => child.once("exit", () => ok()));
  const lines = createInterface({ input: child.stdout! });
  const url = await new Promise<string>((ok, fail) => {
    lines.once("line", (l) => (l.startsWith("http://") ? ok(l.trim()) : fail(new Error(`paddock-fakemodel printed ${l}`))));
    child.once("exit", (code) => fail(new Error(`paddock-fakemodel exited with ${code}`)));
  });
  lines.close();
  return {
    anthropicURL: url,
    openaiURL: `${url}/v1`,
    async requests() {
      const res = await fetch(`${url}/fake/requests`);
      return (await res.json()) as FakeRequest[];
    },
    async close() {
      child.kill("SIGTERM");
      await exited;
    },
  };
}
