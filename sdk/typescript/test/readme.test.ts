// The README's plain-JavaScript snippet runs as written under this Node (CI: Node 20). Needs root.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before, it } from "node:test";

import { startDaemon, type Daemon } from "./daemon.js";

let d: Daemon;

before(async () => {
  d = await startDaemon();
});

after(async () => {
  await d?.stop();
});

/** The first ```js block of README.md (this file runs from dist-test/test/). */
function snippet(): string {
  const readme = readFileSync(fileURLToPath(new URL("../../README.md", import.meta.url)), "utf8");
  const m = /```js\n([\s\S]*?)```/.exec(readme);
  assert.ok(m, "README.md has no ```js block");
  return m[1]!;
}

it("the README's plain-JS snippet runs on Node without await using", async () => {
  const code = snippet();
  assert.doesNotMatch(code, /await using/);
  // Inside the package, so "@paddock/sdk" resolves to this package's dist/ by self-reference.
  const file = fileURLToPath(new URL("../readme-snippet.mjs", import.meta.url));
  writeFileSync(file, code);
  try {
    const { stdout } = await promisify(execFile)(process.execPath, [file], {
      env: { ...process.env, PADDOCK_URL: d.url, PADDOCK_API_KEY: d.keys[0] },
      timeout: 120_000,
    });
    assert.equal(stdout, "42\n\n");
  } finally {
    rmSync(file, { force: true });
  }
});
