// The executor: runs tool calls in a sandbox per conversation, or a fresh one per call.

import type { Paddock } from "../client.js";
import type { CreateParams } from "../create.js";
import type { Sandbox } from "../sandbox.js";
import { READ_FILE, RUN_COMMAND, RUN_PYTHON, WRITE_FILE, tools, withDefaults, type ResolvedToolOptions, type Tool, type ToolOptions } from "./definitions.js";
import { RUN_CODE, formatCode } from "./code.js";
import { errorResult, formatExec, type ToolResult } from "./format.js";

/** Runs tool calls; what the loops and integrations take. */
export interface Executor {
  tools(): Tool[];
  /** Runs one call; never throws: failures are results with isError. */
  call(name: string, input: unknown, opts?: { signal?: AbortSignal }): Promise<ToolResult>;
  close(): Promise<void>;
}

/** Options of ToolSession. */
export interface SessionOptions extends ToolOptions {
  /** What each sandbox is created with. */
  create?: CreateParams;
  /** A fresh sandbox for each call, deleted after it (default: one per session). */
  perCall?: boolean;
  /** Use this existing sandbox (never deleted by the session). */
  sandbox?: Sandbox;
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * A conversation's tools: the first call creates the sandbox, later calls
 * reuse it, close() deletes it. With `perCall` each call gets a fresh
 * sandbox. `await using` closes it too.
 */
export class ToolSession implements Executor, AsyncDisposable {
  readonly #paddock: Paddock | undefined;
  readonly #opts: ResolvedToolOptions;
  readonly #create: CreateParams;
  readonly #perCall: boolean;
  readonly #own: boolean;
  #sandbox: Promise<Sandbox> | undefined;
  #closed = false;
  #n = 0;

  constructor(paddock: Paddock | undefined, opts: SessionOptions = {}) {
    if (!paddock && !opts.sandbox) throw new TypeError("ToolSession needs a Paddock client or options.sandbox");
    this.#paddock = paddock;
    this.#opts = withDefaults(opts);
    this.#create = opts.create ?? {};
    this.#perCall = opts.perCall ?? false;
    this.#own = !opts.sandbox;
    if (opts.sandbox) this.#sandbox = Promise.resolve(opts.sandbox);
  }

  tools(): Tool[] {
    return tools(this.#opts);
  }

  /** The session's sandbox, created on first use. */
  sandbox(): Promise<Sandbox> {
    if (this.#closed) return Promise.reject(new Error("tool session is closed"));
    this.#sandbox ??= this.#paddock!.create(this.#create).catch((err: unknown) => {
      this.#sandbox = undefined;
      throw err;
    });
    return this.#sandbox;
  }

  async call(name: string, input: unknown, opts: { signal?: AbortSignal } = {}): Promise<ToolResult> {
    let args: Record<string, unknown>;
    try {
      args = typeof input === "string" ? (input === "" ? {} : JSON.parse(input)) : ((input ?? {}) as Record<string, unknown>);
    } catch (err) {
      return errorResult(`invalid tool input: ${message(err)}`);
    }
    if (!args || typeof args !== "object") return errorResult("invalid tool input: not an object");
    if (!(this.#opts.tools as string[]).includes(name)) return errorResult(`unknown tool ${JSON.stringify(name)}`);
    const need = (field: string): string => {
      const v = args[field];
      if (typeof v !== "string") throw new Error(`${name}: missing required field ${JSON.stringify(field)}`);
      return v;
    };
    let sbx: Sandbox;
    try {
      sbx = this.#perCall && this.#own ? await this.#paddock!.create(this.#create, opts) : await this.sandbox();
    } catch (err) {
      return errorResult(`sandbox unavailable: ${message(err)}`);
    }
    try {
      return await this.#run(sbx, name, need, opts.signal, args);
    } catch (err) {
      return errorResult(message(err));
    } finally {
      if (this.#perCall && this.#own) await sbx.kill().catch(() => {});
    }
  }

  async #run(sbx: Sandbox, name: string, need: (f: string) => string, signal?: AbortSignal, args: Record<string, unknown> = {}): Promise<ToolResult> {
    const o = this.#opts;
    const exec = async (cmd: { argv: string[] } | { command: string }): Promise<ToolResult> => {
      const res = await sbx
        .exec({ ...cmd, max_output_bytes: Math.max(o.outputBudget, 1024) }, { timeoutMs: o.timeoutMs, signal })
        .catch((err: unknown) => {
          throw new Error(`the sandbox could not run the command: ${message(err)}`);
        });
      return formatExec(res, o.outputBudget);
    };
    switch (name) {
      case RUN_PYTHON: {
        const code = need("code");
        const path = `/tmp/run_python_${++this.#n}.py`;
        await sbx.files.write(path, code, { signal });
        return exec({ argv: ["python3", path] });
      }
      case RUN_COMMAND:
        return exec({ command: need("command") });
      case RUN_CODE: {
        const language = args.language;
        if (language !== undefined && typeof language !== "string") return errorResult(`${name}: field "language" must be a string`);
        const res = await sbx.runCode(need("code"), { language: language as "python", timeoutMs: o.timeoutMs, signal });
        return formatCode(res, o.outputBudget, o.imageBudget);
      }
      case WRITE_FILE: {
        const path = need("path");
        const content = need("content");
        const e = await sbx.files.write(path, content, { signal });
        return { text: `wrote ${new TextEncoder().encode(content).length} bytes to ${e.path}`, isError: false };
      }
      case READ_FILE: {
        const st = await sbx.files.stat(need("path"), { signal });
        if (st.size > o.maxFileBytes) {
          return errorResult(`${st.path} is ${st.size} bytes, more than the ${o.maxFileBytes} this tool returns; use run_command with head, tail or grep`);
        }
        const data = await sbx.files.read(st.path, { signal });
        try {
          return { text: new TextDecoder("utf-8", { fatal: true }).decode(data), isError: false };
        } catch {
          return errorResult(`${st.path} is not UTF-8 text (${data.length} bytes); inspect it with run_command (for example xxd | head)`);
        }
      }
    }
    return errorResult(`unknown tool ${JSON.stringify(name)}`);
  }

  /** Deletes the session's sandbox (not one passed in as options.sandbox). */
  async close(): Promise<void> {
    this.#closed = true;
    const s = this.#sandbox;
    this.#sandbox = undefined;
    if (s && this.#own) await (await s.catch(() => undefined))?.kill();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
