// @paddock/sdk: the TypeScript SDK of Paddock, the self-hosted sandbox server.

export { Paddock, SandboxList, type ListOptions, type PaddockOptions } from "./client.js";
export { type McpUrlOptions } from "./mcp.js";
export { Secrets, Templates, type BuildOptions, type UsageOptions } from "./admin.js";
export type { CreateParams } from "./create.js";
export type { IdleParams, PauseOptions, StopOptions } from "./lifecycle.js";
export { Sandbox, type Command, type ExecOptions, type ExecParams } from "./sandbox.js";
export { CodeContexts, DEFAULT_CODE_SECONDS, type RunCodeOptions } from "./code.js";
export { Files, type ListFilesOptions, type MkdirOptions, type RemoveOptions, type WriteFileOptions } from "./files.js";
export { Process, type WaitOptions, type WriteStdinOptions } from "./process.js";
export { FileWatch, Terminal, type PtyOptions, type WatchOptions } from "./terminal.js";
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
