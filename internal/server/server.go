// Package server is paddockd's HTTP API: routes on a stdlib ServeMux, API
// key authentication, the one place where errors become HTTP statuses, and
// the bounded proxy that forwards exec, process and file calls to each
// sandbox's guest agent (whose answers are treated as untrusted).
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/agent"
	"github.com/paddock-sandbox/paddock/internal/manager"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
	"github.com/paddock-sandbox/paddock/internal/template"
	"github.com/paddock-sandbox/paddock/internal/template/catalog"
	"github.com/paddock-sandbox/paddock/tooluse/mcp"
)

// Limits on requests (the others are in package api).
const (
	maxJSONBody    = api.MaxJSONBodyBytes
	maxHeaderBytes = 64 << 10
)

// Config configures the server.
type Config struct {
	// MaxFileBytes bounds file uploads and downloads.
	MaxFileBytes int64
	Version      string
	// Metrics, if set, are updated and served at GET /metrics.
	Metrics *Metrics
	// PortKey signs port URLs (see PortKey); without it only API keys
	// reach sandbox ports.
	PortKey []byte
	// Templates serves /v1/templates and snapshots; nil: templates are
	// not enabled (501).
	Templates *catalog.Builder
	// MCP configures /v1/mcp (see mcp.go).
	MCP MCPConfig
}

// Server serves the REST API.
type Server struct {
	cfg Config
	mgr *manager.Manager
	// agent reaches the guest agents (the manager's client).
	agent *agent.Client
	keys  *store.Keys
	log   *slog.Logger
	mux   *http.ServeMux
	// bigBodies bounds concurrent decoding of large exec bodies.
	bigBodies chan struct{}
	// portTransport carries reverse-proxied requests to sandbox ports.
	portTransport *http.Transport
	mcp           *mcp.Server // serves /v1/mcp; nil when MCP is disabled
}

// New returns the API server.
func New(cfg Config, mgr *manager.Manager, keys *store.Keys, log *slog.Logger) *Server {
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = api.DefaultMaxFileBytes
	}
	s := &Server{cfg: cfg, mgr: mgr, agent: mgr.Agent(), keys: keys, log: log, mux: http.NewServeMux(), bigBodies: make(chan struct{}, 4)}
	s.portTransport = &http.Transport{
		DialContext:         s.dialPort,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	s.routes()
	return s
}

// HTTPServer wraps the API in an http.Server with bounded headers and
// timeouts (no write timeout: exec streams last as long as the command).
func (s *Server) HTTPServer(addr string) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, owner string) error

func (s *Server) routes() {
	s.mux.HandleFunc("GET /v1/health", s.health)
	s.mux.HandleFunc("GET /v1/openapi.yaml", s.openapi)
	s.mux.HandleFunc("GET /metrics", s.serveMetrics)
	s.handle("POST /v1/sandboxes", s.createSandbox)
	s.handle("GET /v1/sandboxes", s.listSandboxes)
	s.handle("GET /v1/sandboxes/{id}", s.getSandbox)
	s.handle("DELETE /v1/sandboxes/{id}", s.deleteSandbox)
	s.handle("POST /v1/sandboxes/{id}/timeout", s.setTimeout)
	s.handle("POST /v1/sandboxes/{id}/pause", s.pauseSandbox)
	s.handle("POST /v1/sandboxes/{id}/resume", s.resumeSandbox)
	s.handle("POST /v1/sandboxes/{id}/checkpoint", s.checkpointSandbox)
	s.handle("GET /v1/sandboxes/{id}/metrics", s.sandboxMetrics)
	s.handle("GET /v1/usage", s.usage)
	s.handle("PATCH /v1/sandboxes/{id}/network", s.updateNetwork)
	s.handle("POST /v1/secrets", s.createSecret)
	s.handle("GET /v1/secrets", s.listSecrets)
	s.handle("DELETE /v1/secrets/{name}", s.deleteSecret)
	s.handle("GET /v1/sandboxes/{id}/ports", s.listPorts)
	s.mux.HandleFunc("/v1/sandboxes/{id}/ports/{port}/{path...}", s.proxyPort)
	s.handle("POST /v1/sandboxes/{id}/exec", s.exec)
	s.handle("POST /v1/sandboxes/{id}/processes", s.startProcess)
	s.handle("GET /v1/sandboxes/{id}/processes", s.proxyPlain)
	s.handle("GET /v1/sandboxes/{id}/processes/{process}", s.proxyPlain)
	s.handle("POST /v1/sandboxes/{id}/processes/{process}/wait", s.proxyPlain)
	s.handle("GET /v1/sandboxes/{id}/processes/{process}/output", s.proxyPlain)
	s.handle("POST /v1/sandboxes/{id}/processes/{process}/stdin", s.processStdin)
	s.handle("POST /v1/sandboxes/{id}/processes/{process}/kill", s.proxyPlain)
	s.handle("PUT /v1/sandboxes/{id}/files", s.putFile)
	s.handle("GET /v1/sandboxes/{id}/files", s.getFile)
	s.handle("DELETE /v1/sandboxes/{id}/files", s.proxyPlain)
	s.handle("GET /v1/sandboxes/{id}/files/list", s.proxyPlain)
	s.handle("GET /v1/sandboxes/{id}/files/stat", s.proxyPlain)
	s.handle("POST /v1/sandboxes/{id}/files/mkdir", s.proxyPlain)
	// Templates: GET/POST /v1/templates, GET/DELETE /v1/templates/{name},
	// POST /v1/sandboxes/{id}/snapshot (templates.go).
	s.templateRoutes()
	s.mux.Handle("/v1/mcp", s.mcpHandler()) // GET, POST, DELETE; authenticates itself
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, fmt.Errorf("%w: no route %s %s", sandbox.ErrNotFound, r.Method, r.URL.Path))
	})
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("panic in handler", "path", r.URL.Path, "panic", v)
			writeError(w, errors.New("internal error"))
		}
	}()
	s.mux.ServeHTTP(w, r)
}

// handle registers an authenticated handler that returns errors.
func (s *Server) handle(pattern string, h handlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		owner, ok := s.auth(r)
		if !ok {
			s.cfg.Metrics.apiError(api.CodeUnauthorized)
			w.Header().Set("WWW-Authenticate", `Bearer realm="paddock"`)
			writeError(w, fmt.Errorf("%w: missing or unknown API key (Authorization: Bearer <key>)", sandbox.ErrUnauthorized))
			return
		}
		if err := h(w, r, owner); err != nil {
			if status(err) >= 500 {
				s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			}
			s.cfg.Metrics.apiError(codes[status(err)])
			writeError(w, err)
		}
	})
}

func (s *Server) auth(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	secret, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return "", false
	}
	rec, ok := s.keys.Lookup(strings.TrimSpace(secret))
	return rec.ID, ok
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, api.Health{Status: "ok", Version: s.cfg.Version})
}

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	w.Write(api.OpenAPI)
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// status maps an error to its HTTP status: the one place this happens.
func status(err error) int {
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, sandbox.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, sandbox.ErrUnauthorized):
		return http.StatusUnauthorized
	case errors.Is(err, sandbox.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, sandbox.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, sandbox.ErrTooLarge), errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, sandbox.ErrUnknownTemplate):
		return http.StatusUnprocessableEntity
	case errors.Is(err, sandbox.ErrLimit):
		return http.StatusTooManyRequests
	case errors.Is(err, sandbox.ErrUnavailable):
		return http.StatusBadGateway
	case errors.Is(err, sandbox.ErrNoCapacity):
		return http.StatusServiceUnavailable
	case errors.Is(err, template.ErrBudget), errors.Is(err, sandbox.ErrNoSpace):
		return http.StatusInsufficientStorage
	case errors.Is(err, sandbox.ErrNotSupported):
		return http.StatusNotImplemented
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

var codes = map[int]string{
	http.StatusBadRequest:            api.CodeBadRequest,
	http.StatusUnauthorized:          api.CodeUnauthorized,
	http.StatusNotFound:              api.CodeNotFound,
	http.StatusConflict:              api.CodeConflict,
	http.StatusRequestEntityTooLarge: api.CodeTooLarge,
	http.StatusUnprocessableEntity:   api.CodeUnknownTemplate,
	http.StatusTooManyRequests:       api.CodeLimitExceeded,
	http.StatusBadGateway:            api.CodeUnavailable,
	http.StatusServiceUnavailable:    api.CodeNoCapacity,
	http.StatusInsufficientStorage:   api.CodeNoSpace,
	http.StatusGatewayTimeout:        api.CodeUnavailable,
	http.StatusNotImplemented:        api.CodeNotSupported,
	http.StatusInternalServerError:   api.CodeInternal,
}

func writeError(w http.ResponseWriter, err error) {
	st := status(err)
	code, ok := codes[st]
	if !ok {
		code = api.CodeInternal
	}
	msg := err.Error()
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		msg = fmt.Sprintf("request body larger than %d bytes", mbe.Limit)
	}
	if st == http.StatusInternalServerError {
		msg = "internal error: " + msg
	}
	writeJSON(w, st, api.ErrorResponse{Error: api.ErrorBody{Code: code, Message: msg}})
}

// errEmptyBody is returned by decode for an empty body; callers with an
// all-optional body accept it.
var errEmptyBody = fmt.Errorf("%w: empty body, expected JSON", sandbox.ErrInvalid)

// decode reads a JSON body of at most limit bytes into v, strictly.
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		if errors.Is(err, io.EOF) {
			return errEmptyBody
		}
		return fmt.Errorf("%w: bad JSON: %v", sandbox.ErrInvalid, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: trailing data after JSON body", sandbox.ErrInvalid)
	}
	return nil
}
