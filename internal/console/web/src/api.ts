// The console's calls: the REST API under /console/v1 (the session cookie
// authenticates; the CSRF token goes on every state-changing call).

export const CSRF_HEADER = "X-Paddock-CSRF";

let csrf = "";
let onSignedOut: () => void = () => {};

export interface SessionInfo {
  key_id: string;
  csrf_token: string;
  expires_at: string;
}

export class APIError extends Error {
  constructor(public status: number, public code: string, message: string) {
    super(message);
  }
}

export function setSignedOutHandler(fn: () => void): void {
  onSignedOut = fn;
}

async function failure(r: Response, signingIn = false): Promise<APIError> {
  let code = "http_" + r.status, msg = r.statusText || "request failed";
  try {
    const j = await r.json();
    code = j?.error?.code ?? code;
    msg = j?.error?.message ?? msg;
  } catch {
    /* not JSON */
  }
  if (r.status === 401 && !signingIn) onSignedOut();
  return new APIError(r.status, code, `${msg} (${code})`);
}

/** session returns the current session, or null when signed out. */
export async function session(): Promise<SessionInfo | null> {
  const r = await fetch("/console/session", { credentials: "same-origin" });
  if (!r.ok) return null;
  const s = (await r.json()) as SessionInfo;
  csrf = s.csrf_token;
  return s;
}

export async function signIn(key: string): Promise<SessionInfo> {
  const r = await fetch("/console/session", {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ key }),
  });
  if (!r.ok) throw await failure(r, true);
  const s = (await r.json()) as SessionInfo;
  csrf = s.csrf_token;
  return s;
}

export async function signOut(): Promise<void> {
  await fetch("/console/session", { method: "DELETE", credentials: "same-origin", headers: { [CSRF_HEADER]: csrf } });
  csrf = "";
}

/** raw sends a request to /console/v1 + path and answers the Response (throwing on an error status). */
export async function raw(method: string, path: string, body?: BodyInit, contentType?: string, signal?: AbortSignal, accept?: string): Promise<Response> {
  const headers: Record<string, string> = {};
  if (method !== "GET" && method !== "HEAD") headers[CSRF_HEADER] = csrf;
  if (contentType) headers["Content-Type"] = contentType;
  if (accept) headers["Accept"] = accept;
  const r = await fetch("/console/v1" + path, { method, headers, body, credentials: "same-origin", signal });
  if (!r.ok) throw await failure(r);
  return r;
}

/** call sends JSON and answers JSON (undefined for 204). */
export async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const r = await raw(method, path, body === undefined ? undefined : JSON.stringify(body), body === undefined ? undefined : "application/json");
  if (r.status === 204) return undefined as T;
  return (await r.json()) as T;
}

/** maxLine bounds one line of an NDJSON answer (the daemon's are far smaller). */
const maxLine = 4 << 20;

/** ndjson reads an NDJSON answer line by line. */
export async function ndjson(r: Response, each: (v: any) => void): Promise<void> {
  if (!r.body) return;
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    if (buf.length > maxLine) throw new Error(`a line of the answer is longer than ${maxLine} characters`);
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (line) each(JSON.parse(line));
    }
  }
  if (buf.trim()) each(JSON.parse(buf));
}

export const sbPath = (id: string, ...rest: string[]) =>
  "/sandboxes/" + encodeURIComponent(id) + (rest.length ? "/" + rest.join("/") : "");

// Wire shapes the pages read: the SDK's types, generated from
// api/openapi.yaml (type-only: nothing of the SDK is bundled).
export type { SandboxInfo as Sandbox, Metrics, MetricsSample, FileEntry } from "../../../../sdk/typescript/src/types.gen.js";
