// The run_code tool: cells in the sandbox's stateful interpreters, figures
// returned as images (the same text as Go's tooluse.FormatCode).

import type { CodeExecution } from "../types.js";
import { formatExec, truncateMiddle, type ToolImage, type ToolResult } from "./format.js";

export const RUN_CODE = "run_code";
/** The base64 bytes of images one run_code result carries by default. */
export const DEFAULT_IMAGE_BUDGET = 2 << 20;
const MAX_IMAGES = 4;

/** The run_code description before the environment note. */
export const RUN_CODE_TEXT =
  "Run a cell of code in a stateful interpreter in a sandbox, like a notebook: variables, imports " +
  "and loaded data stay for later calls. Returns stdout, stderr, the value of the last expression and " +
  "any error; matplotlib figures (no plt.show() needed) come back as images. numpy, pandas and " +
  "matplotlib are installed. ";

export const RUN_CODE_SCHEMA = {
  type: "object" as const,
  properties: {
    code: { type: "string", description: "The code to run." },
    language: { type: "string", enum: ["python", "javascript", "bash"], description: "The interpreter: python, javascript (Node) or bash; each language keeps its own state." },
  },
  required: ["code", "language"],
  additionalProperties: false as const,
};

/**
 * A cell's execution as the model reads it: JSON with the output within
 * budget characters, the last expression's value and the error, plus up to
 * four PNG/JPEG images within imageBudget base64 bytes (others are named in
 * the text). An error sets isError.
 */
export function formatCode(res: CodeExecution, budget = 20_000, imageBudget = DEFAULT_IMAGE_BUDGET): ToolResult {
  if (!(budget > 0)) budget = 20_000;
  if (!(imageBudget > 0)) imageBudget = DEFAULT_IMAGE_BUDGET;
  const ex = JSON.parse(
    formatExec({ exit_code: 0, signal: null, timed_out: false, stdout: res.stdout, stderr: res.stderr, stdout_truncated: res.stdout_truncated,
      stderr_truncated: res.stderr_truncated, stdout_bytes: 0, stderr_bytes: 0, duration_ms: 0 }, Math.floor((budget * 3) / 4)).text,
  );
  const out: Record<string, unknown> = { execution_count: res.execution_count, stdout: ex.stdout, stderr: ex.stderr };
  if (ex.stdout_truncated) out.stdout_truncated = true;
  if (ex.stderr_truncated) out.stderr_truncated = true;
  const images: ToolImage[] = [];
  const notes: string[] = [];
  const outputs: string[] = [];
  let left = Math.floor(budget / 4);
  for (const r of res.results ?? []) {
    const [text] = truncateMiddle(r.data["text/plain"] ?? "", Math.max(left, 200));
    left -= text.length;
    if (r.is_main_result) out.result = text;
    for (const mt of ["image/png", "image/jpeg"]) {
      const data = r.data[mt];
      if (data === undefined) continue;
      if (images.length >= MAX_IMAGES) notes.push(`${mt} of ${data.length} bytes not shown: at most ${MAX_IMAGES} images per call`);
      else if (data.length > imageBudget) {
        notes.push(`${mt} of ${data.length} bytes not shown: over the ${imageBudget}-byte image budget; save it to a file or make it smaller`);
      } else {
        imageBudget -= data.length;
        images.push({ mediaType: mt, data });
        notes.push(`${mt} shown as image ${images.length}`);
      }
      break;
    }
    for (const [mt, n] of Object.entries(r.omitted ?? {})) notes.push(`${mt} of ${n} bytes left out by the sandbox: too large`);
    if (!r.is_main_result && text) outputs.push(text);
  }
  if (outputs.length) out.outputs = outputs;
  if (res.error) out.error = { name: res.error.name, value: res.error.value, traceback: truncateMiddle(res.error.traceback, Math.floor(budget / 4))[0] };
  if (res.timed_out) out.timed_out = true;
  if (res.restarted) out.restarted = true;
  if (notes.length) out.images = notes;
  return { text: JSON.stringify(out), isError: res.error !== undefined && res.error !== null, images };
}

/** res.text with a note about its images, for Chat tool messages (text only). */
export function imageNote(res: ToolResult): string {
  const n = res.images?.length ?? 0;
  if (n === 0) return res.text;
  return `${res.text}\n[${n} image(s) produced; this API cannot show images in tool results, describe the data in text instead]`;
}
