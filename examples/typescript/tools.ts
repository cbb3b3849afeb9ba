// The run_python and run_command tools of the examples: their definitions
// for the Anthropic and OpenAI APIs, and a handler that runs a call in a
// Paddock sandbox and returns what the model should read.
//
// The model's code runs in the sandbox, never in this process. A non-zero
// exit, a traceback or a timeout is returned to the model as the tool's
// result, flagged as an error, so that it can read it and fix its code.

import type { ExecResult, Sandbox } from "@paddock/sdk";

export interface ToolDef {
  name: "run_python" | "run_command";
  description: string;
  schema: { type: "object"; properties: Record<string, unknown>; required: string[]; additionalProperties: false };
}

/** Seconds one call may run. */
export const CALL_TIMEOUT_SECONDS = 60;

/** Characters of stdout plus stderr returned to the model. */
export const OUTPUT_BUDGET = 20_000;

const ENVIRONMENT =
  "The sandbox is a Linux machine with python3, gcc, node, bash and git, and no internet access. " +
  "Files persist between calls in this conversation; the working directory is /workspace. " +
  `Each call may run for at most ${CALL_TIMEOUT_SECONDS} seconds.`;

export const RUN_PYTHON: ToolDef = {
  name: "run_python",
  description:
    "Run Python 3 code in a sandbox and return its exit code, stdout and stderr. " +
    "Use it to compute, test ideas and check your work; print what you want to see. " +
    ENVIRONMENT,
  schema: {
    type: "object",
    properties: { code: { type: "string", description: "Python 3 source code to run as a script." } },
    required: ["code"],
    additionalProperties: false,
  },
};

export const RUN_COMMAND: ToolDef = {
  name: "run_command",
  description:
    "Run a bash command in a sandbox and return its exit code, stdout and stderr. " +
    "Use it to write, compile and run programs or to inspect files. " +
    ENVIRONMENT,
  schema: {
    type: "object",
    properties: { command: { type: "string", description: "A bash command line, run with bash -lc in /workspace." } },
    required: ["command"],
    additionalProperties: false,
  },
};

/** The tool as the Anthropic Messages API takes it. */
export function anthropicTool(t: ToolDef) {
  return { name: t.name, description: t.description, input_schema: t.schema };
}

/** The tool as the OpenAI Responses API takes it (a function tool). */
export function openaiTool(t: ToolDef) {
  return { type: "function" as const, name: t.name, description: t.description, parameters: t.schema, strict: true };
}

/** The tool as OpenAI Chat Completions takes it (a strict function tool). */
export function openaiChatTool(t: ToolDef) {
  return { type: "function" as const, function: { name: t.name, description: t.description, parameters: t.schema, strict: true } };
}

/** What a tool call returns to the model. */
export interface ToolOutput {
  /** The text the model reads: JSON for a run, or an error message. */
  content: string;
  /** The call failed: a non-zero exit, a signal, a timeout, or bad input. */
  isError: boolean;
}

/** Keeps the head and tail of s within budget characters. */
function cutMiddle(s: string, budget: number): [string, boolean] {
  if (s.length <= budget) return [s, false];
  const head = Math.floor(budget / 2);
  const tail = budget - head;
  return [`${s.slice(0, head)}\n[... ${s.length - budget} characters cut ...]\n${s.slice(s.length - tail)}`, true];
}

/** Renders an exec result as the JSON the model reads. */
export function formatResult(res: ExecResult, budget = OUTPUT_BUDGET): ToolOutput {
  const half = Math.floor(budget / 2);
  const outBudget = res.stderr.length < half ? budget - res.stderr.length : half;
  const [stdout, outCut] = cutMiddle(res.stdout, outBudget);
  const [stderr, errCut] = cutMiddle(res.stderr, budget - Math.min(res.stdout.length, outBudget));
  const failed = res.timed_out || res.exit_code !== 0;
  return {
    content: JSON.stringify({
      exit_code: res.exit_code,
      timed_out: res.timed_out,
      stdout,
      stderr: stderr || (res.signal ? `killed by ${res.signal}` : ""),
      stdout_truncated: res.stdout_truncated || outCut,
      stderr_truncated: res.stderr_truncated || errCut,
    }),
    isError: failed,
  };
}

let runs = 0;

/**
 * Runs one tool call in the sandbox. `input` is the call's arguments, as an
 * object (Anthropic) or a JSON string (OpenAI). Every failure becomes an
 * error result for the model; nothing throws.
 */
export async function runTool(sbx: Sandbox, name: string, input: unknown): Promise<ToolOutput> {
  const error = (message: string): ToolOutput => ({ content: `error: ${message}`, isError: true });
  let args: Record<string, unknown>;
  try {
    args = typeof input === "string" ? JSON.parse(input) : ((input ?? {}) as Record<string, unknown>);
  } catch (err) {
    return error(`the arguments are not valid JSON: ${(err as Error).message}`);
  }
  // timeoutMs is the command's timeout: a run past it is a result with timed_out, not an exception.
  const limits = { timeoutMs: CALL_TIMEOUT_SECONDS * 1000, max_output_bytes: OUTPUT_BUDGET };
  try {
    switch (name) {
      case "run_python": {
        if (typeof args.code !== "string") return error('run_python needs a string "code"');
        const path = `/tmp/run_python_${++runs}.py`;
        await sbx.files.write(path, args.code);
        return formatResult(await sbx.exec({ argv: ["python3", path], ...limits }));
      }
      case "run_command": {
        if (typeof args.command !== "string") return error('run_command needs a string "command"');
        return formatResult(await sbx.exec({ command: args.command, ...limits }));
      }
      default:
        return error(`unknown tool ${JSON.stringify(name)}`);
    }
  } catch (err) {
    return error(`the sandbox could not run the call: ${(err as Error).message}`);
  }
}

/** One line about a call's outcome, for the console. */
export function describeCall(name: string, out: ToolOutput): string {
  let status = out.isError ? "failed" : "ok";
  try {
    const r = JSON.parse(out.content) as { exit_code: number | null; timed_out: boolean };
    status = r.timed_out ? "timed out" : `exit ${r.exit_code ?? "signal"}`;
  } catch {
    status = out.content.slice(0, 120);
  }
  return `[${name}] ${status}`;
}
