// Lifecycle options: pause retention, stop and start, the idle policy; checked before the request.

import type { RequestOptions } from "./http.js";
import type { CreateSandboxRequest, OnIdle, PauseRequest, StopRequest } from "./types.js";

/** `sandbox.pause()` options. */
export interface PauseOptions extends RequestOptions {
  /** How long the paused sandbox is kept before it is deleted (default: the daemon's, 24 h; at most its maximum). */
  keepForSeconds?: number;
  /** Stop it (files kept, processes ended) this long after the pause, so its files outlive a host reboot; must be less than `keepForSeconds`. */
  thenStopAfterSeconds?: number;
}

/** `sandbox.stop()` options. */
export interface StopOptions extends RequestOptions {
  /** How long the stopped sandbox's files are kept (default: the daemon's, 7 days; at most its maximum). */
  keepForSeconds?: number;
}

/** The idle policy's camelCase create params (they win over the REST names). */
export interface IdleParams {
  /** Seconds without API calls or port traffic after which the sandbox idles out; see `idle_timeout_seconds`. */
  idleTimeoutSeconds?: number;
  /** What idling out does: "pause" (default) or "stop" (files kept); see `on_idle`. */
  onIdle?: OnIdle;
  /** Resume or start the sandbox transparently on the next call; see `auto_resume`. */
  autoResume?: boolean;
  /** Running processes count as activity; see `idle_counts_processes`. */
  idleCountsProcesses?: boolean;
}

function wholeSeconds(name: string, v: unknown): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== "number" || !Number.isFinite(v) || v < 1) throw new RangeError(`${name} must be a number >= 1, got ${String(v)}`);
  return Math.ceil(v);
}

/** The body of POST /v1/sandboxes/{id}/pause. */
export function pauseBody(opts: PauseOptions): PauseRequest {
  const body: PauseRequest = {};
  const keep = wholeSeconds("keepForSeconds", opts.keepForSeconds);
  const then = wholeSeconds("thenStopAfterSeconds", opts.thenStopAfterSeconds);
  if (keep !== undefined) body.keep_for_seconds = keep;
  if (then !== undefined) body.then_stop_after_seconds = then;
  if (keep !== undefined && then !== undefined && then >= keep) {
    throw new RangeError(`keepForSeconds (${keep}) must be longer than thenStopAfterSeconds (${then})`);
  }
  return body;
}

/** The body of POST /v1/sandboxes/{id}/stop. */
export function stopBody(opts: StopOptions): StopRequest {
  const keep = wholeSeconds("keepForSeconds", opts.keepForSeconds);
  return keep === undefined ? {} : { keep_for_seconds: keep };
}

/** Applies the idle params (camelCase or REST names) to a create request, checking them. */
export function applyIdle(params: IdleParams, req: CreateSandboxRequest): void {
  const { idleTimeoutSeconds, onIdle, autoResume, idleCountsProcesses } = params;
  const r = req as CreateSandboxRequest & Record<string, unknown>;
  for (const k of ["idleTimeoutSeconds", "onIdle", "autoResume", "idleCountsProcesses"]) delete r[k];
  if (idleTimeoutSeconds !== undefined) req.idle_timeout_seconds = wholeSeconds("idleTimeoutSeconds", idleTimeoutSeconds);
  if (onIdle !== undefined) req.on_idle = onIdle;
  if (autoResume !== undefined) req.auto_resume = autoResume;
  if (idleCountsProcesses !== undefined) req.idle_counts_processes = idleCountsProcesses;
  if (req.on_idle !== undefined && req.on_idle !== "pause" && req.on_idle !== "stop") {
    throw new RangeError(`onIdle must be "pause" or "stop", got ${JSON.stringify(req.on_idle)}`);
  }
  for (const k of ["auto_resume", "idle_counts_processes"] as const) {
    if (req[k] !== undefined && typeof req[k] !== "boolean") throw new TypeError(`${k} must be a boolean`);
  }
  if (req.idle_timeout_seconds !== undefined) wholeSeconds("idle_timeout_seconds", req.idle_timeout_seconds);
}
