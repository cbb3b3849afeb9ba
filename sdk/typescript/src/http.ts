// The HTTP layer: URLs, headers, deadlines, cancellation and error answers.

import { ConnectionError, PaddockError, RequestTimeoutError, errorFromBody } from "./errors.js";

/** The version of this SDK, sent in the default User-Agent. */
export const VERSION = "0.1.0";

/** The address of a local paddockd, used when neither `url` nor PADDOCK_URL is set. */
export const DEFAULT_URL = "http://127.0.0.1:7419";

/** The default deadline of a request, in milliseconds. */
export const DEFAULT_TIMEOUT_MS = 60_000;

/**
 * Added to the run time the daemon itself bounds (an exec's
 * `timeout_seconds`, a wait's `timeoutSeconds`) to get the default deadline
 * of that request.
 */
export const GRACE_MS = 30_000;

/** Options every call accepts. */
export interface RequestOptions {
  /** Cancels the request; the call then rejects with the signal's reason. */
  signal?: AbortSignal;
  /**
   * Deadline of the HTTP request in milliseconds; past it the request is
   * cancelled and the call rejects with a `RequestTimeoutError`. 0 means
   * none. The default is the client's `requestTimeoutMs`, extended for calls
   * whose run time the daemon bounds (exec, wait). For streams the deadline
   * covers the wait for the answer's headers only. (A command's own timeout
   * is `timeoutMs` of exec, which ends in a `timed_out` result, not an error.)
   */
  requestTimeoutMs?: number;
}

type QueryValue = string | number | boolean | undefined;

/** One API call. */
export interface HttpRequest {
  method: string;
  /** The path below /v1, its segments already escaped. */
  path: string;
  query?: Record<string, QueryValue> | URLSearchParams;
  /** Sent as JSON. */
  json?: unknown;
  /** Sent as raw bytes (application/octet-stream unless contentType says otherwise). */
  body?: Uint8Array;
  contentType?: string;
  accept?: string;
  /** More request headers. */
  headers?: Record<string, string>;
  signal?: AbortSignal | undefined;
  /** The deadline in ms; 0 or Infinity means none. */
  timeoutMs: number;
}

/** An answer whose body is still to be read, with its cancellation. */
export interface OpenStream {
  response: Response;
  /** Maps an error met while reading the body to what the caller should see. */
  translate(err: unknown): unknown;
  /** Cancels the request if it is still going and releases its listeners. */
  close(): void;
}

/** The most read of an error answer. */
const MAX_ERROR_BODY = 64 << 10;

/** Reads the environment variable name, where there is an environment. */
export function env(name: string): string | undefined {
  const p = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return p?.env?.[name];
}

/**
 * The base URL requests go to: `url`, else $PADDOCK_URL, else DEFAULT_URL;
 * "http://" is assumed without a scheme, and a trailing "/" or "/v1" is
 * dropped.
 */
export function resolveURL(url?: string): string {
  let base = url || env("PADDOCK_URL") || DEFAULT_URL;
  if (!base.includes("://")) base = `http://${base}`;
  base = base.replace(/\/+$/, "");
  if (base.endsWith("/v1")) base = base.slice(0, -3);
  return base.replace(/\/+$/, "");
}

/** Escapes path segments and joins them with "/". */
export function pathOf(...segments: string[]): string {
  return segments.map((s) => "/" + encodeURIComponent(s)).join("");
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = err.cause;
    if (cause instanceof Error && cause.message) return `${err.message}: ${cause.message}`;
    if (cause && typeof cause === "object" && "code" in cause) return `${err.message}: ${String(cause.code)}`;
    return err.message;
  }
  return String(err);
}

/** Links a request to its caller's signal and its deadline. */
class Call {
  readonly controller = new AbortController();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timedOut = false;
  readonly #user: AbortSignal | undefined;
  readonly #onAbort = () => this.controller.abort(this.#user?.reason);

  constructor(
    readonly what: string,
    user: AbortSignal | undefined,
    readonly timeoutMs: number,
  ) {
    this.#user = user;
    if (user) {
      if (user.aborted) this.controller.abort(user.reason);
      else user.addEventListener("abort", this.#onAbort, { once: true });
    }
    if (timeoutMs > 0 && Number.isFinite(timeoutMs)) {
      this.#timer = setTimeout(() => {
        this.#timedOut = true;
        this.controller.abort(new RequestTimeoutError(`${this.what}: no answer within ${timeoutMs} ms`));
      }, timeoutMs);
    }
  }

  clearDeadline(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  done(): void {
    this.clearDeadline();
    this.#user?.removeEventListener("abort", this.#onAbort);
  }

  translate(err: unknown): unknown {
    if (this.#timedOut) {
      return new RequestTimeoutError(`${this.what}: no answer within ${this.timeoutMs} ms`, { cause: err });
    }
    if (this.#user?.aborted) return this.#user.reason;
    if (err instanceof PaddockError) return err;
    if (this.controller.signal.aborted) return this.controller.signal.reason ?? err;
    return new ConnectionError(`${this.what}: ${describe(err)}`, { cause: err });
  }
}

/** Reads at most MAX_ERROR_BODY bytes of an answer as text. */
async function readLimited(res: Response): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let n = 0;
  try {
    while (n < MAX_ERROR_BODY) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      n += value.byteLength;
    }
  } catch {
    // a broken error body still gives the status
  } finally {
    reader.cancel().catch(() => {});
  }
  const all = new Uint8Array(Math.min(n, MAX_ERROR_BODY));
  let off = 0;
  for (const c of chunks) {
    const part = c.subarray(0, all.byteLength - off);
    all.set(part, off);
    off += part.byteLength;
    if (off >= all.byteLength) break;
  }
  return new TextDecoder().decode(all);
}

/** Sends requests to one daemon. */
export class Transport {
  constructor(
    readonly baseURL: string,
    readonly apiKey: string,
    readonly timeoutMs: number,
    readonly fetchImpl: typeof fetch,
    readonly userAgent: string,
  ) {}

  url(path: string, query?: Record<string, QueryValue> | URLSearchParams): string {
    let u = `${this.baseURL}/v1${path}`;
    let q: URLSearchParams;
    if (query instanceof URLSearchParams) {
      q = query;
    } else {
      q = new URLSearchParams();
      for (const [k, v] of Object.entries(query ?? {})) {
        if (v !== undefined) q.set(k, String(v));
      }
    }
    const s = q.toString();
    if (s) u += `?${s}`;
    return u;
  }

  /** The deadline of a call: its own, else the client's, else at least `minMs`. */
  deadline(opts: RequestOptions | undefined, minMs = 0): number {
    const own = opts?.requestTimeoutMs;
    if (own !== undefined) {
      if (!(own >= 0)) throw new RangeError(`requestTimeoutMs must be a number >= 0, got ${String(own)}`);
      return own;
    }
    if (this.timeoutMs <= 0 || !Number.isFinite(this.timeoutMs)) return 0;
    return Math.max(this.timeoutMs, minMs);
  }

  async #send(req: HttpRequest, call: Call): Promise<Response> {
    const headers: Record<string, string> = {
      ...req.headers,
      Accept: req.accept ?? "application/json",
      "User-Agent": this.userAgent,
    };
    if (this.apiKey) headers.Authorization = `Bearer ${this.apiKey}`;
    let body: Uint8Array | string | undefined;
    if (req.json !== undefined) {
      body = JSON.stringify(req.json);
      headers["Content-Type"] = "application/json";
    } else if (req.body !== undefined) {
      body = req.body;
      headers["Content-Type"] = req.contentType ?? "application/octet-stream";
    }
    if (call.controller.signal.aborted) throw call.controller.signal.reason;
    const res = await this.fetchImpl(this.url(req.path, req.query), {
      method: req.method,
      headers,
      body: body as RequestInit["body"],
      signal: call.controller.signal,
    });
    if (!res.ok) throw errorFromBody(res.status, res.statusText, await readLimited(res));
    return res;
  }

  /** Sends req and reads its answer with read, both within the deadline. */
  async call<T>(req: HttpRequest, read: (res: Response) => Promise<T>): Promise<T> {
    const call = new Call(`${req.method} ${req.path}`, req.signal, req.timeoutMs);
    try {
      const res = await this.#send(req, call);
      return await read(res);
    } catch (err) {
      throw call.translate(err);
    } finally {
      call.done();
    }
  }

  /** Sends req and decodes its JSON answer. */
  json<T>(req: HttpRequest): Promise<T> {
    return this.call(req, async (res) => (await res.json()) as T);
  }

  /** Sends req and discards its answer. */
  empty(req: HttpRequest): Promise<void> {
    return this.call(req, async (res) => {
      await res.arrayBuffer();
    });
  }

  /** Sends req and returns the answer once its headers are in; the deadline ends there. */
  async open(req: HttpRequest): Promise<OpenStream> {
    const call = new Call(`${req.method} ${req.path}`, req.signal, req.timeoutMs);
    let res: Response;
    try {
      res = await this.#send(req, call);
    } catch (err) {
      call.done();
      throw call.translate(err);
    }
    call.clearDeadline();
    return {
      response: res,
      translate: (err) => call.translate(err),
      close: () => {
        call.done();
        if (!call.controller.signal.aborted) call.controller.abort();
      },
    };
  }
}
