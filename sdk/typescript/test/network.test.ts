// PATCH /v1/sandboxes/{id}/network across modes (off → allowlist → off)
// against a real paddockd with a network pool and ports of its own (see
// daemon.ts). Needs root.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { BadRequestError, type Paddock } from "../src/index.js";
import { startDaemon, type Daemon } from "./daemon.js";

let d: Daemon;
let paddock: Paddock;

before(async () => {
  d = await startDaemon({ config: { network: { pool: "10.96.0.0/16", proxy_port: 15601, dns_port: 15653 } } });
  paddock = d.client(0);
});

after(async () => {
  await d?.stop();
});

describe("network on and off", () => {
  it("switches the network on and off in a running sandbox", async () => {
    await using s = await paddock.create({});
    const links = "ip -o link | awk '{print $2}' | tr -d ':' | cut -d@ -f1 | sort | tr '\\n' ' '";
    assert.equal((await s.exec(links)).stdout.trim(), "lo");
    assert.equal((await s.updateNetwork({ mode: "allowlist", allow: ["example.com"] })).network.mode, "allowlist");
    assert.equal((await s.exec(links)).stdout.trim(), "eth0 lo");
    assert.equal((await s.updateNetwork({ mode: "off" })).network.mode, "off");
    assert.equal((await s.exec(links)).stdout.trim(), "lo");
    await assert.rejects(s.updateNetwork({ mode: "full", allow: ["169.254.169.254/32"] }), BadRequestError);
    assert.equal(s.info.network.mode, "off");
  });
});
