// The create call's parameters: REST fields, camelCase forms, checks before the request.

import { applyIdle, type IdleParams } from "./lifecycle.js";
import type { CreateSandboxRequest, NetworkMode, NetworkPolicy, OnTimeout } from "./types.js";

/**
 * What `paddock.create()` takes: every CreateSandboxRequest field, plus
 * camelCase forms that win over their REST names when both are given.
 */
export interface CreateParams extends Omit<CreateSandboxRequest, "network">, IdleParams {
  /** A NetworkPolicy, or just its mode ("off", "allowlist", "full"). */
  network?: NetworkPolicy | NetworkMode;
  /** The lease in milliseconds (rounded up to whole seconds); see `timeout_seconds`. */
  timeoutMs?: number;
  /** What happens when the lease ends; see `on_timeout`. */
  onTimeout?: OnTimeout;
  /** Cost cap in micro-units; see `max_cost_micros`. */
  maxCostMicros?: number;
}

const MODES: readonly string[] = ["off", "allowlist", "full"];

function checkRecord(name: string, v: unknown): void {
  if (v === undefined) return;
  if (!v || typeof v !== "object" || Array.isArray(v) || Object.values(v).some((x) => typeof x !== "string")) {
    throw new TypeError(`${name} must be an object of string values`);
  }
}

function checkCount(name: string, v: unknown): void {
  if (v === undefined) return;
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0) throw new RangeError(`${name} must be a number >= 0, got ${String(v)}`);
}

/** Checks params and returns the request body; bad input throws a TypeError or RangeError naming the field. */
export function checkCreate(params: CreateParams): CreateSandboxRequest {
  if (!params || typeof params !== "object") throw new TypeError("create params must be an object");
  const { timeoutMs, onTimeout, maxCostMicros, network, ...rest } = params;
  const req: CreateSandboxRequest = { ...rest };
  if (timeoutMs !== undefined) {
    checkCount("timeoutMs", timeoutMs);
    req.timeout_seconds = Math.ceil(timeoutMs / 1000);
  }
  if (onTimeout !== undefined) req.on_timeout = onTimeout;
  applyIdle(params, req);
  if (maxCostMicros !== undefined) req.max_cost_micros = maxCostMicros;
  if (req.template !== undefined && (typeof req.template !== "string" || req.template === "")) {
    throw new TypeError("template must be a non-empty string");
  }
  checkCount("timeout_seconds", req.timeout_seconds);
  checkCount("max_cost_micros", req.max_cost_micros);
  checkRecord("env", req.env);
  checkRecord("metadata", req.metadata);
  if (req.on_timeout !== undefined && typeof req.on_timeout !== "string") throw new TypeError("onTimeout must be a string");
  if (req.secrets !== undefined && (!Array.isArray(req.secrets) || req.secrets.some((s) => typeof s !== "string"))) {
    throw new TypeError("secrets must be an array of secret names");
  }
  if (network !== undefined) {
    const policy = typeof network === "string" ? { mode: network } : network;
    if (!policy || typeof policy !== "object" || !MODES.includes(policy.mode)) {
      throw new RangeError(`network must be one of ${MODES.join(", ")} or a NetworkPolicy, got ${JSON.stringify(network)}`);
    }
    req.network = policy as NetworkPolicy;
  }
  return req;
}
