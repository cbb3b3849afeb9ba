// The unmodified `e2b` npm package against a cluster gateway's E2B
// endpoint (docs/kubernetes.md). integration/cluster's
// TestE2BSDKThroughGateway starts the cluster (three nodes, node2 the only
// one with the template tpl-e2b) and runs this file with the SDK's own
// variables (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY, E2B_DOMAIN) naming
// the gateway, and PADDOCK_NODE2_E2B naming node2's own E2B endpoint.
// It is not part of `npm test` (the single-host run).

import assert from "node:assert/strict";
import { after, describe, test } from "node:test";

import { CommandExitError, Sandbox, SandboxNotFoundError } from "e2b";

const node2 = process.env.PADDOCK_NODE2_E2B;
if (!process.env.E2B_API_URL || !node2) throw new Error("run by integration/cluster's TestE2BSDKThroughGateway");

const made = [];
async function create(template, opts = {}) {
  const s = template ? await Sandbox.create(template, { timeoutMs: 300_000, ...opts }) : await Sandbox.create({ timeoutMs: 300_000, ...opts });
  made.push(s.sandboxId);
  return s;
}

after(async () => {
  for (const id of made) await Sandbox.kill(id).catch(() => {});
});

describe("e2b through the gateway", () => {
  test("create with a template: placed on the node that has it, made from it", async () => {
    const sbx = await create("tpl-e2b", { metadata: { suite: "gateway" } });
    const info = await sbx.getInfo();
    assert.equal(info.templateId, "tpl-e2b");
    assert.equal(info.metadata.suite, "gateway");
    // node2's own endpoint knows it: it lives there
    const there = await Sandbox.getInfo(sbx.sandboxId, { apiUrl: node2 });
    assert.equal(there.sandboxId, sbx.sandboxId);
  });

  test("a template no node has is refused, naming it", async () => {
    await assert.rejects(create("no-such-template"), (e) => {
      assert.match(String(e), /no-such-template/);
      return true;
    });
  });

  test("commands.run: output and exit codes", async () => {
    const sbx = await create("tpl-e2b");
    const r = await sbx.commands.run("echo out; echo err >&2");
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout, "out\n");
    assert.equal(r.stderr, "err\n");
    await assert.rejects(sbx.commands.run("exit 3"), (e) => e instanceof CommandExitError && e.exitCode === 3);
    const h = await sbx.commands.run("echo one; sleep 1; echo two", { background: true });
    assert.equal((await h.wait()).stdout, "one\ntwo\n");
  });

  test("files: write and read back", async () => {
    const sbx = await create();
    await sbx.files.write("/tmp/gw/a.txt", "through the gateway");
    assert.equal(await sbx.files.read("/tmp/gw/a.txt"), "through the gateway");
    const bytes = await sbx.files.read("/tmp/gw/a.txt", { format: "bytes" });
    assert.equal(Buffer.from(bytes).toString(), "through the gateway");
    assert.deepEqual((await sbx.files.list("/tmp/gw")).map((e) => e.name), ["a.txt"]);
  });

  test("list: the paginator walks every node's sandboxes once", async () => {
    const mine = [];
    for (let i = 0; i < 5; i++) mine.push((await create(undefined, { metadata: { suite: "paging" } })).sandboxId);
    const seen = [];
    let pages = 0;
    const p = Sandbox.list({ limit: 2, query: { metadata: { suite: "paging" } } });
    while (p.hasNext) {
      const items = await p.nextItems();
      assert.ok(items.length <= 2, `a page of ${items.length}`);
      seen.push(...items.map((s) => s.sandboxId));
      pages++;
      assert.ok(pages < 20, "the list never ended");
    }
    assert.deepEqual(seen, mine); // creation order, no duplicates, no gaps
    const all = [];
    for (const p = Sandbox.list({ limit: 3 }); p.hasNext; ) all.push(...(await p.nextItems()).map((s) => s.sandboxId));
    assert.deepEqual([...all].sort(), [...made].sort());
    await assert.rejects(Sandbox.list({ limit: 2, nextToken: "forged" }).nextItems(), /nextToken/);
  });

  test("kill: then the sandbox is gone", async () => {
    const sbx = await create("tpl-e2b");
    assert.equal(await sbx.kill().then(() => true), true);
    await assert.rejects(Sandbox.getInfo(sbx.sandboxId), SandboxNotFoundError);
    assert.equal(await Sandbox.kill(sbx.sandboxId), false);
  });
});
