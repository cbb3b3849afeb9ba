// Sandbox handles: exec, streams, files, background processes, lease, deletion.

import { NotFoundError } from "./errors.js";
import { GRACE_MS, pathOf, type RequestOptions, type Transport } from "./http.js";
import { events, toBase64, type ExecEvent } from "./stream.js";
import type {
  ArgvCommand,
  ExecRequest,
  ExecRequestOptions,
  ExecResult,
  FileEntry,
  ListFilesResponse,
  ListProcessesResponse,
  ProcessInfo,
  ProcessState,
  SandboxInfo,
  SandboxState,
  ShellCommand,
} from "./types.js";

/**
 * What to run: exactly one of `argv` (run directly, no shell) and `command`
 * (run by bash -lc), with the ExecRequest options. `stdin` may be bytes; it
 * is then sent as `stdin_base64`.
 */
export type ExecParams = (ArgvCommand | ShellCommand) &
  Omit<ExecRequestOptions, "stdin"> & {
    stdin?: string | Uint8Array;
  };

/** The default exec timeout of the daemon, in seconds. */
const DEFAULT_EXEC_SECONDS = 60;

/** The longest single wait the daemon accepts, in seconds. */
const MAX_WAIT_SECONDS = 3600;

/** How long one wait lasts when the caller waits without a timeout. */
const WAIT_CHUNK_SECONDS = 300;

function toWire(p: ExecParams): ExecRequest {
  const { stdin, ...rest } = p;
  const req = { ...rest } as ExecRequest;
  if (typeof stdin === "string") req.stdin = stdin;
  else if (stdin !== undefined) req.stdin_base64 = toBase64(stdin);
  return req;
}

function toBytes(data: string | Uint8Array | ArrayBuffer): Uint8Array {
  if (typeof data === "string") return new TextEncoder().encode(data);
  if (data instanceof Uint8Array) return data;
  return new Uint8Array(data);
}

/** Formats permission bits for the API ("0644"); strings pass through. */
function modeString(mode: number | string | undefined): string | undefined {
  if (mode === undefined) return undefined;
  if (typeof mode === "string") return mode;
  if (!Number.isInteger(mode) || mode < 0) throw new RangeError(`bad file mode ${mode}`);
  return (mode & 0o7777).toString(8).padStart(4, "0");
}

function secondsParam(s: number): string {
  return String(Math.round(s * 1000) / 1000);
}

/** Options of Files.write. */
export interface WriteFileOptions extends RequestOptions {
  /** Permission bits, as a number (0o755) or an octal string ("0755"); default 0644. */
  mode?: number | string;
}

/** Options of Files.mkdir. */
export interface MkdirOptions extends RequestOptions {
  /** Permission bits, as a number (0o700) or an octal string ("0700"); default 0755. */
  mode?: number | string;
}

/** Options of Files.list. */
export interface ListFilesOptions extends RequestOptions {
  /** Levels to descend; 1 (the default) lists the directory's own entries. */
  depth?: number;
}

/** Options of Files.remove. */
export interface RemoveOptions extends RequestOptions {
  /** Also delete a directory's contents. */
  recursive?: boolean;
}

/**
 * The file system of a sandbox. Paths are absolute or relative to
 * /workspace; operations run inside the sandbox's own mount namespace.
 */
export class Files {
  readonly #t: Transport;
  readonly #sandbox: Sandbox;

  /** @internal Use `sandbox.files`. */
  constructor(t: Transport, sandbox: Sandbox) {
    this.#t = t;
    this.#sandbox = sandbox;
  }

  #path(...segments: string[]): string {
    return pathOf("sandboxes", this.#sandbox.id, "files", ...segments);
  }

  /** Creates or replaces the file at path (strings are written as UTF-8), creating missing parents. */
  write(path: string, data: string | Uint8Array | ArrayBuffer, opts: WriteFileOptions = {}): Promise<FileEntry> {
    return this.#t.json<FileEntry>({
      method: "PUT",
      path: this.#path(),
      query: { path, mode: modeString(opts.mode) },
      body: toBytes(data),
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts),
    });
  }

  /** The content of the file at path. */
  read(path: string, opts: RequestOptions = {}): Promise<Uint8Array> {
    return this.#t.call(
      {
        method: "GET",
        path: this.#path(),
        query: { path },
        accept: "application/octet-stream",
        signal: opts.signal,
        timeoutMs: this.#t.deadline(opts),
      },
      async (res) => new Uint8Array(await res.arrayBuffer()),
    );
  }

  /** The content of the file at path, decoded as UTF-8. */
  async readText(path: string, opts: RequestOptions = {}): Promise<string> {
    return new TextDecoder().decode(await this.read(path, opts));
  }

  /** Lists the directory at path (default /workspace). Symlinks are listed, not followed. */
  async list(path?: string, opts: ListFilesOptions = {}): Promise<FileEntry[]> {
    const res = await this.#t.json<ListFilesResponse>({
      method: "GET",
      path: this.#path("list"),
      query: { path: path || undefined, depth: opts.depth || undefined },
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts),
    });
    return res.entries ?? [];
  }

  /** Describes the file at path; a missing file throws NotFoundError. */
  stat(path: string, opts: RequestOptions = {}): Promise<FileEntry> {
    return this.#t.json<FileEntry>({
      method: "GET",
      path: this.#path("stat"),
      query: { path },
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts),
    });
  }

  /** Whether something exists at path. */
  async exists(path: string, opts: RequestOptions = {}): Promise<boolean> {
    try {
      await this.stat(path, opts);
      return true;
    } catch (err) {
      if (err instanceof NotFoundError) return false;
      throw err;
    }
  }

  /** Deletes the file or empty directory at path; `recursive` also deletes a directory's contents. */
  remove(path: string, opts: RemoveOptions = {}): Promise<void> {
    return this.#t.empty({
      method: "DELETE",
      path: this.#path(),
      query: { path, recursive: opts.recursive ? "true" : undefined },
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts),
    });
  }

  /** Creates the directory at path and any missing parents. */
  mkdir(path: string, opts: MkdirOptions = {}): Promise<FileEntry> {
    return this.#t.json<FileEntry>({
      method: "POST",
      path: this.#path("mkdir"),
      query: { path, mode: modeString(opts.mode) },
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts),
    });
  }
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

/**
 * A handle on one sandbox, from `paddock.create()`, `paddock.get()` or a
 * listing. `info` is the last state the daemon reported.
 *
 * `await using sbx = await paddock.create()` deletes the sandbox when the
 * scope ends; otherwise call `kill()` (or its alias `close()`) when done.
 */
export class Sandbox implements AsyncDisposable {
  readonly #t: Transport;
  #info: SandboxInfo;
  #closing: Promise<void> | undefined;
  /** The sandbox's file system. */
  readonly files: Files;

  /** @internal Use `paddock.create()` or `paddock.get()`. */
  constructor(t: Transport, info: SandboxInfo) {
    this.#t = t;
    this.#info = info;
    this.files = new Files(t, this);
  }

  get id(): string {
    return this.#info.id;
  }
  get state(): SandboxState {
    return this.#info.state;
  }
  get template(): string {
    return this.#info.template;
  }
  get metadata(): Record<string, string> {
    return this.#info.metadata ?? {};
  }
  /** When the lease ends and the daemon terminates the sandbox. */
  get expiresAt(): Date {
    return new Date(this.#info.expires_at);
  }
  /** The last state the daemon reported. */
  get info(): SandboxInfo {
    return this.#info;
  }

  #path(...segments: string[]): string {
    return pathOf("sandboxes", this.#info.id, ...segments);
  }

  /** Fetches the sandbox's current state. */
  async refresh(opts: RequestOptions = {}): Promise<SandboxInfo> {
    this.#info = await this.#t.json<SandboxInfo>({
      method: "GET",
      path: this.#path(),
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts),
    });
    return this.#info;
  }

  /**
   * Runs a command to completion. A non-zero exit and a timeout are
   * results (`exit_code`, `signal`, `timed_out`), not errors. The request's
   * default deadline is the command's `timeout_seconds` (60 by default)
   * plus 30 s.
   */
  exec(params: ExecParams, opts: RequestOptions = {}): Promise<ExecResult> {
    const req = toWire(params);
    return this.#t.json<ExecResult>({
      method: "POST",
      path: this.#path("exec"),
      json: req,
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts, (req.timeout_seconds || DEFAULT_EXEC_SECONDS) * 1000 + GRACE_MS),
    });
  }

  /** Runs command through the sandbox's shell (bash -lc) with the daemon's defaults. */
  run(command: string, opts: RequestOptions = {}): Promise<ExecResult> {
    return this.exec({ command }, opts);
  }

  /**
   * Runs a command and yields its events as they happen: start, stdout and
   * stderr chunks (raw bytes), then exit with the result fields. An error
   * event or a broken stream throws. Leaving the loop early cancels the
   * request. Nothing is sent until the iteration starts.
   */
  execStream(params: ExecParams, opts: RequestOptions = {}): AsyncGenerator<ExecEvent, void, undefined> {
    return events(this.#t, {
      method: "POST",
      path: this.#path("exec"),
      json: toWire(params),
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts),
    });
  }

  /**
   * Starts a command in the background and returns at once. Its
   * `timeout_seconds` 0 or absent means no timeout beyond the lease; use
   * `keep_stdin_open: true` to feed it later with `writeStdin`.
   */
  async start(params: ExecParams, opts: RequestOptions = {}): Promise<Process> {
    const info = await this.#t.json<ProcessInfo>({
      method: "POST",
      path: this.#path("processes"),
      json: toWire(params),
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts),
    });
    return new Process(this.#t, this, info);
  }

  /** The sandbox's background processes, running and exited. */
  async processes(opts: RequestOptions = {}): Promise<Process[]> {
    const res = await this.#t.json<ListProcessesResponse>({
      method: "GET",
      path: this.#path("processes"),
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts),
    });
    return (res.processes ?? []).map((p) => new Process(this.#t, this, p));
  }

  /** Fetches the background process with the given id. */
  async process(id: string, opts: RequestOptions = {}): Promise<Process> {
    const info = await this.#t.json<ProcessInfo>({
      method: "GET",
      path: this.#path("processes", id),
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts),
    });
    return new Process(this.#t, this, info);
  }

  /**
   * Sets the lease to now + `seconds` (rounded up to whole seconds, at most
   * 86400; 0 means the daemon's default of 300). It can extend the lease or
   * shorten it.
   */
  async setTimeout(seconds: number, opts: RequestOptions = {}): Promise<SandboxInfo> {
    if (!(seconds >= 0) || !Number.isFinite(seconds)) throw new RangeError(`bad lease ${seconds}`);
    this.#info = await this.#t.json<SandboxInfo>({
      method: "POST",
      path: this.#path("timeout"),
      json: { timeout_seconds: Math.ceil(seconds) },
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts),
    });
    return this.#info;
  }

  /**
   * Deletes the sandbox and everything running in it. Idempotent: later
   * calls, and a sandbox already gone on the daemon (404), succeed.
   */
  kill(opts: RequestOptions = {}): Promise<void> {
    this.#closing ??= this.#t
      .empty({ method: "DELETE", path: this.#path(), signal: opts.signal, timeoutMs: this.#t.deadline(opts) })
      .catch((err: unknown) => {
        if (err instanceof NotFoundError) return;
        this.#closing = undefined;
        throw err;
      });
    return this.#closing;
  }

  /** Same as kill(). */
  close(opts: RequestOptions = {}): Promise<void> {
    return this.kill(opts);
  }

  /** Deletes the sandbox at the end of an `await using` scope. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.kill();
  }

  toJSON(): SandboxInfo {
    return this.#info;
  }
}
