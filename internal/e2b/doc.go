// Package e2b serves an E2B-compatible API on top of Paddock's manager and
// guest agent, so that the unmodified E2B SDKs (npm e2b, the Python e2b
// package, @e2b/code-interpreter) run against paddockd when pointed at it
// through their own environment variables (E2B_API_URL, E2B_SANDBOX_URL,
// E2B_DOMAIN, E2B_API_KEY).
//
// It is a front, not a fork: every call becomes a manager or agent.Client
// call, so semantics (leases, limits, network policy, bounded output) are
// Paddock's. E2B's in-sandbox daemon (envd) is not run; its Connect RPC
// services (process.Process, filesystem.Filesystem) and HTTP routes
// (/files, /health, /envs) are answered here.
//
// One listener serves both planes. A request is for a sandbox's data plane
// when it names a sandbox by the E2b-Sandbox-Id / E2b-Sandbox-Port headers
// (E2B_SANDBOX_URL mode) or by a host name <port>-<sandboxID>.<domain>
// (E2B_DOMAIN mode); everything else is the control plane (/sandboxes,
// /v2/sandboxes, ...). Port 49983 is envd's; any other port is proxied to
// that port inside the sandbox.
//
// Authentication: the control plane takes X-API-KEY (or a Bearer token)
// and maps it to a Paddock API key. The data plane takes the per-sandbox
// envdAccessToken returned by create and connect (X-Access-Token), or, for
// /files, a v1 signature made with it. The token is an HMAC of the sandbox
// id under the daemon's port key, so it survives daemon restarts and is
// never stored.
//
// Connect protocol: the JSON codec only (application/json for unary,
// application/connect+json for streams), which is what both SDKs send;
// the binary codec is answered with 415.
package e2b
