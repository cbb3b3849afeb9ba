// The errors of the SDK. The class of each API error code and the status
// it travels with are generated from api/openapi.yaml into errors.gen.ts
// (make generate); this file adds the client-side errors and the mapping of
// answers to errors.

import { PaddockError, type PaddockErrorOptions } from "./error-base.js";
import { codeOfStatus, errorClassOfCode, statusOfCode, InternalError } from "./errors.gen.js";
import type { ErrorBody, ErrorCode } from "./types.js";

export { PaddockError, type PaddockErrorOptions } from "./error-base.js";
export * from "./errors.gen.js";

/**
 * The daemon could not be reached, the connection broke, or an answer was
 * cut short (for example an event stream that ended without its exit
 * event). `status` is 0; `cause` holds the underlying error.
 */
export class ConnectionError extends PaddockError {
  constructor(message: string, options: PaddockErrorOptions = {}) {
    super(message, { status: 0, code: "connection_error", ...options });
  }
}

/** An HTTP request took longer than its `requestTimeoutMs` and was cancelled.
 * A command that outlives its own `timeoutMs` is a result (`timed_out`), not this error. */
export class RequestTimeoutError extends ConnectionError {
  constructor(message: string, options: PaddockErrorOptions = {}) {
    super(message, { code: "timeout", ...options });
  }
}

function isKnownCode(code: string): code is ErrorCode {
  return Object.prototype.hasOwnProperty.call(errorClassOfCode, code);
}

/**
 * Builds the error of a status and code. A known code picks its class; an
 * unknown code (a newer daemon) falls back on the class of the status, so
 * that `instanceof NotFoundError` still holds for any 404.
 */
export function errorFor(status: number, code: string, message: string): PaddockError {
  if (isKnownCode(code)) return new errorClassOfCode[code](message, { status, code });
  const fallback = codeOfStatus(status);
  if (fallback) return new errorClassOfCode[fallback](message, { status, code: code || fallback });
  return new PaddockError(message, { status, code: code || `http_${status}` });
}

/** Turns a non-JSON error body into a one-line message, or "" when it is empty, binary or HTML. */
function plainMessage(body: string): string {
  let s = body.trim();
  if (s === "" || s.startsWith("<") || s.includes("\uFFFD")) return "";
  const nl = s.indexOf("\n");
  if (nl >= 0) s = s.slice(0, nl).trim();
  return s.length > 200 ? `${s.slice(0, 200)}...` : s;
}

/** Builds the error of a non-2xx answer from its status and body text. */
export function errorFromBody(status: number, statusText: string, body: string): PaddockError {
  try {
    const parsed = JSON.parse(body) as { error?: Partial<ErrorBody> };
    const e = parsed?.error;
    if (e && typeof e.code === "string" && e.code !== "") {
      return errorFor(status, e.code, typeof e.message === "string" && e.message !== "" ? e.message : e.code);
    }
  } catch {
    // not the JSON error format (a proxy's page, plain text): fall through
  }
  const message = plainMessage(body) || statusText.toLowerCase() || `HTTP ${status}`;
  return errorFor(status, "", message);
}

/** Turns the `error` of an `error` stream event into a PaddockError. */
export function errorFromEvent(body: ErrorBody | undefined): PaddockError {
  if (!body || typeof body.code !== "string") {
    return new InternalError("stream error event without details");
  }
  const status = isKnownCode(body.code) ? statusOfCode[body.code] : 500;
  return errorFor(status, body.code, body.message || body.code);
}
