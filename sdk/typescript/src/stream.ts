// NDJSON event streams (exec with Accept: application/x-ndjson, process output).

import { ConnectionError, errorFromEvent } from "./errors.js";
import type { HttpRequest, Transport } from "./http.js";
import type { ExecResult, WireEvent } from "./types.js";

/** The NDJSON media type of event streams. */
export const NDJSON = "application/x-ndjson";

/** Fields every event may carry. */
export interface EventBase {
  /** The background process the event belongs to. */
  process_id?: string;
  /** RFC 3339 time of the event. */
  time?: string;
}

/** The command started. */
export interface StartEvent extends EventBase {
  type: "start";
  pid: number;
}

/** A chunk of output: the raw bytes, decoded from the wire's base64. */
export interface OutputEvent extends EventBase {
  type: "stdout" | "stderr";
  data: Uint8Array;
}

/**
 * The command ended; the stream ends after it. It carries the ExecResult
 * fields, with empty `stdout` and `stderr` because the output was streamed.
 */
export interface ExitEvent extends EventBase, ExecResult {
  type: "exit";
}

/**
 * An event of an output stream. An `error` event of the wire is not
 * yielded: the iteration throws the corresponding PaddockError instead.
 */
export type ExecEvent = StartEvent | OutputEvent | ExitEvent;

/** Decodes base64 into bytes. */
export function fromBase64(s: string): Uint8Array {
  if (typeof Buffer !== "undefined") return new Uint8Array(Buffer.from(s, "base64"));
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** Encodes bytes as base64. */
export function toBase64(b: Uint8Array): string {
  if (typeof Buffer !== "undefined") return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("base64");
  let bin = "";
  for (let i = 0; i < b.length; i += 0x8000) {
    bin += String.fromCharCode(...b.subarray(i, i + 0x8000));
  }
  return btoa(bin);
}

/** Yields the non-empty lines of a byte stream, split on "\n". */
export async function* readLines(body: ReadableStream<Uint8Array>): AsyncGenerator<string, void, undefined> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (line !== "") yield line;
      }
    }
    buf += decoder.decode();
    const line = buf.trim();
    if (line !== "") yield line;
  } finally {
    reader.cancel().catch(() => {});
  }
}

function exitEvent(w: Partial<ExecResult> & EventBase): ExitEvent {
  const ev: ExitEvent = {
    type: "exit",
    exit_code: w.exit_code ?? null,
    signal: w.signal ?? null,
    timed_out: w.timed_out ?? false,
    stdout: w.stdout ?? "",
    stderr: w.stderr ?? "",
    stdout_truncated: w.stdout_truncated ?? false,
    stderr_truncated: w.stderr_truncated ?? false,
    stdout_bytes: w.stdout_bytes ?? 0,
    stderr_bytes: w.stderr_bytes ?? 0,
    duration_ms: w.duration_ms ?? 0,
  };
  if (w.oom_killed) ev.oom_killed = true;
  if (w.process_id !== undefined) ev.process_id = w.process_id;
  if (w.time !== undefined) ev.time = w.time;
  return ev;
}

/**
 * Turns one wire event into an ExecEvent: `data` is decoded, and an `error`
 * event is thrown as its PaddockError. Unknown types give undefined.
 */
export function decodeEvent(w: WireEvent): ExecEvent | undefined {
  const base: EventBase = {};
  if (w.process_id !== undefined) base.process_id = w.process_id;
  if (w.time !== undefined) base.time = w.time;
  switch (w.type) {
    case "start":
      return { type: "start", pid: w.pid ?? 0, ...base };
    case "stdout":
    case "stderr":
      return { type: w.type, data: fromBase64(w.data ?? ""), ...base };
    case "exit":
      return exitEvent(w);
    case "error":
      throw errorFromEvent(w.error);
  }
  return undefined;
}

/** The events equivalent to a complete ExecResult: its output, then exit. */
function* resultEvents(res: ExecResult): Generator<ExecEvent, void, undefined> {
  const enc = new TextEncoder();
  if (res.stdout) yield { type: "stdout", data: enc.encode(res.stdout) };
  if (res.stderr) yield { type: "stderr", data: enc.encode(res.stderr) };
  yield exitEvent({ ...res, stdout: "", stderr: "" });
}

/**
 * Sends req asking for NDJSON and yields its events up to and including the
 * exit event. An error event, a broken connection or a stream that ends
 * without an exit event throws. Leaving the loop early cancels the request.
 */
export async function* events(t: Transport, req: HttpRequest): AsyncGenerator<ExecEvent, void, undefined> {
  const s = await t.open({ ...req, accept: NDJSON });
  try {
    const res = s.response;
    const type = res.headers.get("content-type") ?? "";
    if (type.split(";")[0]?.trim() === "application/json") {
      // A daemon that ignores Accept answers an exec with one ExecResult.
      yield* resultEvents((await res.json()) as ExecResult);
      return;
    }
    if (!res.body) throw new ConnectionError("event stream without a body");
    for await (const line of readLines(res.body)) {
      let w: WireEvent;
      try {
        w = JSON.parse(line) as WireEvent;
      } catch (err) {
        throw new ConnectionError(`bad event in stream: ${line.slice(0, 100)}`, { cause: err });
      }
      const ev = decodeEvent(w);
      if (ev === undefined) continue;
      yield ev;
      if (ev.type === "exit") return;
    }
    throw new ConnectionError("event stream ended without an exit event");
  } catch (err) {
    throw s.translate(err);
  } finally {
    s.close();
  }
}
