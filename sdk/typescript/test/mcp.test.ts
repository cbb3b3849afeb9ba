// paddockd's /v1/mcp driven by the official MCP TypeScript SDK client
// (@modelcontextprotocol/sdk) over streamable HTTP: attaching to an
// existing sandbox, create options in the query and in the client's
// capabilities, and DELETE ending the session. Needs root.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

import { startDaemon, type Daemon } from "./daemon.js";

let d: Daemon;

before(async () => {
  d = await startDaemon();
});

after(async () => {
  await d?.stop();
});

const key = (i: number): string => d.keys[i] ?? "";

type Capabilities = ConstructorParameters<typeof Client>[1];

async function connect(url: string, key: string, opts?: Capabilities): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
  });
  const client = new Client({ name: "paddock-ts-test", version: "1" }, opts);
  await client.connect(transport);
  return { client, transport };
}

interface ExecOutput {
  exit_code: number | null;
  timed_out: boolean;
  stdout: string;
}

async function runCommand(client: Client, command: string): Promise<{ out: ExecOutput; isError: boolean }> {
  const res = await client.callTool({ name: "run_command", arguments: { command } });
  const content = res.content as Array<{ type: string; text: string }>;
  return { out: JSON.parse(content.at(-1)?.text ?? "null") as ExecOutput, isError: Boolean(res.isError) };
}

async function sessionSandboxes(sessionId: string): Promise<string[]> {
  const ids: string[] = [];
  for await (const sbx of d.client(0).list({ metadata: { "paddock.mcp_session": sessionId } })) ids.push(sbx.id);
  return ids;
}

describe("/v1/mcp with @modelcontextprotocol/sdk", () => {
  it("attaches to an existing sandbox (?sandbox=ID) and never deletes it", async () => {
    const paddock = d.client(0);
    await using sbx = await paddock.create();
    await sbx.files.write("/workspace/mine.txt", "kept\n");
    const url = paddock.mcpUrl({ sandbox: sbx.id });
    assert.equal(url, `${d.url}/v1/mcp?sandbox=${sbx.id}`);
    const { client, transport } = await connect(url, key(0));
    const { out, isError } = await runCommand(client, "cat mine.txt");
    assert.equal(isError, false);
    assert.equal(out.stdout, "kept\n");
    await transport.terminateSession(); // DELETE /v1/mcp
    await client.close();
    assert.equal((await sbx.refresh()).state, "running");

    // Another key cannot attach to it.
    await assert.rejects(connect(d.client(1).mcpUrl({ sandbox: sbx.id }), key(1)), /not found/);
  });

  it("takes create options from the query and the client's capabilities; DELETE deletes the session's sandbox", async () => {
    const { client, transport } = await connect(d.client(0).mcpUrl({ sandboxTimeoutMs: 900_000 }), key(0), {
      capabilities: { experimental: { paddock: { template: "base", timeout: 2, network: "off" } } },
    });
    const { out, isError } = await runCommand(client, "python -c 'print(1)'; sleep 30");
    assert.equal(isError, true);
    assert.equal(out.timed_out, true);
    assert.equal(out.stdout, "1\n");
    const sessionId = transport.sessionId ?? "";
    assert.ok(sessionId);
    const ids = await sessionSandboxes(sessionId);
    assert.equal(ids.length, 1);
    const info = await d.client(0).get(ids[0] ?? "");
    const lease = info.expiresAt.getTime() - new Date(info.info.created_at).getTime();
    assert.ok(lease > 890_000 && lease < 910_000, `lease ${lease} ms, want 900 s`);
    assert.equal(info.info.network.mode, "off");

    await transport.terminateSession();
    await client.close();
    for (let i = 0; i < 100 && (await sessionSandboxes(sessionId)).length > 0; i++) {
      await new Promise((ok) => setTimeout(ok, 100));
    }
    assert.deepEqual(await sessionSandboxes(sessionId), []);
  });

  it("refuses bad options with 400 before any session", async () => {
    await assert.rejects(connect(`${d.url}/v1/mcp?timeout=forever`, key(0)), /timeout must be seconds/);
    assert.throws(() => d.client(0).mcpUrl({ sandbox: "sb_x", template: "base" }), TypeError);
    assert.throws(() => d.client(0).mcpUrl({ timeoutMs: -1 }), RangeError);
  });
});
