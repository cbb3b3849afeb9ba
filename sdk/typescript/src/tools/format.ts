// What a command's result looks like to a model: JSON with head+tail truncation to a budget.

import type { ExecResult } from "../types.js";

/** What one tool call returns to the model. */
export interface ToolResult {
  /** The text the model reads: JSON for a run, a message otherwise. */
  text: string;
  /** The call failed: a non-zero exit, a signal, a timeout, or bad input. */
  isError: boolean;
  /** Images the call produced (run_code figures), for the APIs that show them. */
  images?: ToolImage[];
}

/** An image of a tool result: its media type and base64 data. */
export interface ToolImage {
  mediaType: string;
  data: string;
}

/** Keeps the head and tail of s within budget characters, marking the cut. */
export function truncateMiddle(s: string, budget: number): [string, boolean] {
  if (s.length <= budget) return [s, false];
  const head = Math.floor(budget / 2);
  const tail = budget - head;
  return [`${s.slice(0, head)}\n[... ${s.length - budget} characters cut ...]\n${s.slice(s.length - tail)}`, true];
}

/**
 * Formats an exec result as Go's tooluse.FormatExec does: JSON with
 * exit_code, timed_out, stdout, stderr and truncation flags, stdout and
 * stderr sharing the budget (a short stream leaves the rest to the other).
 * A timeout, a signal or a non-zero exit sets isError.
 */
export function formatExec(res: ExecResult, budget = 20_000): ToolResult {
  if (!(budget > 0)) budget = 20_000;
  const so = res.stdout ?? "";
  const se = res.stderr ?? "";
  let bs = Math.floor(budget / 2);
  if (se.length < bs) bs = budget - se.length;
  const be = budget - Math.min(so.length, bs);
  const [stdout, cutOut] = truncateMiddle(so, bs);
  let [stderr, cutErr] = truncateMiddle(se, be);
  if (res.signal && stderr === "") stderr = `killed by ${res.signal}`;
  const out = {
    exit_code: res.exit_code ?? null,
    timed_out: res.timed_out,
    stdout,
    stderr,
    stdout_truncated: res.stdout_truncated || cutOut,
    stderr_truncated: res.stderr_truncated || cutErr,
  };
  const failed = res.timed_out || res.exit_code === null || res.exit_code === undefined || res.exit_code !== 0;
  return { text: JSON.stringify(out), isError: failed };
}

/** A failed call's result. */
export function errorResult(message: string): ToolResult {
  return { text: `error: ${message}`, isError: true };
}
