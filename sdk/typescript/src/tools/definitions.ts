// The canonical tool definitions (as Go's tooluse) and their shapes for each model API.

import { DEFAULT_IMAGE_BUDGET, RUN_CODE, RUN_CODE_SCHEMA, RUN_CODE_TEXT } from "./code.js";

/** The tool names. */
export const RUN_PYTHON = "run_python";
export const RUN_COMMAND = "run_command";
export const WRITE_FILE = "write_file";
export const READ_FILE = "read_file";
export { RUN_CODE };
export type ToolName = typeof RUN_PYTHON | typeof RUN_COMMAND | typeof WRITE_FILE | typeof READ_FILE | typeof RUN_CODE;

/** A JSON Schema object with every property required and no others (valid as `strict: true`). */
export interface ObjectSchema {
  type: "object";
  properties: Record<string, { type: "string"; description: string }>;
  required: string[];
  additionalProperties: false;
}

/** One tool, independent of the model API. */
export interface Tool {
  name: ToolName;
  description: string;
  inputSchema: ObjectSchema;
}

/** Options of the tools and of their executor. */
export interface ToolOptions {
  /** Bound on each run_python / run_command call, in milliseconds (default 60000). */
  timeoutMs?: number;
  /** Characters of stdout plus stderr returned to the model (default 20000). */
  outputBudget?: number;
  /** The largest file read_file returns, in bytes (default 100000). */
  maxFileBytes?: number;
  /** Tells the model about the sandbox's network (default "It has no internet access."). */
  networkNote?: string;
  /** Which tools, in order (default run_python, run_command, write_file, read_file; add run_code for the stateful code tool). */
  tools?: ToolName[];
  /** The base64 bytes of images one run_code result carries (default 2 MiB). */
  imageBudget?: number;
}

/** ToolOptions with the defaults filled in. */
export type ResolvedToolOptions = Required<ToolOptions>;

const ALL: ToolName[] = [RUN_PYTHON, RUN_COMMAND, WRITE_FILE, READ_FILE];
/** Every tool, run_code included. */
export const KNOWN_TOOLS: ToolName[] = [...ALL, RUN_CODE];

export function withDefaults(o: ToolOptions = {}): ResolvedToolOptions {
  const num = (name: string, v: number | undefined, def: number): number => {
    if (v === undefined || v === 0) return def;
    if (typeof v !== "number" || !(v > 0) || !Number.isFinite(v)) throw new RangeError(`${name} must be a number > 0, got ${String(v)}`);
    return v;
  };
  const tools = o.tools && o.tools.length > 0 ? o.tools : ALL;
  for (const t of tools) if (!KNOWN_TOOLS.includes(t)) throw new RangeError(`tools: unknown tool ${JSON.stringify(t)} (known: ${KNOWN_TOOLS.join(", ")})`);
  return {
    timeoutMs: num("timeoutMs", o.timeoutMs, 60_000),
    outputBudget: num("outputBudget", o.outputBudget, 20_000),
    maxFileBytes: num("maxFileBytes", o.maxFileBytes, 100_000),
    networkNote: o.networkNote || "It has no internet access.",
    tools,
    imageBudget: num("imageBudget", o.imageBudget, DEFAULT_IMAGE_BUDGET),
  };
}

function object(props: Record<string, string>): ObjectSchema {
  const properties: ObjectSchema["properties"] = {};
  for (const [k, description] of Object.entries(props)) properties[k] = { type: "string", description };
  return { type: "object", properties, required: Object.keys(props), additionalProperties: false };
}

/** The tools the options select, with the same text as Go's tooluse.Tools. */
export function tools(opts: ToolOptions = {}): Tool[] {
  const o = withDefaults(opts);
  const env =
    "The sandbox is a Linux machine (Debian) with python3, node, gcc, bash and git. " +
    `${o.networkNote} Files persist between calls in this conversation; the working directory is /workspace. ` +
    `Each call may run for at most ${Math.round(o.timeoutMs / 1000)}s.`;
  const path = "File path, absolute or relative to /workspace.";
  const all: Record<ToolName, Tool> = {
    run_python: {
      name: RUN_PYTHON,
      description:
        "Run Python 3 code in a sandbox and return its exit code, stdout and stderr. " +
        "Use it to compute, test ideas and check your work; print what you want to see. " +
        env,
      inputSchema: object({ code: "Python 3 source code to run as a script." }),
    },
    run_command: {
      name: RUN_COMMAND,
      description:
        "Run a bash command in a sandbox and return its exit code, stdout and stderr. " +
        "Use it to compile and run programs, install packages, or inspect files. " +
        env,
      inputSchema: object({ command: "A bash command line, run with bash -lc in /workspace." }),
    },
    write_file: {
      name: WRITE_FILE,
      description: "Write a text file in the sandbox, creating parent directories. Relative paths are relative to /workspace. " + env,
      inputSchema: object({ path, content: "The full file content." }),
    },
    run_code: { name: RUN_CODE, description: RUN_CODE_TEXT + env, inputSchema: RUN_CODE_SCHEMA as unknown as ObjectSchema },
    read_file: {
      name: READ_FILE,
      description: `Read a text file from the sandbox (at most ${o.maxFileBytes} bytes). Relative paths are relative to /workspace.`,
      inputSchema: object({ path }),
    },
  };
  return o.tools.map((n) => all[n]);
}

/** The tools as the Anthropic Messages API takes them (`tools` of messages.create). */
export function anthropicTools(list: Tool[] = tools()) {
  return list.map((t) => ({ name: t.name, description: t.description, input_schema: t.inputSchema }));
}

/** The tools as OpenAI Chat Completions takes them, with `strict: true`. */
export function openaiChatTools(list: Tool[] = tools()) {
  return list.map((t) => ({
    type: "function" as const,
    function: { name: t.name, description: t.description, parameters: t.inputSchema, strict: true },
  }));
}

/** The tools as the OpenAI Responses API takes them (function tools), with `strict: true`. */
export function openaiResponsesTools(list: Tool[] = tools()) {
  return list.map((t) => ({ type: "function" as const, name: t.name, description: t.description, parameters: t.inputSchema, strict: true }));
}
