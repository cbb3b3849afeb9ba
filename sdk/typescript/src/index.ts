// @paddock/sdk: the TypeScript SDK of Paddock, the self-hosted sandbox server.

export { Paddock, SandboxList, type ListOptions, type PaddockOptions } from "./client.js";
export {
  Files,
  Process,
  Sandbox,
  type ExecParams,
  type ListFilesOptions,
  type MkdirOptions,
  type RemoveOptions,
  type WaitOptions,
  type WriteFileOptions,
  type WriteStdinOptions,
} from "./sandbox.js";
export { DEFAULT_TIMEOUT_MS, DEFAULT_URL, VERSION, type RequestOptions } from "./http.js";
export type { EventBase, ExecEvent, ExitEvent, OutputEvent, StartEvent } from "./stream.js";
export {
  BadRequestError,
  ConflictError,
  ConnectionError,
  InternalError,
  LimitExceededError,
  NoCapacityError,
  NoSpaceError,
  NotFoundError,
  NotSupportedError,
  PaddockError,
  RequestTimeoutError,
  TooLargeError,
  UnauthorizedError,
  UnavailableError,
  UnknownTemplateError,
  type PaddockErrorOptions,
} from "./errors.js";
export type * from "./types.js";
