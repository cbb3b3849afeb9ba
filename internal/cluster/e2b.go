package cluster

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/paddock-sandbox/paddock/api"
)

// E2BHandler serves the E2B-compatible endpoint for the cluster
// (docs/kubernetes.md, "E2B endpoint"): each node's E2B endpoint is
// advertised in its Lease (paddock.dev/e2b-url). The data plane (a
// sandbox named by the E2b-Sandbox-Id header or a <port>-<id>.<domain>
// host) goes to the sandbox's node, which checks the access token it
// signed; control-plane creates are placed like REST creates (nodes with
// an E2B endpoint only) and recorded as Sandbox resources; calls on one
// sandbox go to its node after the owner check; lists merge every node's.
func (g *Gateway) E2BHandler() http.Handler { return http.HandlerFunc(g.serveE2B) }

func (g *Gateway) serveE2B(w http.ResponseWriter, r *http.Request) {
	if id, ok := e2bTarget(r, g.cfg.E2BDomain); ok {
		g.toE2B(w, r, "", id)
		return
	}
	if r.URL.Path == "/health" {
		w.WriteHeader(http.StatusOK)
		return
	}
	owner, secret, ok := g.e2bAuth(r)
	if !ok {
		writeE2BErr(w, http.StatusUnauthorized, "an API key is required (X-API-KEY)")
		return
	}
	p := r.URL.Path
	switch {
	case p == "/sandboxes" || p == "/v2/sandboxes":
		switch r.Method {
		case http.MethodPost:
			g.e2bCreate(w, r, owner)
		case http.MethodGet:
			g.e2bList(w, r, secret)
		default:
			writeE2BErr(w, http.StatusMethodNotAllowed, "method not allowed")
		}
	default:
		rest, ok := strings.CutPrefix(strings.TrimPrefix(p, "/v2"), "/sandboxes/")
		if !ok {
			writeE2BErr(w, http.StatusNotFound, "not found")
			return
		}
		id, _, _ := strings.Cut(rest, "/")
		g.toE2B(w, r, owner, id)
	}
}

// e2bTarget is the sandbox a data-plane request names: the E2b-Sandbox-Id
// header, or a host <port>-<id>.<domain> (any domain when domain is "").
func e2bTarget(r *http.Request, domain string) (string, bool) {
	if id := r.Header.Get("E2b-Sandbox-Id"); id != "" {
		return id, true // toE2B answers 404 for an id that is not one
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	label, rest, found := strings.Cut(strings.ToLower(host), ".")
	if !found || (domain != "" && rest != strings.ToLower(domain)) {
		return "", false
	}
	ps, id, found := strings.Cut(label, "-")
	port, err := strconv.Atoi(ps)
	if !found || err != nil || port < 1 || port > 65535 || !validID(id) {
		return "", false
	}
	return id, true
}

// e2bAuth is the owner of a control-plane request's key, and the key:
// X-API-KEY (what the E2B SDKs send) or a Bearer token, also in E2B's
// "e2b_" + hex shape, as the nodes accept it.
func (g *Gateway) e2bAuth(r *http.Request) (owner, secret string, ok bool) {
	secret = strings.TrimSpace(r.Header.Get("X-API-KEY"))
	if secret == "" {
		secret, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		secret = strings.TrimSpace(secret)
	}
	if secret == "" {
		return "", "", false
	}
	if h, ok := strings.CutPrefix(secret, "e2b_"); ok && len(h) <= 512 {
		if raw, err := hex.DecodeString(h); err == nil {
			secret = string(raw)
		}
	}
	owner, ok = g.keys.lookup(r.Context(), secret)
	return owner, secret, ok
}

// e2bNode is n with its E2B endpoint as the URL; nil if it has none.
func e2bNode(n *nodeInfo) *nodeInfo {
	if n == nil || n.e2bURL == nil {
		return nil
	}
	c := *n
	c.url = n.e2bURL
	return &c
}

// toE2B proxies a call on sandbox id to its node's E2B endpoint (owner ""
// for the data plane: the node checks the sandbox's access token).
func (g *Gateway) toE2B(w http.ResponseWriter, r *http.Request, owner, id string) {
	if !validID(id) {
		writeE2BErr(w, http.StatusNotFound, "sandbox not found")
		return
	}
	n, err := g.route(r.Context(), owner, id)
	switch {
	case err == errNotFound:
		writeE2BErr(w, http.StatusNotFound, "sandbox "+id+" not found")
		return
	case err != nil:
		writeE2BErr(w, http.StatusBadGateway, err.Error())
		return
	}
	en := e2bNode(n)
	if en == nil {
		writeE2BErr(w, http.StatusBadGateway, fmt.Sprintf("node %q serves no E2B endpoint (--e2b-listen)", n.name))
		return
	}
	g.proxy.forward(w, r, en)
}

// e2bCreate places an E2B create like a REST one, by its templateID
// (among the nodes with an E2B endpoint, each resolving the id through its
// E2B aliases), and records the sandbox's resource. A template no live
// node has is answered like the single-host endpoint answers it: 400.
func (g *Gateway) e2bCreate(w http.ResponseWriter, r *http.Request, owner string) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxJSONBodyBytes))
	if err != nil {
		writeE2BErr(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", api.MaxJSONBodyBytes))
		return
	}
	var want struct {
		TemplateID string `json:"templateID"`
	}
	json.Unmarshal(body, &want) // the node validates the body; this only picks the node
	p := placement{template: want.TemplateID, e2b: true}
	nodes, err := g.nodes.place(r.Context(), p)
	if ut := (*errUnknownTemplate)(nil); errors.As(err, &ut) {
		writeE2BErr(w, http.StatusBadRequest, fmt.Sprintf("unknown template: %q: no live node with an E2B endpoint has it "+
			"(the nodes' templates and E2B aliases are in their Leases, annotations %s and %s)", p.template, annTemplates, annE2BTpls))
		return
	}
	if err != nil {
		writeE2BErr(w, http.StatusServiceUnavailable, "cluster state unavailable: "+err.Error())
		return
	}
	var st int
	var hdr http.Header
	var ans []byte
	var node *nodeInfo
	for _, n := range nodes {
		g.nodes.placed(n.name, p.on(n))
		st, hdr, ans, err = g.proxy.call(r.Context(), e2bNode(n), r.Method, r.URL.Path, r.URL.RawQuery, r.Header, body)
		if err != nil {
			g.cfg.Log.Warn("gateway: E2B create on node failed", "node", n.name, "err", err)
			continue
		}
		node = n
		if st != http.StatusServiceUnavailable && st != http.StatusTooManyRequests {
			break
		}
	}
	if node == nil {
		writeE2BErr(w, http.StatusServiceUnavailable, "no live node with an E2B endpoint has room for another sandbox now")
		return
	}
	if st/100 == 2 {
		var sb struct {
			ID       string `json:"sandboxID"`
			Template string `json:"templateID"`
		}
		if json.Unmarshal(ans, &sb) == nil {
			g.record(r.Context(), sb.ID, node.name, owner, sb.Template)
		}
	}
	copyAnswer(w, st, hdr, ans)
}

// writeE2BErr writes an error in the E2B API's shape.
func writeE2BErr(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"code": status, "message": msg})
}
