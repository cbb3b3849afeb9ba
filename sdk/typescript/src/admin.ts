// Key-wide resources: secrets, templates (with build progress) and usage.

import { ConnectionError, errorFromEvent } from "./errors.js";
import { pathOf, type RequestOptions, type Transport } from "./http.js";
import { NDJSON, readLines } from "./stream.js";
import type {
  BuildEvent,
  CreateSecretRequest,
  CreateTemplateRequest,
  ListSecretsResponse,
  ListTemplatesResponse,
  Secret,
  Template,
  Usage,
} from "./types.js";

/** Options of usage(): the window, as Dates or RFC 3339 strings. */
export interface UsageOptions extends RequestOptions {
  /** Start of the window (included); the daemon's default is 24 hours before `to`. */
  from?: Date | string;
  /** End of the window (excluded); default now. */
  to?: Date | string;
}

/** Options of templates.create(). */
export interface BuildOptions extends RequestOptions {
  /** Called with each build event (step, output, cached, done) as it arrives. */
  onEvent?: (ev: BuildEvent) => void;
}

function nonEmpty(name: string, v: unknown): string {
  if (typeof v !== "string" || v === "") throw new TypeError(`${name} must be a non-empty string`);
  return v;
}

function timeParam(name: string, v: Date | string | undefined): string | undefined {
  if (v === undefined) return undefined;
  if (v instanceof Date) {
    if (Number.isNaN(v.getTime())) throw new RangeError(`${name} is an invalid Date`);
    return v.toISOString();
  }
  if (typeof v !== "string" || Number.isNaN(Date.parse(v))) throw new TypeError(`${name} must be a Date or an RFC 3339 string`);
  return v;
}

/** The key's secrets: values the daemon injects as env vars of sandboxes that name them. */
export class Secrets {
  readonly #t: Transport;
  /** @internal Use `paddock.secrets`. */
  constructor(t: Transport) {
    this.#t = t;
  }

  /** Creates or replaces a secret; the answer never holds the value. */
  create(params: CreateSecretRequest, opts: RequestOptions = {}): Promise<Secret> {
    if (!params || typeof params !== "object") throw new TypeError("params must be {name, value}");
    nonEmpty("name", params.name);
    if (typeof params.value !== "string") throw new TypeError("value must be a string");
    return this.#t.json<Secret>({ method: "POST", path: "/secrets", json: params, signal: opts.signal, timeoutMs: this.#t.deadline(opts) });
  }

  /** The key's secrets, without their values. */
  async list(opts: RequestOptions = {}): Promise<Secret[]> {
    const res = await this.#t.json<ListSecretsResponse>({ method: "GET", path: "/secrets", signal: opts.signal, timeoutMs: this.#t.deadline(opts) });
    return res.secrets ?? [];
  }

  /** Deletes the named secret (NotFoundError when there is none). */
  delete(name: string, opts: RequestOptions = {}): Promise<void> {
    return this.#t.empty({ method: "DELETE", path: pathOf("secrets", nonEmpty("name", name)), signal: opts.signal, timeoutMs: this.#t.deadline(opts) });
  }
}

/** Templates: the shared ones and the key's own; create imports or builds one. */
export class Templates {
  readonly #t: Transport;
  /** @internal Use `paddock.templates`. */
  constructor(t: Transport) {
    this.#t = t;
  }

  async list(opts: RequestOptions = {}): Promise<Template[]> {
    const res = await this.#t.json<ListTemplatesResponse>({ method: "GET", path: "/templates", signal: opts.signal, timeoutMs: this.#t.deadline(opts) });
    return res.templates ?? [];
  }

  get(name: string, opts: RequestOptions = {}): Promise<Template> {
    return this.#t.json<Template>({ method: "GET", path: pathOf("templates", nonEmpty("name", name)), signal: opts.signal, timeoutMs: this.#t.deadline(opts) });
  }

  delete(name: string, opts: RequestOptions = {}): Promise<void> {
    return this.#t.empty({ method: "DELETE", path: pathOf("templates", nonEmpty("name", name)), signal: opts.signal, timeoutMs: this.#t.deadline(opts) });
  }

  /**
   * Imports or builds a template and resolves with it. The build's progress
   * events go to `opts.onEvent`; `build()` yields them instead. An `error`
   * event rejects with its PaddockError.
   */
  async create(params: CreateTemplateRequest, opts: BuildOptions = {}): Promise<Template> {
    for await (const ev of this.build(params, opts)) {
      opts.onEvent?.(ev);
      if (ev.type === "done" && ev.template) return ev.template;
    }
    throw new ConnectionError("template build stream ended without a done event");
  }

  /** Imports or builds a template, yielding its events up to `done`. */
  async *build(params: CreateTemplateRequest, opts: RequestOptions = {}): AsyncGenerator<BuildEvent, void, undefined> {
    if (!params || typeof params !== "object") throw new TypeError("params must be a CreateTemplateRequest");
    nonEmpty("name", params.name);
    const s = await this.#t.open({
      method: "POST",
      path: "/templates",
      json: params,
      accept: NDJSON,
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts),
    });
    try {
      const res = s.response;
      if ((res.headers.get("content-type") ?? "").startsWith("application/json")) {
        const template = (await res.json()) as Template;
        yield { type: "done", template };
        return;
      }
      if (!res.body) throw new ConnectionError("build stream without a body");
      for await (const line of readLines(res.body)) {
        let ev: BuildEvent;
        try {
          ev = JSON.parse(line) as BuildEvent;
        } catch (err) {
          throw new ConnectionError(`bad build event: ${line.slice(0, 100)}`, { cause: err });
        }
        if (ev.type === "error") throw errorFromEvent(ev.error);
        yield ev;
        if (ev.type === "done") return;
      }
      throw new ConnectionError("build stream ended without a done event");
    } catch (err) {
      throw s.translate(err);
    } finally {
      s.close();
    }
  }
}

/** The calling key's consumption in a window. */
export async function usage(t: Transport, opts: UsageOptions = {}): Promise<Usage> {
  const query: Record<string, string | undefined> = { from: timeParam("from", opts.from), to: timeParam("to", opts.to) };
  return t.json<Usage>({ method: "GET", path: "/usage", query, signal: opts.signal, timeoutMs: t.deadline(opts) });
}
