// Background processes: state, wait, output, stdin, signals.

import { toBytes } from "./files.js";
import { GRACE_MS, pathOf, type RequestOptions, type Transport } from "./http.js";
import type { Sandbox } from "./sandbox.js";
import { events, type ExecEvent } from "./stream.js";
import type { ExecResult, ProcessInfo, ProcessState } from "./types.js";

/** The longest single wait the daemon accepts, in seconds. */
const MAX_WAIT_SECONDS = 3600;

/** How long one wait lasts when the caller waits without a timeout. */
const WAIT_CHUNK_SECONDS = 300;

function secondsParam(s: number): string {
  return String(Math.round(s * 1000) / 1000);
}

/** Options of Process.wait. */
export interface WaitOptions extends RequestOptions {
  /**
   * How long to wait, in seconds. Without it, wait returns only once the
   * process has exited (or the signal aborts).
   */
  timeoutSeconds?: number;
}

/** Options of Process.writeStdin. */
export interface WriteStdinOptions extends RequestOptions {
  /** Close standard input after writing. */
  eof?: boolean;
}

/**
 * A background process of a sandbox, from `sandbox.start()` or
 * `sandbox.process(id)`. `info` is the last state the daemon reported.
 */
export class Process {
  readonly #t: Transport;
  #info: ProcessInfo;
  /** The sandbox the process runs in. */
  readonly sandbox: Sandbox;

  /** @internal Use `sandbox.start()` or `sandbox.process(id)`. */
  constructor(t: Transport, sandbox: Sandbox, info: ProcessInfo) {
    this.#t = t;
    this.sandbox = sandbox;
    this.#info = info;
  }

  /** The process id used in URLs (not the pid). */
  get id(): string {
    return this.#info.id;
  }
  /** The pid inside the sandbox. */
  get pid(): number {
    return this.#info.pid;
  }
  get state(): ProcessState {
    return this.#info.state;
  }
  /** The result, once the process has exited. */
  get result(): ExecResult | undefined {
    return this.#info.result;
  }
  /** The last state the daemon reported. */
  get info(): ProcessInfo {
    return this.#info;
  }

  #path(...segments: string[]): string {
    return pathOf("sandboxes", this.sandbox.id, "processes", this.#info.id, ...segments);
  }

  /** Fetches the process's current state. */
  async refresh(opts: RequestOptions = {}): Promise<ProcessInfo> {
    this.#info = await this.#t.json<ProcessInfo>({
      method: "GET",
      path: this.#path(),
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts),
    });
    return this.#info;
  }

  /**
   * Waits for the process to exit and returns its state, `result` included.
   * With `timeoutSeconds` it returns after that long even when the process
   * is still running (`state` "running").
   */
  async wait(opts: WaitOptions = {}): Promise<ProcessInfo> {
    const { timeoutSeconds } = opts;
    if (timeoutSeconds !== undefined && !(timeoutSeconds >= 0)) {
      throw new RangeError(`bad timeoutSeconds ${timeoutSeconds}`);
    }
    const deadline = timeoutSeconds === undefined ? Infinity : Date.now() + timeoutSeconds * 1000;
    for (;;) {
      const left = deadline === Infinity ? WAIT_CHUNK_SECONDS : Math.max(0, (deadline - Date.now()) / 1000);
      const chunk = Math.min(left, MAX_WAIT_SECONDS);
      this.#info = await this.#t.json<ProcessInfo>({
        method: "POST",
        path: this.#path("wait"),
        query: { timeout_seconds: secondsParam(chunk) },
        signal: opts.signal,
        timeoutMs: this.#t.deadline(opts, chunk * 1000 + GRACE_MS),
      });
      if (this.#info.state !== "running") return this.#info;
      if (deadline !== Infinity && (chunk >= left || Date.now() >= deadline)) return this.#info;
    }
  }

  /**
   * The process's output events: what was buffered so far is replayed,
   * then live output, then the exit event. Every event carries
   * `process_id`. Leaving the loop early cancels the request.
   */
  async *output(opts: RequestOptions = {}): AsyncGenerator<ExecEvent, void, undefined> {
    const id = this.#info.id;
    for await (const ev of events(this.#t, {
      method: "GET",
      path: this.#path("output"),
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts),
    })) {
      ev.process_id ??= id;
      yield ev;
    }
  }

  /**
   * Writes to the process's standard input (strings as UTF-8). The process
   * must have been started with `keep_stdin_open: true`; `eof` closes stdin
   * afterwards.
   */
  writeStdin(data: string | Uint8Array | ArrayBuffer, opts: WriteStdinOptions = {}): Promise<void> {
    return this.#t.empty({
      method: "POST",
      path: this.#path("stdin"),
      query: { eof: opts.eof ? "true" : undefined },
      body: toBytes(data),
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts),
    });
  }

  /** Closes the process's standard input. */
  closeStdin(opts: RequestOptions = {}): Promise<void> {
    return this.writeStdin(new Uint8Array(0), { ...opts, eof: true });
  }

  /**
   * Sends a signal ("SIGTERM", "SIGINT", ...) to the process. The default,
   * SIGKILL, kills the whole process tree.
   */
  kill(signal = "SIGKILL", opts: RequestOptions = {}): Promise<void> {
    return this.#t.empty({
      method: "POST",
      path: this.#path("kill"),
      json: { signal },
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts),
    });
  }

  toJSON(): ProcessInfo {
    return this.#info;
  }
}

