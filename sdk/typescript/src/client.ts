// The client: one daemon, its key, and the sandbox routes.

import { mcpQuery, type McpUrlOptions } from "./mcp.js";
import { Secrets, Templates, usage, type UsageOptions } from "./admin.js";
import { ConnectionError } from "./errors.js";
import { DEFAULT_TIMEOUT_MS, Transport, VERSION, env, pathOf, resolveURL, type RequestOptions } from "./http.js";
import { Sandbox } from "./sandbox.js";
import type { Health, ListSandboxesResponse, SandboxInfo, SandboxState, Usage } from "./types.js";
import { checkCreate, type CreateParams } from "./create.js";

/** Options of the Paddock constructor. Every field is optional. */
export interface PaddockOptions {
  /**
   * The daemon's address, for example "http://host:7419". Default:
   * $PADDOCK_URL, else http://127.0.0.1:7419. A trailing "/v1" is accepted;
   * "http://" is assumed without a scheme.
   */
  url?: string;
  /** Sent as `Authorization: Bearer <apiKey>`. Default: $PADDOCK_API_KEY. */
  apiKey?: string;
  /**
   * Default deadline of each HTTP request in milliseconds (60000); 0 means
   * none. Exec and wait extend it to cover the run time the daemon allows
   * them, so it never cuts a command short.
   */
  requestTimeoutMs?: number;
  /** The fetch to use; default globalThis.fetch. */
  fetch?: typeof fetch;
  /** Default "paddock-ts/<version>". */
  userAgent?: string;
}

/** Filters of a sandbox listing. */
export interface ListOptions {
  /** Only this state; "all" lists terminated sandboxes too. Default: every state but terminated. */
  state?: SandboxState | "all";
  /** Only sandboxes whose metadata has all these pairs. */
  metadata?: Record<string, string>;
  /** Page size (the daemon's default is 100, at most 1000). */
  limit?: number;
  /** Start at this cursor (a `next_cursor`). */
  cursor?: string;
}

/**
 * The sandboxes matching a listing, fetched one page at a time as the
 * iteration goes: `for await (const sbx of paddock.list())`. `pages()`
 * iterates over the pages themselves.
 */
export class SandboxList implements AsyncIterable<Sandbox> {
  readonly #t: Transport;
  readonly #opts: ListOptions & RequestOptions;

  /** @internal Use `paddock.list()`. */
  constructor(t: Transport, opts: ListOptions & RequestOptions) {
    this.#t = t;
    this.#opts = opts;
  }

  /** Yields every page, following `next_cursor`. */
  async *pages(): AsyncGenerator<ListSandboxesResponse, void, undefined> {
    let cursor = this.#opts.cursor;
    const seen = new Set<string>();
    for (;;) {
      const page = await listPage(this.#t, { ...this.#opts, cursor });
      yield page;
      if (!page.next_cursor) return;
      if (seen.has(page.next_cursor)) {
        throw new ConnectionError(`list sandboxes: cursor ${JSON.stringify(page.next_cursor)} repeated`);
      }
      seen.add(page.next_cursor);
      cursor = page.next_cursor;
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Sandbox, void, undefined> {
    for await (const page of this.pages()) {
      for (const info of page.sandboxes ?? []) yield new Sandbox(this.#t, info);
    }
  }

  /** Collects every matching sandbox. */
  async toArray(): Promise<Sandbox[]> {
    const all: Sandbox[] = [];
    for await (const sbx of this) all.push(sbx);
    return all;
  }
}

function listPage(t: Transport, opts: ListOptions & RequestOptions): Promise<ListSandboxesResponse> {
  const q = new URLSearchParams();
  if (opts.limit) q.set("limit", String(opts.limit));
  if (opts.cursor) q.set("cursor", opts.cursor);
  if (opts.state) q.set("state", opts.state);
  for (const [k, v] of Object.entries(opts.metadata ?? {})) q.set(`metadata.${k}`, v);
  return t.json<ListSandboxesResponse>({
    method: "GET",
    path: "/sandboxes",
    query: q,
    signal: opts.signal,
    timeoutMs: t.deadline(opts),
  });
}

/**
 * A client of one paddockd.
 *
 * ```ts
 * const paddock = new Paddock(); // PADDOCK_URL, PADDOCK_API_KEY
 * await using sbx = await paddock.create();
 * const res = await sbx.exec({ argv: ["python3", "-c", "print(6*7)"] });
 * ```
 */
export class Paddock implements AsyncDisposable {
  readonly #t: Transport;
  /** The key's secrets. */
  readonly secrets: Secrets;
  /** Shared and per-key templates; `templates.create` builds with progress events. */
  readonly templates: Templates;

  constructor(opts: PaddockOptions = {}) {
    const f = opts.fetch ?? globalThis.fetch;
    if (typeof f !== "function") throw new TypeError("no fetch: use Node 20 or later, or pass options.fetch");
    this.#t = new Transport(
      resolveURL(opts.url),
      (opts.apiKey || env("PADDOCK_API_KEY") || "").trim(),
      opts.requestTimeoutMs ?? DEFAULT_TIMEOUT_MS,
      f,
      opts.userAgent ?? `paddock-ts/${VERSION}`,
    );
    this.secrets = new Secrets(this.#t);
    this.templates = new Templates(this.#t);
  }

  /** The calling key's consumption in a window (default the last 24 hours). */
  usage(opts: UsageOptions = {}): Promise<Usage> {
    return usage(this.#t, opts);
  }

  /** The daemon's OpenAPI document (YAML text); needs no API key. */
  openapi(opts: RequestOptions = {}): Promise<string> {
    return this.#t.call({ method: "GET", path: "/openapi.yaml", accept: "application/yaml", signal: opts.signal, timeoutMs: this.#t.deadline(opts) }, (res) => res.text());
  }

  /** The client holds no connections of its own; close() exists for symmetry with `await using`. */
  async close(): Promise<void> {}

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** The base URL requests go to, after the defaults. */
  get url(): string {
    return this.#t.baseURL;
  }

  /**
   * The daemon's MCP endpoint (`/v1/mcp`, streamable HTTP) for an MCP client,
   * with the options of the session it opens; send `authHeaders()` with it.
   * Checked before any request.
   */
  mcpUrl(opts: McpUrlOptions = {}): string {
    const q = mcpQuery(opts).toString();
    return `${this.#t.baseURL}/v1/mcp${q ? `?${q}` : ""}`;
  }

  /** The Authorization header other HTTP clients need (MCP, ports). */
  authHeaders(): Record<string, string> {
    return this.#t.apiKey ? { Authorization: `Bearer ${this.#t.apiKey}` } : {};
  }

  /** The daemon's status and version; needs no API key. */
  health(opts: RequestOptions = {}): Promise<Health> {
    return this.#t.json<Health>({ method: "GET", path: "/health", signal: opts.signal, timeoutMs: this.#t.deadline(opts) });
  }

  /**
   * Creates and starts a sandbox; every field is optional. Takes the REST
   * fields (`template`, `resources`, `env`, `metadata`, `network`, `secrets`,
   * `timeout_seconds`, `on_timeout`, `max_cost_micros`) and their camelCase
   * forms (`timeoutMs`, `onTimeout`, `maxCostMicros`); `network` may be a
   * mode string ("off", "full", ...) or a NetworkPolicy.
   */
  async create(params: CreateParams = {}, opts: RequestOptions = {}): Promise<Sandbox> {
    const info = await this.#t.json<SandboxInfo>({
      method: "POST",
      path: "/sandboxes",
      json: checkCreate(params),
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts),
    });
    return new Sandbox(this.#t, info);
  }

  /** Fetches the sandbox with the given id (NotFoundError when there is none for this key). */
  async get(id: string, opts: RequestOptions = {}): Promise<Sandbox> {
    const info = await this.#t.json<SandboxInfo>({
      method: "GET",
      path: pathOf("sandboxes", id),
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts),
    });
    return new Sandbox(this.#t, info);
  }

  /** Lists the key's sandboxes, fetching pages as the iteration goes. */
  list(opts: ListOptions & RequestOptions = {}): SandboxList {
    return new SandboxList(this.#t, opts);
  }

  /** Fetches one page of sandboxes. */
  listPage(opts: ListOptions & RequestOptions = {}): Promise<ListSandboxesResponse> {
    return listPage(this.#t, opts);
  }
}
