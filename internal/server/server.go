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
