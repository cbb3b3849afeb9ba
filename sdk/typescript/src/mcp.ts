// The URL of paddockd's MCP endpoint (/v1/mcp) with the options of the
// session it opens; checked before any request.

import type { NetworkMode } from "./types.js";

/** Options of the MCP session a client opens at `paddock.mcpUrl(opts)`. */
export interface McpUrlOptions {
  /** Attach to this existing sandbox of the key (never deleted by the session); excludes the options below. */
  sandbox?: string;
  /** Template of the session's own sandbox. */
  template?: string;
  /** Lease of the session's sandbox, in milliseconds (whole seconds, at most 24 h). */
  sandboxTimeoutMs?: number;
  /** Each tool call's command timeout, in milliseconds (at most 24 h). */
  timeoutMs?: number;
  /** Egress of the session's sandbox. */
  network?: NetworkMode;
  /** Hosts allowed with `network: "allowlist"`. */
  allow?: string[];
}

const MAX_MS = 86_400_000;

/** The query of /v1/mcp for opts, after checking them. */
export function mcpQuery(opts: McpUrlOptions): URLSearchParams {
  const q = new URLSearchParams();
  const str = (name: string, v: unknown): string => {
    if (typeof v !== "string" || v === "") throw new TypeError(`${name} must be a non-empty string`);
    return v;
  };
  const ms = (name: string, v: unknown): number => {
    if (typeof v !== "number" || !Number.isFinite(v) || v <= 0 || v > MAX_MS) throw new RangeError(`${name} must be more than 0 and at most ${MAX_MS} ms`);
    return v;
  };
  if (opts.sandbox !== undefined) {
    q.set("sandbox", str("sandbox", opts.sandbox));
    if (opts.template !== undefined || opts.sandboxTimeoutMs !== undefined || opts.network !== undefined || opts.allow !== undefined) {
      throw new TypeError("sandbox (attach to an existing sandbox) excludes template, sandboxTimeoutMs, network and allow");
    }
  }
  if (opts.template !== undefined) q.set("template", str("template", opts.template));
  if (opts.sandboxTimeoutMs !== undefined) q.set("sandbox_timeout", String(Math.ceil(ms("sandboxTimeoutMs", opts.sandboxTimeoutMs) / 1000)));
  if (opts.timeoutMs !== undefined) q.set("timeout", String(ms("timeoutMs", opts.timeoutMs) / 1000));
  if (opts.network !== undefined) {
    if (!["off", "allowlist", "full"].includes(opts.network)) throw new RangeError(`network must be "off", "allowlist" or "full", got ${String(opts.network)}`);
    q.set("network", opts.network);
  }
  for (const h of opts.allow ?? []) q.append("allow", str("allow", h));
  return q;
}
