// @paddock/sdk/tools: tool definitions, an executor and ready loops for model APIs.

export * from "./definitions.js";
export { errorResult, formatExec, truncateMiddle, type ToolImage, type ToolResult } from "./format.js";
export { DEFAULT_IMAGE_BUDGET, formatCode, imageNote } from "./code.js";
export { ToolSession, type Executor, type SessionOptions } from "./session.js";
export * from "./loops.js";
