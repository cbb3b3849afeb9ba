package e2b

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/internal/manager"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// Bounds of the control plane.
const (
	maxControlBody = 1 << 20
	// defaultListLimit and maxListLimit bound GET /v2/sandboxes pages.
	defaultListLimit = 100
	maxListLimit     = 1000
	// reservedMeta prefixes metadata keys this package keeps on a record
	// (hidden from E2B clients, refused from them).
	reservedMeta = "paddock.e2b/"
	metaPrivate  = reservedMeta + "private-traffic"
	metaTemplate = reservedMeta + "template"
)

type controlHandler func(w http.ResponseWriter, r *http.Request, owner string) error

// controlRoutes is the control-plane route table: the subset of E2B's
// REST API the SDKs call for sandboxes.
func (s *Server) controlRoutes() {
	routes := map[string]controlHandler{
		"POST /sandboxes":                 s.create,
		"POST /v2/sandboxes":              s.create,
		"GET /sandboxes":                  s.listV1,
		"GET /v2/sandboxes":               s.list,
		"GET /sandboxes/{id}":             s.get,
		"DELETE /sandboxes/{id}":          s.kill,
		"POST /sandboxes/{id}/timeout":    s.setTimeout,
		"POST /sandboxes/{id}/pause":      s.pause,
		"POST /sandboxes/{id}/resume":     s.connect,
		"POST /sandboxes/{id}/connect":    s.connect,
		"POST /v2/sandboxes/{id}/connect": s.connect,
		"GET /sandboxes/{id}/metrics":     s.metrics,
		"GET /sandboxes/{id}/logs":        s.logs,
		"GET /v2/sandboxes/{id}/logs":     s.logs,
		"PUT /sandboxes/{id}/network":     s.network,
		"POST /sandboxes/{id}/refreshes":  s.refresh,
	}
	for pattern, h := range routes {
		s.control.Handle(pattern, s.withKey(h))
	}
	s.control.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	s.control.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, fmt.Errorf("%w: %s %s is not part of Paddock's E2B-compatible API", sandbox.ErrNotSupported, r.Method, r.URL.Path))
	})
}

func (s *Server) withKey(h controlHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		owner, ok := s.owner(r)
		if !ok {
			writeAPIError(w, fmt.Errorf("%w: missing or unknown API key (X-API-KEY)", sandbox.ErrUnauthorized))
			return
		}
		if err := h(w, r, owner); err != nil {
			if apiStatus(err) >= 500 {
				s.log.Error("e2b request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			}
			writeAPIError(w, err)
		}
	})
}

// decodeBody reads an optional JSON body into v (unknown fields are
// ignored: E2B adds fields often and the SDKs send them).
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxControlBody))
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(b)) == "" {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: bad JSON body: %v", sandbox.ErrInvalid, err)
	}
	return nil
}

// e2bNetwork is E2B's network configuration of a sandbox.
type e2bNetwork struct {
	AllowOut           []string `json:"allowOut,omitempty"`
	DenyOut            []string `json:"denyOut,omitempty"`
	AllowPublicTraffic *bool    `json:"allowPublicTraffic,omitempty"`
}

// createBody is POST /v2/sandboxes.
type createBody struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int64            `json:"timeout"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Network             *e2bNetwork       `json:"network"`
	AutoPause           *bool             `json:"autoPause"`
	Secure              *bool             `json:"secure"`
	MCP                 json.RawMessage   `json:"mcp"`
	VolumeMounts        json.RawMessage   `json:"volumeMounts"`
}

// policy is the Paddock egress policy of E2B's network options: allowOut
// makes an allowlist; otherwise allow_internet_access true (or denyOut
// alone) is full access minus denyOut, and anything else is off.
func policy(internet *bool, n *e2bNetwork) *sandbox.NetworkPolicy {
	var allow, deny []string
	if n != nil {
		allow, deny = n.AllowOut, n.DenyOut
	}
	switch {
	case len(allow) > 0:
		return &sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowlist, Allow: allow, Deny: deny}
	case internet != nil && !*internet:
		return &sandbox.NetworkPolicy{Mode: sandbox.NetworkOff}
	case (internet != nil && *internet) || len(deny) > 0:
		return &sandbox.NetworkPolicy{Mode: sandbox.NetworkFull, Deny: deny}
	}
	return nil
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, owner string) error {
	var b createBody
	if err := decodeBody(w, r, &b); err != nil {
		return err
	}
	if len(b.MCP) > 0 && string(b.MCP) != "null" {
		return fmt.Errorf("%w: the MCP gateway is not available (use paddockd's /v1/mcp)", sandbox.ErrNotSupported)
	}
	if len(b.VolumeMounts) > 0 && string(b.VolumeMounts) != "null" && string(b.VolumeMounts) != "[]" {
		return fmt.Errorf("%w: volume mounts are not available", sandbox.ErrNotSupported)
	}
	meta := map[string]string{}
	for k, v := range b.Metadata {
		if strings.HasPrefix(k, reservedMeta) {
			return fmt.Errorf("%w: metadata key prefix %q is reserved", sandbox.ErrInvalid, reservedMeta)
		}
		meta[k] = v
	}
	tpl := b.TemplateID
	if t, ok := s.cfg.Templates[tpl]; ok {
		meta[metaTemplate] = tpl
		tpl = t
	}
	if b.Network != nil && b.Network.AllowPublicTraffic != nil && !*b.Network.AllowPublicTraffic {
		meta[metaPrivate] = "true"
	}
	req := sandbox.CreateRequest{Template: tpl, Env: b.EnvVars, Metadata: meta,
		Network: policy(b.AllowInternetAccess, b.Network)}
	if b.Timeout != nil {
		if *b.Timeout <= 0 {
			return fmt.Errorf("%w: timeout must be positive", sandbox.ErrInvalid)
		}
		req.TimeoutSeconds = *b.Timeout
	}
	if b.AutoPause != nil && *b.AutoPause {
		req.OnTimeout = sandbox.OnTimeoutPause
	}
	rec, err := s.mgr.Create(r.Context(), owner, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, s.created(rec))
	return nil
}

// created is E2B's Sandbox answer of create and connect.
func (s *Server) created(rec *store.Record) map[string]any {
	out := map[string]any{
		"sandboxID": rec.ID, "templateID": templateOf(rec), "clientID": "paddock",
		"envdVersion": envdVersion, "envdAccessToken": s.accessToken(rec.ID),
		"trafficAccessToken": nil, "domain": nil,
	}
	if rec.Metadata[metaPrivate] == "true" {
		out["trafficAccessToken"] = s.trafficToken(rec.ID)
	}
	if s.cfg.Domain != "" {
		out["domain"] = s.cfg.Domain
	}
	return out
}

func templateOf(rec *store.Record) string {
	if t := rec.Metadata[metaTemplate]; t != "" {
		return t
	}
	return rec.Template
}

// e2bState is E2B's name of a state: running, or paused for every state
// a connect can bring back.
func e2bState(st sandbox.State) string {
	if st == sandbox.Running || st == sandbox.Creating {
		return "running"
	}
	return "paused"
}

// listed is E2B's ListedSandbox / SandboxDetail of rec.
func (s *Server) listed(rec *store.Record) map[string]any {
	meta := map[string]string{}
	for k, v := range rec.Metadata {
		if !strings.HasPrefix(k, reservedMeta) {
			meta[k] = v
		}
	}
	onTimeout := rec.OnTimeout
	if onTimeout == "" {
		onTimeout = sandbox.OnTimeoutKill
	}
	out := map[string]any{
		"sandboxID": rec.ID, "templateID": templateOf(rec), "clientID": "paddock",
		"startedAt": rec.CreatedAt.UTC().Format(time.RFC3339Nano), "endAt": rec.ExpiresAt.UTC().Format(time.RFC3339Nano),
		"cpuCount": int(math.Ceil(rec.Resources.VCPUs)), "memoryMB": rec.Resources.MemoryMiB,
		"diskSizeMB": rec.Resources.DiskMiB, "metadata": meta, "state": e2bState(rec.State),
		"envdVersion": envdVersion, "allowInternetAccess": rec.Network.Mode == sandbox.NetworkFull,
		"lifecycle": map[string]any{"onTimeout": onTimeout, "autoResume": false},
		"network": map[string]any{"allowOut": nonNil(rec.Network.Allow), "denyOut": nonNil(rec.Network.Deny),
			"allowPublicTraffic": rec.Metadata[metaPrivate] != "true"},
	}
	if s.cfg.Domain != "" {
		out["domain"] = s.cfg.Domain
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// live returns owner's sandbox id unless it has ended (404 then, which
// the SDKs turn into SandboxNotFoundError).
func (s *Server) live(r *http.Request, owner string) (*store.Record, error) {
	id := r.PathValue("id")
	rec, err := s.mgr.Get(r.Context(), owner, id)
	if err != nil {
		return nil, err
	}
	if rec.State == sandbox.Terminated {
		return nil, fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	return rec, nil
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, owner string) error {
	rec, err := s.live(r, owner)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.listed(rec))
	return nil
}

// list serves GET /v2/sandboxes: metadata and state filters, limit and
// nextToken (answered in the X-Next-Token header).
func (s *Server) list(w http.ResponseWriter, r *http.Request, owner string) error {
	q := r.URL.Query()
	f := manager.Filter{Limit: defaultListLimit, Cursor: q.Get("nextToken")}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxListLimit {
			return fmt.Errorf("%w: limit must be 1-%d", sandbox.ErrInvalid, maxListLimit)
		}
		f.Limit = n
	}
	meta, err := metadataFilter(q.Get("metadata"))
	if err != nil {
		return err
	}
	f.Metadata = meta
	want := map[string]bool{}
	for _, st := range q["state"] {
		for _, one := range strings.Split(st, ",") {
			if one = strings.TrimSpace(one); one != "" {
				if one != "running" && one != "paused" {
					return fmt.Errorf("%w: state must be running or paused", sandbox.ErrInvalid)
				}
				want[one] = true
			}
		}
	}
	if len(want) == 1 && want["running"] {
		f.State = string(sandbox.Running)
	}
	recs, next, err := s.mgr.List(r.Context(), owner, f)
	if err != nil {
		return err
	}
	out := []map[string]any{}
	for _, rec := range recs {
		if rec.State == sandbox.Terminated || (len(want) > 0 && !want[e2bState(rec.State)]) {
			continue
		}
		out = append(out, s.listed(rec))
	}
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// listV1 serves the legacy GET /sandboxes: running sandboxes, one page.
func (s *Server) listV1(w http.ResponseWriter, r *http.Request, owner string) error {
	q := r.URL.Query()
	q.Set("state", "running")
	q.Del("nextToken")
	r.URL.RawQuery = q.Encode()
	return s.list(w, r, owner)
}

// metadataFilter parses the metadata query: a query string of key=value
// pairs whose keys and values the SDKs percent-encode once more.
func metadataFilter(raw string) (map[string]string, error) {
	if raw == "" {
		return nil, nil
	}
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: metadata filter: %v", sandbox.ErrInvalid, err)
	}
	out := map[string]string{}
	for k, vs := range vals {
		if len(vs) == 0 {
			continue
		}
		ku, err1 := url.QueryUnescape(k)
		vu, err2 := url.QueryUnescape(vs[0])
		if err1 != nil || err2 != nil {
			ku, vu = k, vs[0]
		}
		out[ku] = vu
	}
	return out, nil
}
