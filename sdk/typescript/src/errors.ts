import type { ErrorBody, ErrorCode } from "./types.js";

/** Options of the PaddockError constructors. */
export interface PaddockErrorOptions {
  /** The HTTP status; each subclass has its own default. */
  status?: number;
  /** The API error code; each subclass has its own default. */
  code?: string;
  cause?: unknown;
}

/**
 * An error answer of paddockd: its HTTP `status`, the API error `code`
 * (match on it, or on the subclass) and the human `message`.
 *
 * A command that exits non-zero or times out is not an error: exec answers
 * with an `ExecResult`. Transport failures are `ConnectionError`s (status 0)
 * and client-side timeouts `RequestTimeoutError`s. Aborting through an
 * `AbortSignal` rejects with the signal's reason, as `fetch` does.
 */
export class PaddockError extends Error {
  /** The HTTP status, or 0 when no answer was received. */
  readonly status: number;
  /** The API error code (`not_found`, ...), or a client-side code. */
  readonly code: string;

  constructor(message: string, options: PaddockErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.status = options.status ?? 0;
    this.code = options.code ?? "";
    this.name = new.target.name;
  }
}

/** 400 `bad_request`: malformed request, value out of range, both or neither of argv/command, ... */
export class BadRequestError extends PaddockError {
  constructor(message: string, options: PaddockErrorOptions = {}) {
    super(message, { status: 400, code: "bad_request", ...options });
  }
}

/** 401 `unauthorized`: missing or unknown API key. */
export class UnauthorizedError extends PaddockError {
  constructor(message: string, options: PaddockErrorOptions = {}) {
    super(message, { status: 401, code: "unauthorized", ...options });
  }
}

/** 404 `not_found`: no such sandbox (or one of another key), process or file. */
export class NotFoundError extends PaddockError {
  constructor(message: string, options: PaddockErrorOptions = {}) {
    super(message, { status: 404, code: "not_found", ...options });
  }
}

/** 409 `conflict`: the sandbox or process is in the wrong state (for example not running). */
export class ConflictError extends PaddockError {
  constructor(message: string, options: PaddockErrorOptions = {}) {
    super(message, { status: 409, code: "conflict", ...options });
  }
}

/** 413 `too_large`: a body over its limit. */
export class TooLargeError extends PaddockError {
  constructor(message: string, options: PaddockErrorOptions = {}) {
    super(message, { status: 413, code: "too_large", ...options });
  }
}

/** 422 `unknown_template`: the template names no template of the daemon. */
export class UnknownTemplateError extends PaddockError {
  constructor(message: string, options: PaddockErrorOptions = {}) {
    super(message, { status: 422, code: "unknown_template", ...options });
  }
}

/** 429 `limit_exceeded`: a limit of the key or a maximum of the daemon was reached. */
export class LimitExceededError extends PaddockError {
  constructor(message: string, options: PaddockErrorOptions = {}) {
    super(message, { status: 429, code: "limit_exceeded", ...options });
  }
}

/** 500 `internal`: the daemon failed. */
export class InternalError extends PaddockError {
  constructor(message: string, options: PaddockErrorOptions = {}) {
    super(message, { status: 500, code: "internal", ...options });
  }
}

/** 502 `unavailable`: the sandbox's agent did not answer. */
export class UnavailableError extends PaddockError {
  constructor(message: string, options: PaddockErrorOptions = {}) {
    super(message, { status: 502, code: "unavailable", ...options });
  }
}

/** 503 `no_capacity`: the host has no room for another sandbox right now. */
export class NoCapacityError extends PaddockError {
  constructor(message: string, options: PaddockErrorOptions = {}) {
    super(message, { status: 503, code: "no_capacity", ...options });
  }
}

/** 507 `no_space`: the sandbox's disk is full. */
export class NoSpaceError extends PaddockError {
  constructor(message: string, options: PaddockErrorOptions = {}) {
    super(message, { status: 507, code: "no_space", ...options });
  }
}

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

/** A request took longer than its `timeoutMs` and was cancelled. */
export class RequestTimeoutError extends ConnectionError {
  constructor(message: string, options: PaddockErrorOptions = {}) {
    super(message, { code: "timeout", ...options });
  }
}

type ErrorClass = new (message: string, options?: PaddockErrorOptions) => PaddockError;

const byCode: Record<ErrorCode, ErrorClass> = {
  bad_request: BadRequestError,
  unauthorized: UnauthorizedError,
  not_found: NotFoundError,
  conflict: ConflictError,
  too_large: TooLargeError,
  unknown_template: UnknownTemplateError,
  limit_exceeded: LimitExceededError,
  internal: InternalError,
  unavailable: UnavailableError,
  no_capacity: NoCapacityError,
  no_space: NoSpaceError,
};

const statusOfCode: Record<ErrorCode, number> = {
  bad_request: 400,
  unauthorized: 401,
  not_found: 404,
  conflict: 409,
  too_large: 413,
  unknown_template: 422,
  limit_exceeded: 429,
  internal: 500,
  unavailable: 502,
  no_capacity: 503,
  no_space: 507,
};

function isKnownCode(code: string): code is ErrorCode {
  return Object.prototype.hasOwnProperty.call(byCode, code);
}

/** The error code a status travels with, for answers whose body has none. */
function codeForStatus(status: number): ErrorCode | undefined {
  switch (status) {
    case 400:
      return "bad_request";
    case 401:
    case 403:
      return "unauthorized";
    case 404:
      return "not_found";
    case 409:
      return "conflict";
    case 413:
      return "too_large";
    case 422:
      return "unknown_template";
    case 429:
      return "limit_exceeded";
    case 502:
    case 504:
      return "unavailable";
    case 503:
      return "no_capacity";
    case 507:
      return "no_space";
  }
  return status >= 500 ? "internal" : undefined;
}

/**
 * Builds the error of a status and code. A known code picks its class; an
 * unknown code (a newer daemon) falls back on the class of the status, so
 * that `instanceof NotFoundError` still holds for any 404.
 */
export function errorFor(status: number, code: string, message: string): PaddockError {
  if (isKnownCode(code)) return new byCode[code](message, { status, code });
  const fallback = codeForStatus(status);
  if (fallback) return new byCode[fallback](message, { status, code: code || fallback });
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
