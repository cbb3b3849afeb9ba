// Wire types of the Paddock REST API (/v1), written by hand from
// api/openapi.yaml (whose source of truth is api/api.go). Field names are
// the JSON names of the contract (snake_case), as in the OpenAPI document.

/** The state of a sandbox: `creating` → `running` → `stopped` / `terminated`. `paused` is reserved. */
export type SandboxState = "creating" | "running" | "paused" | "stopped" | "terminated";

/** The limits of one sandbox. In a create request, absent (or zero) fields take the daemon's defaults. */
export interface Resources {
  /** CPU quota in cores; fractions allowed (default 1). */
  vcpus?: number;
  /** Memory limit in MiB; there is no swap (default 512). */
  memory_mib?: number;
  /** Size of the sandbox's writable layer in MiB (default 1024). */
  disk_mib?: number;
  /** Maximum number of processes and threads (default 256). */
  pids?: number;
}

/** The body of `POST /v1/sandboxes`. Every field is optional. */
export interface CreateSandboxRequest {
  /** Template (root filesystem image); default `base`. */
  template?: string;
  /** The lease in seconds (default 300, at most 86400). */
  timeout_seconds?: number;
  /** Environment variables of every command run in the sandbox. */
  env?: Record<string, string>;
  /** Free-form labels, returned in the sandbox and usable as list filters. */
  metadata?: Record<string, string>;
  resources?: Resources;
}

/** One sandbox, as the daemon reports it. Times are RFC 3339 strings. */
export interface SandboxInfo {
  id: string;
  template: string;
  state: SandboxState;
  created_at: string;
  /** When the lease ends and the reaper terminates the sandbox. */
  expires_at: string;
  metadata: Record<string, string>;
  resources: Resources;
  /** The OCI runtime running the sandbox (runc, crun, ...). */
  runtime?: string;
  /** Set once the sandbox is stopped or terminated. */
  ended_at?: string;
  /** Why the sandbox stopped or was terminated ("deleted", "expired", "failed: ..."). */
  reason?: string;
}

/** One page of sandboxes; `next_cursor` is empty on the last page. */
export interface ListSandboxesResponse {
  sandboxes: SandboxInfo[];
  next_cursor: string;
}

/** The body of `POST /v1/sandboxes/{id}/timeout`. */
export interface SetTimeoutRequest {
  timeout_seconds: number;
}

/** The fields of an exec request other than what to run. */
export interface ExecRequestOptions {
  /** Working directory; relative paths are relative to /workspace (the default). */
  cwd?: string;
  /** Extra environment variables for this command. */
  env?: Record<string, string>;
  /** Written to standard input, which is then closed. At most 16 MiB. */
  stdin?: string;
  /** Like `stdin`, for binary input (base64). */
  stdin_base64?: string;
  /**
   * Bounds the run in seconds (fractions allowed). Exec: default 60.
   * Background processes: 0 or absent means no timeout beyond the lease.
   */
  timeout_seconds?: number;
  /** Caps stdout and stderr each, in bytes (default 65536, at most 16 MiB). */
  max_output_bytes?: number;
  /** Background processes: leave stdin open for writes. Ignored by exec. */
  keep_stdin_open?: boolean;
}

/** `argv` is run directly, resolved through PATH, with no shell. */
export interface ArgvCommand {
  argv: string[];
  command?: never;
}

/** `command` is run by `/bin/bash -lc` (or `/bin/sh -c` when the template has no bash). */
export interface ShellCommand {
  command: string;
  argv?: never;
}

/**
 * The body of `POST /v1/sandboxes/{id}/exec` and `POST /v1/sandboxes/{id}/processes`:
 * exactly one of `argv` and `command`.
 */
export type ExecRequest = (ArgvCommand | ShellCommand) & ExecRequestOptions;

/**
 * The outcome of a command. A non-zero exit and a timeout are results, not
 * errors: `exit_code` is null when the process was killed by a signal, and
 * `signal` then names it.
 */
export interface ExecResult {
  exit_code: number | null;
  signal: string | null;
  timed_out: boolean;
  /** Present (true) only when the command ran out of memory. */
  oom_killed?: boolean;
  stdout: string;
  stderr: string;
  stdout_truncated: boolean;
  stderr_truncated: boolean;
  /** Bytes written to stdout, including any that were dropped. */
  stdout_bytes: number;
  /** Bytes written to stderr, including any that were dropped. */
  stderr_bytes: number;
  duration_ms: number;
}

/** The `type` of a stream event. */
export type EventType = "start" | "stdout" | "stderr" | "exit" | "error";

/** One line of an NDJSON stream exactly as it travels (`data` still base64). */
export interface WireEvent extends Partial<ExecResult> {
  type: EventType;
  process_id?: string;
  pid?: number;
  data?: string;
  time?: string;
  error?: ErrorBody;
}

/** The state of a background process. */
export type ProcessState = "running" | "exited";

/** A command started in the background. */
export interface ProcessInfo {
  /** The id used in URLs (not the pid). */
  id: string;
  /** The pid inside the sandbox. */
  pid: number;
  argv?: string[];
  command?: string;
  cwd: string;
  state: ProcessState;
  started_at: string;
  ended_at?: string;
  /** Set once the process has exited. */
  result?: ExecResult;
}

export interface ListProcessesResponse {
  processes: ProcessInfo[];
}

/** The body of `POST .../processes/{process}/kill`. */
export interface SignalRequest {
  signal?: string;
}

/** The type of a file entry. */
export type FileType = "file" | "dir" | "symlink" | "other";

/** One file, directory or link inside the sandbox. */
export interface FileEntry {
  /** Absolute path inside the sandbox. */
  path: string;
  name: string;
  type: FileType;
  size: number;
  /** Permission bits in octal, for example "0644". */
  mode: string;
  modified_at: string;
  /** Target of a symlink. */
  link_target?: string;
}

export interface ListFilesResponse {
  entries: FileEntry[];
  /** The listing hit the daemon's entry limit. Absent when false. */
  truncated?: boolean;
}

/** The error codes of the API; each travels with one HTTP status. */
export type ErrorCode =
  | "bad_request"
  | "unauthorized"
  | "not_found"
  | "conflict"
  | "too_large"
  | "unknown_template"
  | "limit_exceeded"
  | "internal"
  | "unavailable"
  | "no_capacity"
  | "no_space";

export interface ErrorBody {
  code: string;
  message: string;
}

/** The body of every error answer. */
export interface ErrorResponse {
  error: ErrorBody;
}

/** The answer to `GET /v1/health`. */
export interface Health {
  status: string;
  version: string;
}
