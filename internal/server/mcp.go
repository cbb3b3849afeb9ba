package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddock-sandbox/paddock/client"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/tooluse"
	"github.com/paddock-sandbox/paddock/tooluse/mcp"
)

// Defaults of MCPConfig.
const (
	DefaultMCPMaxSessions = mcp.DefaultMaxSessions
	DefaultMCPIdleTimeout = 5 * time.Minute
)

// apiKeyExtra is the TokenInfo.Extra entry holding the caller's API key.
const apiKeyExtra = "paddock.api_key"

// MCPConfig configures /v1/mcp, the MCP server over streamable HTTP.
type MCPConfig struct {
	// SelfURL is the daemon's own API address (for example
	// "http://127.0.0.1:7419"): the MCP tools call the REST API there
	// with the caller's API key, so sandboxes belong to that key and its
	// limits apply. Empty disables /v1/mcp (404).
	SelfURL string
	// MaxSessions bounds the concurrent MCP sessions (default 256).
	MaxSessions int
	// MaxSessionsPerKey bounds one API key's sessions (default a quarter
	// of MaxSessions; -1: no per-key bound).
	MaxSessionsPerKey int
	// IdleTimeout ends a session, deleting its own sandbox, after this long
	// without a request (default 5 minutes; paddockd --mcp-idle-timeout).
	IdleTimeout time.Duration
}

// SelfURL returns the URL at which the daemon reaches its own listener
// addr: an unspecified host (0.0.0.0, ::) becomes loopback.
func SelfURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}

// mcpHandler returns the handler of /v1/mcp: API key authentication, then
// the go-sdk's streamable HTTP handler, with sessions bound to the key
// that opened them.
func (s *Server) mcpHandler() http.Handler {
	cfg := s.cfg.MCP
	if cfg.SelfURL == "" {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeError(w, fmt.Errorf("%w: MCP is not enabled on this daemon", sandbox.ErrNotFound))
		})
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMCPMaxSessions
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultMCPIdleTimeout
	}
	if cfg.MaxSessionsPerKey == 0 {
		cfg.MaxSessionsPerKey = max(cfg.MaxSessions/4, 1)
	}
	hc := &http.Client{}
	s.mcp = mcp.New(nil, mcp.Options{
		MaxSessions:       cfg.MaxSessions,
		MaxSessionsPerKey: cfg.MaxSessionsPerKey,
		SessionKey: func(extra *sdk.RequestExtra) string {
			if extra != nil && extra.TokenInfo != nil {
				return extra.TokenInfo.UserID
			}
			return ""
		},
		ClientConfig: true,
		Tools:        tooluse.Options{Tools: tooluse.AllToolNames()}, // with run_code
		Version:      s.cfg.Version,
		Logger:       s.log,
		Client: func(ctx context.Context, extra *sdk.RequestExtra) (*client.Client, error) {
			var key string
			if extra != nil && extra.TokenInfo != nil {
				key, _ = extra.TokenInfo.Extra[apiKeyExtra].(string)
			}
			if key == "" {
				return nil, fmt.Errorf("%w: no API key in the MCP request", sandbox.ErrUnauthorized)
			}
			return &client.Client{BaseURL: cfg.SelfURL, APIKey: key, HTTPClient: hc, UserAgent: "paddockd-mcp/" + s.cfg.Version}, nil
		},
	})
	h := s.mcp.HTTPHandler(&sdk.StreamableHTTPOptions{SessionTimeout: cfg.IdleTimeout})
	// RequireBearerToken puts the key's TokenInfo in the request context;
	// the go-sdk then refuses (403) requests to a session from another key.
	verify := func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		rec, ok := s.keys.Lookup(token)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: rec.ID, Extra: map[string]any{apiKeyExtra: token}}, nil
	}
	h = auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Answer a missing or unknown key like every other route does.
		if _, ok := s.auth(r); !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="paddock"`)
			writeError(w, fmt.Errorf("%w: missing or unknown API key (Authorization: Bearer <key>)", sandbox.ErrUnauthorized))
			return
		}
		if err := mcpQueryConfig(r); err != nil {
			writeError(w, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// mcpQueryConfig moves the session options in the query of a request that
// opens an MCP session (?sandbox=ID, template, sandbox_timeout, timeout,
// network, allow; see mcp.ParseQuery) into the mcp.ConfigHeader the
// session reads them from. Requests of an existing session keep the
// session's options whatever their query says.
func mcpQueryConfig(r *http.Request) error {
	r.Header.Del(mcp.ConfigHeader)
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" || r.URL.RawQuery == "" {
		return nil
	}
	cfg, err := mcp.ParseQuery(r.URL.Query())
	if err != nil {
		return fmt.Errorf("%w: /v1/mcp: %v", sandbox.ErrInvalid, err)
	}
	if cfg == nil {
		return nil
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	r.Header.Set(mcp.ConfigHeader, string(b))
	return nil
}

// CloseMCP ends every MCP session and deletes its sandbox, waiting until
// ctx is done. Call it before shutting the HTTP server down: the
// deletions go through the daemon's own API.
func (s *Server) CloseMCP(ctx context.Context) error {
	if s.mcp == nil {
		return nil
	}
	return s.mcp.Close(ctx)
}
