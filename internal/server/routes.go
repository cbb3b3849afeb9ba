package server

import (
	"fmt"
	"net/http"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// authKind says how a route authenticates its caller.
type authKind int

const (
	// authKey routes need "Authorization: Bearer <key>"; their handler gets
	// the key's id and returns errors, which become JSON error answers.
	authKey authKind = iota
	// authNone routes are public (health, the OpenAPI document, /metrics).
	authNone
	// authSelf routes authenticate by themselves: the port proxy (API key or
	// signed URL) and MCP (API key, sessions bound to it).
	authSelf
)

// keyedHandler is a handler of an authKey route: a method of Server that
// gets the caller's key id.
type keyedHandler func(s *Server, w http.ResponseWriter, r *http.Request, owner string) error

// route is one entry of the route table.
type route struct {
	// pattern is the ServeMux pattern, "METHOD /path" (a path alone matches
	// every method).
	pattern string
	auth    authKind
	// methods lists what a pattern without a method serves, for the check
	// against openapi.yaml; empty for the port proxy, which relays any.
	methods []string
	// bind makes the route's http.Handler for a server; called once.
	bind func(s *Server) http.Handler
}

// keyed is an authenticated route whose handler returns errors.
func keyed(pattern string, h keyedHandler) route {
	return route{pattern: pattern, auth: authKey, bind: func(s *Server) http.Handler {
		return s.withKey(func(w http.ResponseWriter, r *http.Request, owner string) error { return h(s, w, r, owner) })
	}}
}

// public is a route without authentication.
func public(pattern string, h func(s *Server, w http.ResponseWriter, r *http.Request)) route {
	return route{pattern: pattern, auth: authNone, bind: func(s *Server) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(s, w, r) })
	}}
}

// routeTable is every route paddockd serves. The test in routes_test.go
// finds each /v1 entry among the operations of api/openapi.yaml and each
// operation here.
func routeTable() []route {
	return []route{
		public("GET /v1/health", (*Server).health),
		public("GET /v1/openapi.yaml", (*Server).openapi),
		public("GET /metrics", (*Server).serveMetrics),

		keyed("POST /v1/sandboxes", (*Server).createSandbox),
		keyed("GET /v1/sandboxes", (*Server).listSandboxes),
		keyed("GET /v1/sandboxes/{id}", (*Server).getSandbox),
		keyed("DELETE /v1/sandboxes/{id}", (*Server).deleteSandbox),
		keyed("POST /v1/sandboxes/{id}/timeout", (*Server).setTimeout),
		keyed("POST /v1/sandboxes/{id}/pause", (*Server).pauseSandbox),
		keyed("POST /v1/sandboxes/{id}/resume", (*Server).resumeSandbox),
		keyed("POST /v1/sandboxes/{id}/stop", (*Server).stopSandbox),
		keyed("POST /v1/sandboxes/{id}/start", (*Server).startSandbox),
		keyed("GET /v1/sandboxes/{id}/metrics", (*Server).sandboxMetrics),
		keyed("GET /v1/sandboxes/{id}/metrics/history", (*Server).sandboxMetricsHistory),
		keyed("GET /v1/usage", (*Server).usage),

		keyed("PATCH /v1/sandboxes/{id}/network", (*Server).updateNetwork),
		keyed("POST /v1/secrets", (*Server).createSecret),
		keyed("GET /v1/secrets", (*Server).listSecrets),
		keyed("DELETE /v1/secrets/{name}", (*Server).deleteSecret),

		keyed("GET /v1/sandboxes/{id}/ports", (*Server).listPorts),
		{pattern: "/v1/sandboxes/{id}/ports/{port}/{path...}", auth: authSelf, bind: func(s *Server) http.Handler {
			return http.HandlerFunc(s.proxyPort)
		}},

		keyed("POST /v1/sandboxes/{id}/exec", (*Server).exec),
		keyed("POST /v1/sandboxes/{id}/processes", (*Server).startProcess),
		keyed("GET /v1/sandboxes/{id}/processes", (*Server).listProcesses),
		keyed("GET /v1/sandboxes/{id}/processes/{process}", (*Server).getProcess),
		keyed("POST /v1/sandboxes/{id}/processes/{process}/wait", (*Server).waitProcess),
		keyed("GET /v1/sandboxes/{id}/processes/{process}/output", (*Server).processOutput),
		keyed("POST /v1/sandboxes/{id}/processes/{process}/stdin", (*Server).processStdin),
		keyed("POST /v1/sandboxes/{id}/processes/{process}/kill", (*Server).killProcess),

		keyed("POST /v1/sandboxes/{id}/code", (*Server).runCode),
		keyed("POST /v1/sandboxes/{id}/code/contexts", (*Server).createCodeContext),
		keyed("GET /v1/sandboxes/{id}/code/contexts", (*Server).listCodeContexts),
		keyed("GET /v1/sandboxes/{id}/code/contexts/{ctx}", getCodeContext),
		keyed("DELETE /v1/sandboxes/{id}/code/contexts/{ctx}", (*Server).deleteCodeContext),
		keyed("POST /v1/sandboxes/{id}/code/contexts/{ctx}/restart", restartCodeContext),
		keyed("POST /v1/sandboxes/{id}/code/contexts/{ctx}/interrupt", interruptCodeContext),

		keyed("PUT /v1/sandboxes/{id}/files", (*Server).putFile),
		keyed("GET /v1/sandboxes/{id}/files", (*Server).getFile),
		keyed("DELETE /v1/sandboxes/{id}/files", (*Server).deleteFile),
		keyed("GET /v1/sandboxes/{id}/files/list", (*Server).listFiles),
		keyed("GET /v1/sandboxes/{id}/files/stat", (*Server).statFile),
		keyed("POST /v1/sandboxes/{id}/files/mkdir", (*Server).mkdir),
		keyed("GET /v1/sandboxes/{id}/files/watch", (*Server).watchFiles),

		keyed("GET /v1/sandboxes/{id}/pty", (*Server).openPty),
		keyed("GET /v1/sandboxes/{id}/pty/list", (*Server).listPtys),
		keyed("POST /v1/sandboxes/{id}/pty/{pty}/kill", (*Server).killPty),

		keyed("GET /v1/templates", (*Server).listTemplates),
		keyed("POST /v1/templates", (*Server).createTemplate),
		keyed("GET /v1/templates/{name}", (*Server).getTemplate),
		keyed("DELETE /v1/templates/{name}", (*Server).deleteTemplate),
		keyed("POST /v1/sandboxes/{id}/snapshot", (*Server).snapshotSandbox),

		// The MCP handler answers other methods itself (405).
		{pattern: "/v1/mcp", auth: authSelf, methods: []string{"GET", "POST", "DELETE"}, bind: (*Server).mcpHandler},

		// The web console (package console): its pages, sign-in, and
		// /console/v1/..., the API behind a session cookie.
		{pattern: "GET /{$}", auth: authSelf, bind: func(s *Server) http.Handler { return s.console }},
		{pattern: "/console/", auth: authSelf, bind: func(s *Server) http.Handler { return s.console }},

		// Anything else is a JSON 404.
		public("/", (*Server).noRoute),
	}
}

// routes builds the ServeMux from the route table.
func (s *Server) routes() {
	for _, rt := range routeTable() {
		s.mux.Handle(rt.pattern, rt.bind(s))
	}
}

func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	writeError(w, fmt.Errorf("%w: no route %s %s", sandbox.ErrNotFound, r.Method, r.URL.Path))
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, api.Health{Status: "ok", Version: s.cfg.Version})
}

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	w.Write(api.OpenAPI)
}
