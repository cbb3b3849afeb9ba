package api

// Routes of the REST API. All but /v1/health and /v1/openapi.yaml need
// "Authorization: Bearer <key>". {id} is a sandbox id, {process} a process id.
//
//	GET    /v1/health                                   → Health
//	GET    /v1/openapi.yaml                             → the OpenAPI document
//	POST   /v1/sandboxes                                CreateSandboxRequest → 201 Sandbox
//	GET    /v1/sandboxes?limit=&cursor=&state=&metadata.K=V → ListSandboxesResponse
//	GET    /v1/sandboxes/{id}                           → Sandbox
//	DELETE /v1/sandboxes/{id}                           → 204
//	POST   /v1/sandboxes/{id}/timeout                   SetTimeoutRequest → Sandbox
//	POST   /v1/sandboxes/{id}/exec                      ExecRequest → ExecResult, or NDJSON Events with Accept: application/x-ndjson
//	POST   /v1/sandboxes/{id}/processes                 ExecRequest → 201 Process (background, does not wait)
//	GET    /v1/sandboxes/{id}/processes                 → ListProcessesResponse
//	GET    /v1/sandboxes/{id}/processes/{process}       → Process
//	POST   /v1/sandboxes/{id}/processes/{process}/wait?timeout_seconds=N → Process (state "running" if it did not end in time)
//	GET    /v1/sandboxes/{id}/processes/{process}/output → NDJSON Events: buffered output replayed, then live, then exit
//	POST   /v1/sandboxes/{id}/processes/{process}/stdin?eof=true raw body → 204
//	POST   /v1/sandboxes/{id}/processes/{process}/kill  SignalRequest → 204
//	PUT    /v1/sandboxes/{id}/files?path=P&mode=0644    raw body → FileEntry (parents created)
//	GET    /v1/sandboxes/{id}/files?path=P              → raw bytes
//	DELETE /v1/sandboxes/{id}/files?path=P&recursive=true → 204
//	GET    /v1/sandboxes/{id}/files/list?path=P&depth=N → ListFilesResponse
//	GET    /v1/sandboxes/{id}/files/stat?path=P         → FileEntry
//	POST   /v1/sandboxes/{id}/files/mkdir?path=P&mode=0755 → FileEntry (parents created)
//
// Relative file paths and cwd are relative to /workspace.

// ContentTypeNDJSON is the media type of event streams.
const ContentTypeNDJSON = "application/x-ndjson"
