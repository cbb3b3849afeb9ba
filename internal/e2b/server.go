package e2b

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/agent"
	"github.com/paddock-sandbox/paddock/internal/manager"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// EnvdPort is the port E2B's SDKs address the in-sandbox daemon on.
const EnvdPort = 49983

// envdVersion is the envd version announced to the SDKs: it decides which
// features they use (stdin control 0.3.0, default user 0.4.0, closeStdin
// 0.5.2, octet-stream uploads 0.5.7); both upload forms are served.
const envdVersion = "0.5.7"

// Config configures the E2B endpoint.
type Config struct {
	// Domain is the sandbox domain of host-name routing
	// (<port>-<sandboxID>.<Domain>) and the domain returned to the SDKs.
	// Empty: host names of that form are accepted under any domain.
	Domain string
	// Templates maps E2B template ids or aliases to Paddock templates;
	// unmapped names are passed through ("base" is Paddock's base). The
	// code interpreter SDK's default, code-interpreter-v1, maps to "base"
	// unless configured.
	Templates map[string]string
	// TokenKey signs the per-sandbox envd access tokens (the daemon's
	// port key).
	TokenKey []byte
	// MaxFileBytes bounds /files uploads and downloads.
	MaxFileBytes int64
}

// Server serves the E2B-compatible API: the control plane and every
// sandbox's data plane, on one listener.
type Server struct {
	cfg     Config
	mgr     *manager.Manager
	agent   *agent.Client
	keys    *store.Keys
	log     *slog.Logger
	control *http.ServeMux
	// portTransport carries requests to sandbox ports other than envd's.
	portTransport *http.Transport
	tags          tagTable
	watchers      watchTable
}

// New returns the E2B endpoint over mgr (and its agent client).
func New(cfg Config, mgr *manager.Manager, keys *store.Keys, log *slog.Logger) (*Server, error) {
	if len(cfg.TokenKey) < 16 {
		return nil, errors.New("e2b: a token key of at least 16 bytes is required")
	}
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = api.DefaultMaxFileBytes
	}
	cfg.Templates = Aliases(cfg.Templates)
	s := &Server{cfg: cfg, mgr: mgr, agent: mgr.Agent(), keys: keys, log: log, control: http.NewServeMux()}
	s.portTransport = &http.Transport{
		DialContext:         s.dialPort,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	s.controlRoutes()
	return s, nil
}

// Aliases is the template mapping an endpoint configured with cfg serves:
// cfg over the defaults (the code interpreter SDK's code-interpreter-v1
// is "base"). Cluster nodes advertise it in their Lease so gateways place
// an E2B create by the template it makes on each node.
func Aliases(cfg map[string]string) map[string]string {
	tpls := map[string]string{"code-interpreter-v1": "base"}
	for k, v := range cfg {
		tpls[k] = v
	}
	return tpls
}

// HTTPServer returns an http.Server for s with the daemon's bounds.
func (s *Server) HTTPServer(addr string) *http.Server {
	return &http.Server{Addr: addr, Handler: s, ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
}

// ServeHTTP routes a request to a sandbox's data plane or to the control
// plane.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("e2b: panic in handler", "path", r.URL.Path, "panic", v)
			writeAPIError(w, errors.New("internal error"))
		}
	}()
	id, port, ok, err := s.target(r)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	if ok {
		s.dataPlane(w, r, id, port)
		return
	}
	s.control.ServeHTTP(w, r)
}

// target finds the sandbox and port a data-plane request is for: from the
// E2b-Sandbox-Id and E2b-Sandbox-Port headers, or from a host name
// <port>-<sandboxID>.<domain>.
func (s *Server) target(r *http.Request) (id string, port int, ok bool, err error) {
	if id = r.Header.Get("E2b-Sandbox-Id"); id != "" {
		port = EnvdPort
		if p := r.Header.Get("E2b-Sandbox-Port"); p != "" {
			if port, err = strconv.Atoi(p); err != nil || port < 1 || port > 65535 {
				return "", 0, false, fmt.Errorf("%w: E2b-Sandbox-Port must be 1-65535", sandbox.ErrInvalid)
			}
		}
		if !validID(id) {
			return "", 0, false, fmt.Errorf("%w: bad E2b-Sandbox-Id", sandbox.ErrInvalid)
		}
		return id, port, true, nil
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	label, rest, found := strings.Cut(strings.ToLower(host), ".")
	if !found || (s.cfg.Domain != "" && rest != strings.ToLower(s.cfg.Domain)) {
		return "", 0, false, nil
	}
	ps, id, found := strings.Cut(label, "-")
	port, perr := strconv.Atoi(ps)
	if !found || perr != nil || port < 1 || port > 65535 || !validID(id) {
		return "", 0, false, nil
	}
	return id, port, true, nil
}

// validID accepts what a Paddock sandbox id can be (lower-case letters
// and digits, bounded), so a host label or header is never used raw.
func validID(id string) bool {
	if len(id) < 2 || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// accessToken is sandbox id's envd access token.
func (s *Server) accessToken(id string) string {
	mac := hmac.New(sha256.New, s.cfg.TokenKey)
	fmt.Fprintf(mac, "e2b-envd|%s", id)
	return "pdk_envd_" + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// trafficToken is sandbox id's traffic access token (ports other than
// envd's, for sandboxes created without public traffic).
func (s *Server) trafficToken(id string) string {
	mac := hmac.New(sha256.New, s.cfg.TokenKey)
	fmt.Fprintf(mac, "e2b-traffic|%s", id)
	return "pdk_traffic_" + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func equalToken(got, want string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// owner authenticates a control-plane request: X-API-KEY (what the SDKs
// send) or Authorization: Bearer, both Paddock API keys. A key may also
// be given in E2B's own shape, "e2b_" + the hex of the Paddock key's
// bytes, which passes the key-format check some SDK versions make
// (prefix followed by hex) without changing their configuration.
func (s *Server) owner(r *http.Request) (string, bool) {
	secret := strings.TrimSpace(r.Header.Get("X-API-KEY"))
	if secret == "" {
		secret, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		secret = strings.TrimSpace(secret)
	}
	if secret == "" {
		return "", false
	}
	if h, ok := strings.CutPrefix(secret, "e2b_"); ok && len(h) <= 512 {
		if raw, err := hex.DecodeString(h); err == nil {
			secret = string(raw)
		}
	}
	rec, ok := s.keys.Lookup(secret)
	return rec.ID, ok
}
