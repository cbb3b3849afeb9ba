// Code contexts: stateful interpreters (Python, JavaScript, Bash) with rich
// results — `sbx.runCode(code, opts)` and `sbx.code` (the context routes).

import { ConnectionError } from "./errors.js";
import { GRACE_MS, pathOf, type RequestOptions, type Transport } from "./http.js";
import { NDJSON, readLines } from "./stream.js";
import type { CodeContext, CodeContextList, CodeError, CodeEvent, CodeExecution, CodeLanguage, CodeResult } from "./types.js";

/** The daemon's default cell timeout, in seconds. */
export const DEFAULT_CODE_SECONDS = 60;

/** Options of runCode. */
export interface RunCodeOptions extends RequestOptions {
  /** `python` (default), `javascript` (top-level await works) or `bash`. */
  language?: CodeLanguage | "js" | "sh";
  /** A context (or its id) from `sbx.code.create()`; default: the language's default context. */
  context?: string | CodeContext;
  /** The cell's timeout in milliseconds (default 60 s): the cell is interrupted and the result has `timed_out`. */
  timeoutMs?: number;
  /** Variables exported into the context before the cell runs (they stay). */
  env?: Record<string, string>;
  /** Streams the cell: called with stdout text as it is printed. */
  onStdout?: (text: string) => void;
  /** Called with stderr text as it is printed. */
  onStderr?: (text: string) => void;
  /** Called with each rich result (figures, the last expression's value). */
  onResult?: (result: CodeResult) => void;
  /** Called with the cell's error (name, value, traceback). */
  onError?: (error: CodeError) => void;
}

/** What CodeContexts needs of its sandbox. */
interface HasID {
  readonly id: string;
}

function contextID(c: string | CodeContext): string {
  const id = typeof c === "string" ? c : c?.id;
  if (typeof id !== "string" || id === "") throw new TypeError("context must be a context id or a CodeContext");
  return id;
}

/** A sandbox's code contexts (`sbx.code`). */
export class CodeContexts {
  readonly #t: Transport;
  readonly #sbx: HasID;

  /** @internal Use `sbx.code`. */
  constructor(t: Transport, sbx: HasID) {
    this.#t = t;
    this.#sbx = sbx;
  }

  #path(...segments: string[]): string {
    return pathOf("sandboxes", this.#sbx.id, "code", ...segments);
  }

  /**
   * Runs a cell; see Sandbox.runCode. With any `on*` callback the cell is
   * streamed and the callbacks run as events arrive.
   */
  async run(code: string, opts: RunCodeOptions = {}): Promise<CodeExecution> {
    if (typeof code !== "string") throw new TypeError("code must be a string");
    const body: Record<string, unknown> = { code };
    if (opts.language) body.language = opts.language;
    if (opts.context !== undefined) body.context_id = contextID(opts.context);
    if (opts.timeoutMs !== undefined) {
      if (typeof opts.timeoutMs !== "number" || !(opts.timeoutMs > 0) || !Number.isFinite(opts.timeoutMs)) {
        throw new RangeError(`timeoutMs must be a finite number > 0, got ${String(opts.timeoutMs)}`);
      }
      body.timeout_seconds = opts.timeoutMs / 1000;
    }
    if (opts.env) body.env = opts.env;
    const deadline = this.#t.deadline(opts, ((body.timeout_seconds as number) || DEFAULT_CODE_SECONDS) * 1000 + GRACE_MS + 5_000);
    const streamed = opts.onStdout || opts.onStderr || opts.onResult || opts.onError;
    if (!streamed) {
      return this.#t.json<CodeExecution>({ method: "POST", path: this.#path(), json: body, signal: opts.signal, timeoutMs: deadline });
    }
    const s = await this.#t.open({ method: "POST", path: this.#path(), json: body, accept: NDJSON, signal: opts.signal, timeoutMs: deadline });
    const out = { stdout: "", stderr: "" };
    const results: CodeResult[] = [];
    try {
      if (!s.response.body) throw new ConnectionError("code stream without a body");
      for await (const line of readLines(s.response.body)) {
        const ev = JSON.parse(line) as CodeEvent;
        switch (ev.type) {
          case "stdout":
          case "stderr":
            out[ev.type] += ev.text ?? "";
            (ev.type === "stdout" ? opts.onStdout : opts.onStderr)?.(ev.text ?? "");
            break;
          case "result":
            if (ev.result) {
              results.push(ev.result);
              opts.onResult?.(ev.result);
            }
            break;
          case "error":
            if (ev.error) opts.onError?.(ev.error);
            break;
          case "end":
            if (ev.execution) return { ...ev.execution, stdout: out.stdout, stderr: out.stderr, results };
        }
      }
    } catch (err) {
      throw s.translate(err);
    } finally {
      s.close();
    }
    throw new ConnectionError("code stream ended without an end event");
  }

  /** Starts a new context (at most 16 per sandbox). */
  create(language: CodeLanguage = "python", opts: RequestOptions & { cwd?: string; env?: Record<string, string> } = {}): Promise<CodeContext> {
    const json: Record<string, unknown> = { language };
    if (opts.cwd) json.cwd = opts.cwd;
    if (opts.env) json.env = opts.env;
    return this.#t.json<CodeContext>({ method: "POST", path: this.#path("contexts"), json, signal: opts.signal, timeoutMs: this.#t.deadline(opts) });
  }

  /** The sandbox's contexts, oldest first. */
  async list(opts: RequestOptions = {}): Promise<CodeContext[]> {
    const r = await this.#t.json<CodeContextList>({ method: "GET", path: this.#path("contexts"), signal: opts.signal, timeoutMs: this.#t.deadline(opts) });
    return r.contexts ?? [];
  }

  /** Describes one context. */
  get(context: string | CodeContext, opts: RequestOptions = {}): Promise<CodeContext> {
    return this.#t.json<CodeContext>({ method: "GET", path: this.#path("contexts", contextID(context)), signal: opts.signal, timeoutMs: this.#t.deadline(opts) });
  }

  /** Restarts a context: its state is gone and its count starts again. */
  restart(context: string | CodeContext, opts: RequestOptions = {}): Promise<CodeContext> {
    return this.#t.json<CodeContext>({ method: "POST", path: this.#path("contexts", contextID(context), "restart"), signal: opts.signal, timeoutMs: this.#t.deadline(opts) });
  }

  /** Interrupts the running cell (SIGINT; restarted if it does not stop within 2 s). */
  interrupt(context: string | CodeContext, opts: RequestOptions = {}): Promise<CodeContext> {
    return this.#t.json<CodeContext>({ method: "POST", path: this.#path("contexts", contextID(context), "interrupt"), signal: opts.signal, timeoutMs: this.#t.deadline(opts) });
  }

  /** Deletes a context and kills its interpreter. */
  delete(context: string | CodeContext, opts: RequestOptions = {}): Promise<void> {
    return this.#t.empty({ method: "DELETE", path: this.#path("contexts", contextID(context)), signal: opts.signal, timeoutMs: this.#t.deadline(opts) });
  }
}
