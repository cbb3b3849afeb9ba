package api

// Routes of the REST API. All but /v1/health and /v1/openapi.yaml need
// "Authorization: Bearer <key>". {id} is a sandbox id, {process} a process id.
// Outside /v1 and outside this table (whose lines openapi_test.go checks
// against openapi.yaml), the daemon also serves the Prometheus text format
// at "GET /metrics", without authentication; see docs/api.md.
//
//	GET    /v1/health                                   → Health
//	GET    /v1/openapi.yaml                             → the OpenAPI document
//	POST   /v1/sandboxes                                CreateSandboxRequest → 201 Sandbox
//	GET    /v1/sandboxes?limit=&cursor=&state=&metadata.K=V → ListSandboxesResponse
//	GET    /v1/sandboxes/{id}                           → Sandbox
//	DELETE /v1/sandboxes/{id}                           → 204
//	POST   /v1/sandboxes/{id}/timeout                   SetTimeoutRequest → Sandbox
//	POST   /v1/sandboxes/{id}/pause                     → Sandbox (409 if not running)
//	POST   /v1/sandboxes/{id}/resume                    → Sandbox (409 if not paused; new lease of the original length)
//	POST   /v1/sandboxes/{id}/checkpoint                → 204 when supported; 501 not_supported with the reason on hosts without a working CRIU (for now every host: the container backend does not implement it yet), 409 if not paused
//	GET    /v1/sandboxes/{id}/ports                     → ListPortsResponse (proxy: ANY /v1/sandboxes/{id}/ports/{port}/{path}, API key or signed URL)
//	PATCH  /v1/sandboxes/{id}/network                   NetworkPolicy → Sandbox (replaces allow and deny at once, cutting connections no longer allowed; mode allowlist ⇄ full only, 409 to or from off; 501 not_supported without networking)
//	GET    /v1/sandboxes/{id}/metrics                   → Metrics
//	GET    /v1/usage?from=&to=                          → Usage (from, to: RFC 3339; default the last 24 h)
//	POST   /v1/secrets                                  CreateSecretRequest → 201 Secret (re-posting a name replaces it; the value is write-only; 429 past 256 per key)
//	GET    /v1/secrets                                  → ListSecretsResponse (names and hosts, never values)
//	DELETE /v1/secrets/{name}                           → 204 (404 if the key has no such secret)
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
//	GET    /v1/templates                                → ListTemplatesResponse (base, shared and the key's own templates)
//	POST   /v1/templates?name=&dockerfile=&build_arg=&no_cache=&step_timeout_seconds= CreateTemplateRequest → 201 Template; with Accept: application/x-ndjson, 200 and one BuildEvent per line; a build context as a tar body (Content-Type: application/x-tar) takes the query parameters instead of JSON
//	GET    /v1/templates/{name}                         → Template ({name} is name[:tag])
//	DELETE /v1/templates/{name}                         → 204 (409 while a sandbox uses it; shared templates cannot be deleted)
//	POST   /v1/sandboxes/{id}/snapshot                  SnapshotRequest → 201 Template (the sandbox is frozen while its files are copied)
//	POST   /v1/mcp                                      → MCP streamable HTTP: JSON-RPC message in, JSON or text/event-stream out (see docs/mcp.md)
//	GET    /v1/mcp                                      → MCP streamable HTTP: text/event-stream of server messages (Mcp-Session-Id)
//	DELETE /v1/mcp                                      → 204 ends the MCP session (Mcp-Session-Id) and deletes its sandbox
//
// Relative file paths and cwd are relative to /workspace.

// ContentTypeNDJSON is the media type of event streams.
const ContentTypeNDJSON = "application/x-ndjson"
