// Interactive terminals (a pseudo-terminal over a WebSocket) and file
// watches. Terminals use the WebSocket client of ws.ts (node:http), so they
// need Node; watches are plain fetch streams.

import { ConnectionError, errorFromEvent } from "./errors.js";
import { pathOf, type RequestOptions, type Transport } from "./http.js";
import { NDJSON, readLines } from "./stream.js";
import type { ListPtysResponse, PtyInfo, PtyMessage, WatchEvent } from "./types.js";
import { OP_BINARY, OP_CLOSE, OP_TEXT, connect, type WSConn } from "./ws.js";

/** Keyboard input is sent in messages of at most this size (the daemon accepts 64 KiB). */
const INPUT_CHUNK = 32 << 10;

/** Options of `sbx.openPty`. */
export interface PtyOptions extends RequestOptions {
  /** A shell command line (string) or argv (array); none runs a login shell. */
  cmd?: string | string[];
  /** Working directory; relative paths are relative to /workspace. */
  cwd?: string;
  /** Extra environment variables; TERM defaults to xterm-256color. */
  env?: Record<string, string>;
  /** Initial size (default 80×24). */
  cols?: number;
  rows?: number;
}

/**
 * A command on a terminal in a sandbox. `read()` returns output and `null`
 * once the command exited (then `exitCode` / `signal` say how); `write()`
 * sends keys; `close()` (or `await using`) kills the command if it still runs.
 */
export class Terminal implements AsyncDisposable {
  /** The terminal id (for `sbx.killPty`). */
  id = "";
  /** The command's pid inside the sandbox. */
  pid = 0;
  exited = false;
  exitCode: number | null = null;
  signal: string | null = null;
  readonly #ws: WSConn;
  readonly #dec = new TextDecoder();

  /** @internal Use `sbx.openPty()`. */
  constructor(ws: WSConn) {
    this.#ws = ws;
  }

  /** Handles the next message: output bytes, or undefined for a control message. */
  async #next(): Promise<Uint8Array | undefined> {
    const m = await this.#ws.read();
    if (m.opcode === OP_BINARY) return m.data;
    if (m.opcode === OP_CLOSE) {
      if (!this.exited) throw new ConnectionError(`terminal: closed (${m.code}) ${this.#dec.decode(m.data)}`);
      return new Uint8Array(0);
    }
    if (m.opcode !== OP_TEXT) return undefined;
    let msg: PtyMessage;
    try {
      msg = JSON.parse(this.#dec.decode(m.data)) as PtyMessage;
    } catch (err) {
      throw new ConnectionError("terminal: bad message", { cause: err });
    }
    switch (msg.type) {
      case "started":
        this.id = msg.pty_id ?? "";
        this.pid = msg.pid ?? 0;
        break;
      case "exit":
        this.exited = true;
        this.exitCode = msg.exit_code ?? null;
        this.signal = msg.signal ?? null;
        break;
      case "error":
        throw errorFromEvent(msg.error);
    }
    return undefined;
  }

  /** @internal Reads up to the started message. */
  async started(): Promise<void> {
    while (!this.id) await this.#next();
  }

  /** The next piece of output; `null` once the command exited. */
  async read(): Promise<Uint8Array | null> {
    while (!this.exited) {
      const out = await this.#next();
      if (out && out.byteLength) return out;
    }
    return null;
  }

  /** Reads until the output contains marker; resolves with the text read (its last `limit` characters). */
  async readUntil(marker: string, limit = 1 << 20): Promise<string> {
    let buf = "";
    while (!buf.includes(marker)) {
      const chunk = await this.read();
      if (chunk === null) throw new ConnectionError(`terminal: the command exited before printing ${JSON.stringify(marker)}`);
      buf = (buf + this.#dec.decode(chunk, { stream: true })).slice(-limit);
    }
    return buf;
  }

  /** Sends keys (a string is UTF-8 encoded; "\x03" is Ctrl-C). */
  async write(data: string | Uint8Array): Promise<void> {
    const b = typeof data === "string" ? new TextEncoder().encode(data) : data;
    for (let off = 0; off < b.byteLength; off += INPUT_CHUNK) {
      await this.#ws.send(OP_BINARY, b.subarray(off, off + INPUT_CHUNK));
    }
  }

  /** Sets the terminal's size; the command gets SIGWINCH. */
  async resize(cols: number, rows: number): Promise<void> {
    await this.#ws.send(OP_TEXT, new TextEncoder().encode(JSON.stringify({ type: "resize", cols, rows })));
  }

  /** Reads (and drops) output until the command exits; its exit code (null when a signal ended it). */
  async wait(): Promise<number | null> {
    while ((await this.read()) !== null);
    return this.exitCode;
  }

  /** The output chunks, until the command exits. */
  async *[Symbol.asyncIterator](): AsyncGenerator<Uint8Array, void, undefined> {
    for (;;) {
      const c = await this.read();
      if (c === null) return;
      yield c;
    }
  }

  /** Closes the WebSocket, killing the command if it still runs. */
  close(): void {
    this.#ws.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.close();
  }
}

/** Opens a terminal (used by `sbx.openPty`). */
export async function openPty(t: Transport, id: string, opts: PtyOptions = {}): Promise<Terminal> {
  const q = new URLSearchParams();
  if (typeof opts.cmd === "string") q.set("command", opts.cmd);
  else for (const a of opts.cmd ?? []) q.append("argv", a);
  if (opts.cwd) q.set("cwd", opts.cwd);
  for (const [k, v] of Object.entries(opts.env ?? {})) q.append("env", `${k}=${v}`);
  if (opts.cols !== undefined) q.set("cols", String(opts.cols));
  if (opts.rows !== undefined) q.set("rows", String(opts.rows));
  const headers: Record<string, string> = { "User-Agent": t.userAgent };
  if (t.apiKey) headers.Authorization = `Bearer ${t.apiKey}`;
  const timeoutMs = t.deadline(opts);
  const ws = await connect(t.url(pathOf("sandboxes", id, "pty"), q), headers, timeoutMs, opts.signal);
  const term = new Terminal(ws);
  try {
    await term.started();
  } catch (err) {
    term.close();
    throw err;
  }
  return term;
}

/** The terminals open in sandbox id. */
export async function listPtys(t: Transport, id: string, opts?: RequestOptions): Promise<PtyInfo[]> {
  const res = await t.json<ListPtysResponse>({ method: "GET", path: pathOf("sandboxes", id, "pty", "list"), signal: opts?.signal, timeoutMs: t.deadline(opts) });
  return res.ptys ?? [];
}

/** Kills the command of terminal pty. */
export function killPty(t: Transport, id: string, pty: string, opts?: RequestOptions): Promise<void> {
  return t.empty({ method: "POST", path: pathOf("sandboxes", id, "pty", pty, "kill"), signal: opts?.signal, timeoutMs: t.deadline(opts) });
}

/** Options of `sbx.files.watch`. */
export interface WatchOptions extends RequestOptions {
  /** Watch subdirectories too (and those created later). */
  recursive?: boolean;
}

/** An open watch: `for await` over its events; `close()` ends it. */
export class FileWatch implements AsyncDisposable {
  readonly #lines: AsyncGenerator<string, void, undefined>;
  readonly #close: () => void;

  /** @internal Use `sbx.files.watch()`. */
  constructor(body: ReadableStream<Uint8Array>, close: () => void) {
    this.#lines = readLines(body);
    this.#close = close;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<WatchEvent, void, undefined> {
    for await (const line of this.#lines) {
      try {
        yield JSON.parse(line) as WatchEvent;
      } catch (err) {
        throw new ConnectionError(`bad watch event: ${line.slice(0, 100)}`, { cause: err });
      }
    }
  }

  /** The next event; `undefined` once the watch ended. */
  async next(): Promise<WatchEvent | undefined> {
    const r = await this.#lines.next();
    return r.done ? undefined : (JSON.parse(r.value) as WatchEvent);
  }

  close(): void {
    this.#close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.close();
  }
}

/** Opens a watch on directory path of sandbox id; resolves once it is in place. */
export async function watchFiles(t: Transport, id: string, path: string, opts: WatchOptions = {}): Promise<FileWatch> {
  const s = await t.open({
    method: "GET",
    path: pathOf("sandboxes", id, "files", "watch"),
    query: { path, recursive: opts.recursive ? "true" : "false" },
    accept: NDJSON,
    signal: opts.signal,
    timeoutMs: t.deadline(opts),
  });
  if (!s.response.body) {
    s.close();
    throw new ConnectionError("watch stream without a body");
  }
  return new FileWatch(s.response.body, () => s.close());
}
