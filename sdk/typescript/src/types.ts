// Wire types of the Paddock REST API (/v1), generated from api/openapi.yaml
// into types.gen.ts (make generate). Field names are the JSON names of the
// contract (snake_case), as in the OpenAPI document.

export type * from "./types.gen.js";
