// Sandbox handles: exec, streams, files, background processes, lease, deletion.

import { CodeContexts, type RunCodeOptions } from "./code.js";
import { Files } from "./files.js";
import { Process } from "./process.js";
import { pauseBody, stopBody, type PauseOptions, type StopOptions } from "./lifecycle.js";
import { NotFoundError } from "./errors.js";
import { GRACE_MS, pathOf, type RequestOptions, type Transport } from "./http.js";
import { killPty, listPtys, openPty, type PtyOptions, type Terminal } from "./terminal.js";
import { events, toBase64, type ExecEvent } from "./stream.js";
import type {
  ArgvCommand,
  CodeExecution,
  ExecRequest,
  ExecRequestOptions,
  ExecResult,
  ListPortsResponse,
  ListProcessesResponse,
  Metrics,
  MetricsHistory,
  NetworkPolicy,
  Port,
  ProcessInfo,
  PtyInfo,
  Template,
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
    /**
     * The command's timeout in milliseconds (sent as `timeout_seconds`); a
     * command that outlives it is killed and the result has `timed_out: true`.
     * Takes precedence over `timeout_seconds`.
     */
    timeoutMs?: number;
  };

/** What exec, execStream and start accept: a shell command line, an argv, or ExecParams. */
export type Command = string | readonly string[] | ExecParams;

/** Options of exec: the request options plus the command's own timeout. */
export interface ExecOptions extends RequestOptions {
  /**
   * The command's timeout in milliseconds. Past it the command and what it
   * started are killed and exec resolves with `timed_out: true` — never an
   * exception. The HTTP deadline is derived from it plus a margin; set
   * `requestTimeoutMs` to bound the request itself.
   */
  timeoutMs?: number;
}

/** The default exec timeout of the daemon, in seconds. */
const DEFAULT_EXEC_SECONDS = 60;

/** Checks a command and turns it into the wire request; bad input throws before any request. */
export function toWire(cmd: Command, timeoutMs?: number): ExecRequest {
  let p: ExecParams;
  if (typeof cmd === "string") p = { command: cmd };
  else if (Array.isArray(cmd)) p = { argv: [...(cmd as readonly string[])] };
  else if (cmd && typeof cmd === "object") p = cmd as ExecParams;
  else throw new TypeError(`command must be a string, an argv array or {argv}|{command}, got ${typeof cmd}`);
  const { stdin, timeoutMs: own, ...rest } = p;
  const hasArgv = rest.argv !== undefined;
  const hasCmd = rest.command !== undefined;
  if (hasArgv === hasCmd) throw new TypeError("exactly one of argv and command must be given");
  if (hasArgv && (!Array.isArray(rest.argv) || rest.argv.length === 0 || rest.argv.some((a) => typeof a !== "string"))) {
    throw new TypeError("argv must be a non-empty array of strings");
  }
  if (hasCmd && (typeof rest.command !== "string" || rest.command === "")) {
    throw new TypeError("command must be a non-empty string");
  }
  const req = { ...rest } as ExecRequest;
  const ms = timeoutMs ?? own;
  if (ms !== undefined) {
    if (typeof ms !== "number" || !(ms > 0) || !Number.isFinite(ms)) {
      throw new RangeError(`timeoutMs must be a finite number > 0, got ${String(ms)}`);
    }
    req.timeout_seconds = ms / 1000;
  }
  if (req.timeout_seconds !== undefined && (typeof req.timeout_seconds !== "number" || !(req.timeout_seconds >= 0))) {
    throw new RangeError(`timeout_seconds must be a number >= 0, got ${String(req.timeout_seconds)}`);
  }
  // The stdin goes last (see stdinLast).
  const b64 = req.stdin_base64;
  delete req.stdin_base64;
  if (typeof stdin === "string") req.stdin = stdin;
  else if (stdin instanceof Uint8Array) req.stdin_base64 = toBase64(stdin);
  else if (stdin !== undefined) throw new TypeError("stdin must be a string or a Uint8Array");
  else if (b64 !== undefined) req.stdin_base64 = b64;
  return req;
}

/**
 * The headers of an exec request from toWire: its stdin is the body's last
 * member, so the daemon may stream it into the command as it arrives.
 */
export function stdinLast(req: ExecRequest): Record<string, string> {
  return req.stdin !== undefined || req.stdin_base64 !== undefined ? { "Paddock-Stdin-Last": "true" } : {};
}

function checkPort(port: number): void {
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new RangeError(`port must be an integer in 1..65535, got ${String(port)}`);
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
  /** The sandbox's code contexts (stateful interpreters); see runCode. */
  readonly code: CodeContexts;

  /** @internal Use `paddock.create()` or `paddock.get()`. */
  constructor(t: Transport, info: SandboxInfo) {
    this.#t = t;
    this.#info = info;
    this.files = new Files(t, this);
    this.code = new CodeContexts(t, this);
  }

  /**
   * Runs a cell of code in a stateful interpreter (Python by default;
   * `language: "javascript"` or `"bash"`), like a notebook: globals survive
   * between calls. Resolves with the CodeExecution: output, `results` (MIME
   * bundles — the last expression's value, matplotlib figures as
   * `image/png`) and `error`. An exception or a timeout is a result.
   * `onStdout`/`onStderr`/`onResult`/`onError` stream the cell as it runs.
   */
  runCode(code: string, opts: RunCodeOptions = {}): Promise<CodeExecution> {
    return this.code.run(code, opts);
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

  /** Starts a command (a login shell by default) on a new terminal; see `Terminal`. */
  openPty(opts?: PtyOptions): Promise<Terminal> {
    return openPty(this.#t, this.id, opts);
  }

  /** The terminals open in the sandbox. */
  ptys(opts?: RequestOptions): Promise<PtyInfo[]> {
    return listPtys(this.#t, this.id, opts);
  }

  /** Kills the command of terminal `pty` (`Terminal.id`). */
  killPty(pty: string, opts?: RequestOptions): Promise<void> {
    return killPty(this.#t, this.id, pty, opts);
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
   * Runs a command to completion: a shell line (`"ls -l"`), an argv
   * (`["python3", "-c", "print(1)"]`) or ExecParams. A non-zero exit and a
   * timeout are results (`exit_code`, `signal`, `timed_out`), never errors:
   * `opts.timeoutMs` is the command's timeout, and the HTTP deadline is that
   * (60 s by default) plus 30 s unless `opts.requestTimeoutMs` says otherwise.
   */
  async exec(params: Command, opts: ExecOptions = {}): Promise<ExecResult> {
    const req = toWire(params, opts.timeoutMs);
    return this.#t.json<ExecResult>({
      method: "POST",
      path: this.#path("exec"),
      json: req,
      headers: stdinLast(req),
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts, (req.timeout_seconds || DEFAULT_EXEC_SECONDS) * 1000 + GRACE_MS),
    });
  }

  /** Runs command through the sandbox's shell (bash -lc) with the daemon's defaults. */
  run(command: string, opts: ExecOptions = {}): Promise<ExecResult> {
    return this.exec({ command }, opts);
  }

  /**
   * Runs a command and yields its events as they happen: start, stdout and
   * stderr chunks (raw bytes), then exit with the result fields. An error
   * event or a broken stream throws. Leaving the loop early cancels the
   * request. Nothing is sent until the iteration starts.
   */
  execStream(params: Command, opts: ExecOptions = {}): AsyncGenerator<ExecEvent, void, undefined> {
    return events(this.#t, {
      method: "POST",
      path: this.#path("exec"),
      json: toWire(params, opts.timeoutMs),
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts),
    });
  }

  /**
   * Starts a command in the background and returns at once. Its
   * `timeout_seconds` 0 or absent means no timeout beyond the lease; use
   * `keep_stdin_open: true` to feed it later with `writeStdin`.
   */
  async start(params: Command, opts: ExecOptions = {}): Promise<Process> {
    const info = await this.#t.json<ProcessInfo>({
      method: "POST",
      path: this.#path("processes"),
      json: toWire(params, opts.timeoutMs),
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
   * Freezes every process (memory and files kept, CPU billing stops). It is
   * kept `keepForSeconds` (default: the daemon's, 24 h) before it is deleted;
   * with `thenStopAfterSeconds` the daemon stops it that long after the
   * pause (files kept, processes ended), so its files outlive a host reboot.
   */
  async pause(opts: PauseOptions = {}): Promise<SandboxInfo> {
    return (this.#info = await this.#post("pause", pauseBody(opts), opts));
  }

  /** Thaws a paused sandbox (or boots a stopped one); `expires_at` is renewed. */
  async resume(opts: RequestOptions = {}): Promise<SandboxInfo> {
    return (this.#info = await this.#post("resume", undefined, opts));
  }

  /**
   * Ends every process and keeps the files for `keepForSeconds` (default: the
   * daemon's, 7 days); only storage is billed. `boot()` starts it again.
   */
  async stop(opts: StopOptions = {}): Promise<SandboxInfo> {
    return (this.#info = await this.#post("stop", stopBody(opts), opts));
  }

  /**
   * Boots a stopped sandbox again from its files (POST .../start): fresh
   * processes, same id, network policy and resources. (`start()` runs a process.)
   */
  async boot(opts: RequestOptions = {}): Promise<SandboxInfo> {
    return (this.#info = await this.#post("start", undefined, opts));
  }

  /**
   * Replaces the sandbox's egress policy, for example `{ mode: "off" }`.
   * Any mode change works: from `off` the sandbox gets its interface, to
   * `off` every connection is cut.
   */
  async updateNetwork(policy: NetworkPolicy, opts: RequestOptions = {}): Promise<SandboxInfo> {
    if (!policy || typeof policy !== "object" || typeof policy.mode !== "string") {
      throw new TypeError('policy must be a NetworkPolicy such as { mode: "off" }');
    }
    this.#info = await this.#t.json<SandboxInfo>({
      method: "PATCH",
      path: this.#path("network"),
      json: policy,
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts),
    });
    return this.#info;
  }

  /** The sandbox's resource use and cost so far. */
  metrics(opts: RequestOptions = {}): Promise<Metrics> {
    return this.#t.json<Metrics>({ method: "GET", path: this.#path("metrics"), signal: opts.signal, timeoutMs: this.#t.deadline(opts) });
  }

  /** The sandbox's metrics over time, oldest first: one sample per metering pass of the daemon, at most `max_samples`. */
  metricsHistory(opts: RequestOptions = {}): Promise<MetricsHistory> {
    return this.#t.json<MetricsHistory>({ method: "GET", path: this.#path("metrics", "history"), signal: opts.signal, timeoutMs: this.#t.deadline(opts) });
  }

  /** The TCP ports listening in the sandbox, each with its `url` and `signed_url`. */
  async ports(opts: RequestOptions = {}): Promise<Port[]> {
    const res = await this.#t.json<ListPortsResponse>({ method: "GET", path: this.#path("ports"), signal: opts.signal, timeoutMs: this.#t.deadline(opts) });
    return res.ports ?? [];
  }

  /**
   * The URL that reaches `port` inside the sandbox through the daemon (it
   * needs the API key in the Authorization header). `path` is appended.
   */
  portUrl(port: number, path = "/"): string {
    checkPort(port);
    return this.#t.url(this.#path("ports", String(port)) + (path.startsWith("/") ? path : `/${path}`));
  }

  /**
   * A URL that reaches `port` without the API key (a token for this sandbox
   * and port); the port must be listening. `path` is appended.
   */
  async signedPortUrl(port: number, path = "/", opts: RequestOptions = {}): Promise<string> {
    checkPort(port);
    const found = (await this.ports(opts)).find((p) => p.port === port);
    if (!found) throw new RangeError(`port ${port} is not listening in sandbox ${this.id}`);
    const u = new URL(found.signed_url, this.#t.baseURL);
    u.pathname = u.pathname.replace(/\/+$/, "") + (path.startsWith("/") ? path : `/${path}`);
    return u.toString();
  }

  /** Saves the sandbox's file system as a new template `name[:tag]`. */
  snapshot(name: string, opts: RequestOptions = {}): Promise<Template> {
    if (typeof name !== "string" || name === "") throw new TypeError("name must be a non-empty string");
    return this.#post<Template>("snapshot", { name }, opts);
  }

  #post<T = SandboxInfo>(segment: string, json: unknown, opts: RequestOptions): Promise<T> {
    return this.#t.json<T>({ method: "POST", path: this.#path(segment), json, signal: opts.signal, timeoutMs: this.#t.deadline(opts) });
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
