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
	"net"
	"net/http"
	"strings"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/agent"
	"github.com/paddock-sandbox/paddock/internal/console"
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
	// Limits bound connections, deadlines and large bodies (limits.go).
	Limits HTTPLimits
	// BigBodiesPerKey and BigBodyDecodes configure the exec body gate
	// (bodygate.go; defaults DefaultBigBodiesPerKey, DefaultBigBodyDecodes).
	BigBodiesPerKey, BigBodyDecodes int
	// Ports serves sandbox ports on their own origins (ports_origin.go).
	Ports PortsConfig
	// TemplateBytesPerKey bounds the disk of one key's templates, checked
	// when a build or snapshot starts (0: none).
	TemplateBytesPerKey int64
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
	// execBodies and templateBodies admit large bodies (bodygate.go).
	execBodies, templateBodies *bodyGate
	// portTransport carries reverse-proxied requests to sandbox ports.
	portTransport *http.Transport
	mcp           *mcp.Server // serves /v1/mcp; nil when MCP is disabled
	console       *console.Handler
}

// New returns the API server.
func New(cfg Config, mgr *manager.Manager, keys *store.Keys, log *slog.Logger) *Server {
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = api.DefaultMaxFileBytes
	}
	cfg.Limits = cfg.Limits.withDefaults()
	if cfg.BigBodiesPerKey <= 0 {
		cfg.BigBodiesPerKey = DefaultBigBodiesPerKey
	}
	if cfg.BigBodyDecodes <= 0 {
		cfg.BigBodyDecodes = DefaultBigBodyDecodes
	}
	s := &Server{cfg: cfg, mgr: mgr, agent: mgr.Agent(), keys: keys, log: log, mux: http.NewServeMux(),
		execBodies:     newBodyGate(cfg.BigBodiesPerKey, cfg.BigBodyDecodes, 0),
		templateBodies: newBodyGate(templateBodiesPerKey, templateBodyDecodes, templateFreeAbove)}
	s.portTransport = newPortTransport(s.dialPort)
	s.console = console.New(console.Config{Lookup: func(secret string) (string, bool) {
		rec, ok := keys.Lookup(secret)
		return rec.ID, ok
	}, API: s.mux, Log: log})
	s.routes()
	return s
}

// HTTPServer wraps the API in an http.Server with bounded headers and
// timeouts. It has no read or write timeout: exec streams last as long as
// the command, and ServeHTTP arms per-read and per-write deadlines
// instead (limits.go). Serve it on a listener from Listener.
func (s *Server) HTTPServer(addr string) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           s,
		ReadHeaderTimeout: s.cfg.Limits.ReadHeaderTimeout,
		IdleTimeout:       s.cfg.Limits.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
}

// Listener bounds the connections of ln (Config.Limits.Conns).
func (s *Server) Listener(ln net.Listener) net.Listener {
	return LimitListener(ln, s.cfg.Limits.Conns, s.log)
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, owner string) error

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
	w, r, done := s.guard(w, r)
	defer done()
	if s.servePortOrigin(w, r) {
		return
	}
	s.mux.ServeHTTP(w, r)
	drainBody(w, r)
}

// withKey authenticates a request by its API key and runs h, turning the
// error h returns into the JSON error answer.
func (s *Server) withKey(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		owner, ok := s.auth(r)
		if !ok {
			s.cfg.Metrics.apiError(api.CodeUnauthorized)
			w.Header().Set("WWW-Authenticate", `Bearer realm="paddock"`)
			writeError(w, fmt.Errorf("%w: missing or unknown API key (Authorization: Bearer <key>)", sandbox.ErrUnauthorized))
			return
		}
		if id := r.PathValue("id"); id != "" && !passive[r.Pattern] {
			defer s.mgr.Active(owner, id)() // the one activity hook (idle timeouts)
		}
		if err := h(w, r, owner); err != nil {
			code, st := classify(err)
			if st >= 500 {
				s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			}
			s.cfg.Metrics.apiError(code)
			writeError(w, err)
		}
	})
}

// passive are the routes on a sandbox that are not activity for its idle
// timeout: reading its record or metrics (a dashboard polling them must
// not keep it awake) and lifecycle calls. Every other route with a
// sandbox id is, new ones included.
var passive = map[string]bool{
	"GET /v1/sandboxes/{id}": true, "GET /v1/sandboxes/{id}/metrics": true,
	"GET /v1/sandboxes/{id}/metrics/history": true, "DELETE /v1/sandboxes/{id}": true,
	"POST /v1/sandboxes/{id}/pause": true, "POST /v1/sandboxes/{id}/resume": true,
	"POST /v1/sandboxes/{id}/stop": true, "POST /v1/sandboxes/{id}/start": true,
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

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// classify maps an error to its API error code and HTTP status: the one
// place where domain errors meet the wire. The status is the one the code
// travels with (api.StatusOf, generated from api/openapi.yaml), except that
// a deadline of the daemon that ran out is 504 (the table's alternative
// status of unavailable).
func classify(err error) (code string, status int) {
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, sandbox.ErrInvalid):
		code = api.CodeBadRequest
	case errors.Is(err, sandbox.ErrUnauthorized):
		code = api.CodeUnauthorized
	case errors.Is(err, sandbox.ErrNotFound):
		code = api.CodeNotFound
	case errors.Is(err, sandbox.ErrConflict):
		code = api.CodeConflict
	case errors.Is(err, sandbox.ErrTooLarge), errors.As(err, &mbe):
		code = api.CodeTooLarge
	case errors.Is(err, sandbox.ErrUnknownTemplate):
		code = api.CodeUnknownTemplate
	case errors.Is(err, sandbox.ErrLimit):
		code = api.CodeLimitExceeded
	case errors.Is(err, sandbox.ErrUnavailable):
		code = api.CodeUnavailable
	case errors.Is(err, sandbox.ErrNoCapacity):
		code = api.CodeNoCapacity
	case errors.Is(err, template.ErrBudget), errors.Is(err, sandbox.ErrNoSpace):
		code = api.CodeNoSpace
	case errors.Is(err, sandbox.ErrNotSupported):
		code = api.CodeNotSupported
	case errors.Is(err, context.DeadlineExceeded):
		return api.CodeUnavailable, http.StatusGatewayTimeout
	default:
		code = api.CodeInternal
	}
	return code, api.StatusOf(code)
}

func writeError(w http.ResponseWriter, err error) {
	code, st := classify(err)
	msg := err.Error()
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		msg = fmt.Sprintf("request body larger than %d bytes", mbe.Limit)
	}
	if code == api.CodeInternal {
		msg = "internal error: " + msg
	}
	writeJSON(w, st, api.ErrorResponse{Error: api.ErrorBody{Code: code, Message: msg}})
}

// errEmptyBody is returned by decode for an empty body; callers with an
// all-optional body accept it.
var errEmptyBody = fmt.Errorf("%w: empty body, expected JSON", sandbox.ErrInvalid)

// decode reads a JSON body of at most limit bytes into v, strictly.
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	return decodeFrom(http.MaxBytesReader(w, r.Body, limit), v)
}

// decodeFrom decodes one JSON value from body into v, strictly.
func decodeFrom(body io.Reader, v any) error {
	dec := json.NewDecoder(body)
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
