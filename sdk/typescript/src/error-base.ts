// The base class of the SDK's errors, apart from errors.ts so that the
// generated classes of errors.gen.ts can extend it.

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
