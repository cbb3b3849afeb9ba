package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/cluster/kube"
)

// GatewayConfig configures a Gateway.
type GatewayConfig struct {
	Kube      *kube.Client
	Namespace string
	Version   string
	// CacheFor is how long the gateway serves node Leases and API keys it
	// read before reading them again (default 1s).
	CacheFor time.Duration
	// PortsDomain is the nodes' --ports-domain: requests for
	// <port>-<id>.<PortsDomain> go to the sandbox's node, which checks the
	// signed port token or key. Empty: only the path form is served.
	PortsDomain string
	// E2BDomain is the nodes' --e2b-domain: E2B data-plane hosts
	// <port>-<id>.<E2BDomain> (any domain when empty) go to the sandbox's
	// node (E2BHandler).
	E2BDomain string
	Log       *slog.Logger
}

// Gateway serves the Paddock REST API for a cluster: it authenticates the
// key, places creates on a node with room and proxies every other call to
// the sandbox's node. It keeps no state of its own: run as many as wanted.
type Gateway struct {
	cfg   GatewayConfig
	keys  *keyCache
	nodes *nodeCache
	proxy *proxy
}

// NewGateway returns a Gateway.
func NewGateway(cfg GatewayConfig) (*Gateway, error) {
	if cfg.Kube == nil || cfg.Namespace == "" {
		return nil, errors.New("gateway: kube client and namespace are required")
	}
	if cfg.CacheFor <= 0 {
		cfg.CacheFor = time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Gateway{cfg: cfg,
		keys:  &keyCache{kc: cfg.Kube, ns: cfg.Namespace, refresh: 2 * cfg.CacheFor},
		nodes: &nodeCache{kc: cfg.Kube, ns: cfg.Namespace, refresh: cfg.CacheFor},
		proxy: newProxy(cfg.Log)}, nil
}

// errLost is the error of a call on a sandbox whose node's Lease expired.
var errLost = errors.New("sandbox lost")

// ServeHTTP routes one request.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/health":
		writeJSON(w, http.StatusOK, api.Health{Status: "ok", Version: g.cfg.Version})
		return
	case "/v1/openapi.yaml":
		g.toAnyNode(w, r)
		return
	}
	// Ports authenticate at the node (a key, or a signed port URL whose key
	// only that node holds): route by the sandbox id alone.
	if id, ok := parsePortHost(r.Host, g.cfg.PortsDomain); ok {
		g.toOwner(w, r, "", id)
		return
	}
	if id, ok := portPath(r.URL.Path); ok && r.Header.Get("Authorization") == "" {
		g.toOwner(w, r, "", id)
		return
	}
	owner, ok := g.auth(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="paddock"`)
		writeErr(w, api.CodeUnauthorized, "an API key is required")
		return
	}
	rest, isSandbox := strings.CutPrefix(r.URL.Path, "/v1/sandboxes")
	switch {
	case isSandbox && rest == "" && r.Method == http.MethodPost:
		g.create(w, r, owner)
	case isSandbox && rest == "" && r.Method == http.MethodGet:
		g.list(w, r)
	case isSandbox && strings.HasPrefix(rest, "/") && len(rest) > 1:
		id, _, _ := strings.Cut(rest[1:], "/")
		g.toOwner(w, r, owner, id)
	case (r.URL.Path == "/v1/secrets" && r.Method == http.MethodPost) ||
		(strings.HasPrefix(r.URL.Path, "/v1/secrets/") && r.Method == http.MethodDelete):
		g.broadcast(w, r)
	case r.URL.Path == "/v1/mcp":
		g.toStickyNode(w, r, owner)
	default:
		g.toAnyNode(w, r)
	}
}

func (g *Gateway) auth(r *http.Request) (string, bool) {
	secret, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return "", false
	}
	return g.keys.lookup(r.Context(), strings.TrimSpace(secret))
}

// toOwner proxies a call on sandbox id to its node, after checking in the
// Sandbox resource that it exists for this key (any key when owner is "":
// the node authenticates those) and its node is live.
func (g *Gateway) toOwner(w http.ResponseWriter, r *http.Request, owner, id string) {
	if !validID(id) {
		writeErr(w, api.CodeNotFound, "sandbox not found")
		return
	}
	n, err := g.route(r.Context(), owner, id)
	switch {
	case errors.Is(err, errNotFound):
		writeErr(w, api.CodeNotFound, "sandbox not found")
		return
	case errors.Is(err, errLost):
		writeErr(w, api.CodeUnavailable, err.Error())
		return
	case err != nil:
		g.cfg.Log.Warn("gateway: routing failed", "id", id, "err", err)
		writeErr(w, api.CodeUnavailable, "cluster state unavailable: "+err.Error())
		return
	}
	g.proxy.forward(w, r, n)
}

var errNotFound = errors.New("not found")

// route finds the live node of sandbox id for owner.
func (g *Gateway) route(ctx context.Context, owner, id string) (*nodeInfo, error) {
	var sb Sandbox
	if err := g.cfg.Kube.Get(ctx, sandboxesPath(g.cfg.Namespace)+"/"+id, &sb); err != nil {
		if kube.IsNotFound(err) {
			return nil, errNotFound
		}
		return nil, err
	}
	if owner != "" && sb.Spec.OwnerHash != OwnerHash(owner) {
		return nil, errNotFound
	}
	n, err := g.nodes.node(ctx, sb.Spec.Node)
	if err != nil {
		return nil, err
	}
	if n == nil {
		return nil, fmt.Errorf("%w: its node %q is not registered (no Lease); the sandbox cannot be reached", errLost, sb.Spec.Node)
	}
	if n.lost {
		return nil, fmt.Errorf("%w: its node %q stopped renewing its Lease at %s; the sandbox cannot be reached until the node returns",
			errLost, n.name, n.renewedAt.UTC().Format(time.RFC3339))
	}
	return n, nil
}

// toAnyNode proxies a call that is not about one sandbox to a live node.
func (g *Gateway) toAnyNode(w http.ResponseWriter, r *http.Request) {
	nodes, err := g.nodes.live(r.Context())
	if err != nil {
		writeErr(w, api.CodeNoCapacity, err.Error())
		return
	}
	g.proxy.forward(w, r, nodes[0])
}

// validID accepts what manager ids look like ("sb" + base32), so an id is
// always a valid resource name and never a path.
func validID(id string) bool {
	if len(id) < 3 || len(id) > 63 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, code, msg string) {
	writeJSON(w, api.StatusOf(code), api.ErrorResponse{Error: api.ErrorBody{Code: code, Message: msg}})
}

// portPath returns the id of a path-form port request,
// /v1/sandboxes/{id}/ports/{port}/...
func portPath(p string) (string, bool) {
	rest, ok := strings.CutPrefix(p, "/v1/sandboxes/")
	if !ok {
		return "", false
	}
	id, rest, _ := strings.Cut(rest, "/")
	if !strings.HasPrefix(rest, "ports/") || len(rest) <= len("ports/") || !validID(id) {
		return "", false
	}
	return id, true
}

// parsePortHost reads the sandbox id off a "<port>-<id>.<domain>" Host
// (the nodes' own-origin form; they check the rest).
func parsePortHost(host, domain string) (string, bool) {
	if domain == "" {
		return "", false
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if dh, _, err := net.SplitHostPort(domain); err == nil {
		domain = dh
	}
	label, ok := strings.CutSuffix(strings.ToLower(host), "."+strings.ToLower(domain))
	if !ok || strings.Contains(label, ".") {
		return "", false
	}
	ps, id, ok := strings.Cut(label, "-")
	port, err := strconv.Atoi(ps)
	if !ok || err != nil || port < 1 || port > 65535 || !validID(id) {
		return "", false
	}
	return id, true
}
