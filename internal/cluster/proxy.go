package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/cluster/kube"
)

// maxNodeAnswer bounds a node's answer the gateway reads whole (create and
// list); everything else streams through.
const maxNodeAnswer = 8 << 20

// nodeReadBuffer and streamSendBuffer bound what one stream holds in the
// gateway's sockets: the receive buffer (SO_RCVBUF; the kernel doubles it)
// of every connection to a node, and the send buffer (SO_SNDBUF) of a
// client connection while it carries an NDJSON stream (exec output,
// watches, logs). Autotuned, they grow to tcp_rmem's and tcp_wmem's
// maxima (32 and 4 MiB on many hosts) as the gateway reads a node's
// stream eagerly, so a stream the client does not read would pile up
// megabytes in the gateway while the node sees it read: a file watch
// would never report its overflow. 64 KiB each keeps about 256 KiB of a
// stream in the gateway and still moves hundreds of MB/s at in-cluster
// round trips; other answers to clients (file downloads) keep autotuning.
const (
	nodeReadBuffer   = 64 << 10
	streamSendBuffer = 64 << 10
)

// ctxConn holds the client connection in a request's context (ConnContext).
type ctxConn struct{}

// ConnContext is the gateway servers' http.Server.ConnContext: it lets
// the proxy bound the send buffer of a connection carrying a stream.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, ctxConn{}, c)
}

// setBuffer sets socket option opt (SO_RCVBUF, SO_SNDBUF) of c to n bytes.
func setBuffer(c syscall.RawConn, opt, n int) error {
	var serr error
	if err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, n) }); err != nil {
		return err
	}
	return serr
}

// proxy forwards requests to nodes. Streams (NDJSON, file bodies) are
// flushed as they come; WebSocket upgrades pass through.
type proxy struct {
	log *slog.Logger
	rp  *httputil.ReverseProxy
	hc  *http.Client
}

type ctxNode struct{}

func newProxy(log *slog.Logger) *proxy {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		return setBuffer(c, syscall.SO_RCVBUF, nodeReadBuffer)
	}}
	tr.DialContext = d.DialContext
	p := &proxy{log: log, hc: &http.Client{Transport: tr}}
	p.rp = &httputil.ReverseProxy{
		Transport:     tr,
		FlushInterval: -1,
		Rewrite: func(pr *httputil.ProxyRequest) {
			n := pr.In.Context().Value(ctxNode{}).(*nodeInfo)
			pr.SetURL(n.url)
			// The node sees the client's Host: port URLs it builds name the
			// gateway, and own-origin hosts keep their sandbox id.
			pr.Out.Host = pr.In.Host
		},
		ModifyResponse: func(resp *http.Response) error {
			if !strings.HasPrefix(resp.Header.Get("Content-Type"), api.ContentTypeNDJSON) {
				return nil
			}
			if sc, ok := resp.Request.Context().Value(ctxConn{}).(syscall.Conn); ok {
				if rc, err := sc.SyscallConn(); err == nil {
					setBuffer(rc, syscall.SO_SNDBUF, streamSendBuffer) // best effort: the stream works either way
				}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			n := r.Context().Value(ctxNode{}).(*nodeInfo)
			log.Warn("gateway: node did not answer", "node", n.name, "err", err)
			writeErr(w, api.CodeUnavailable, fmt.Sprintf("node %q did not answer", n.name))
		},
	}
	return p
}

// forward proxies r to node n.
func (p *proxy) forward(w http.ResponseWriter, r *http.Request, n *nodeInfo) {
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxNode{}, n)))
}

// call sends method path?query with body to n and reads the whole answer.
func (p *proxy) call(ctx context.Context, n *nodeInfo, method, path, query string, hdr http.Header, body []byte) (int, http.Header, []byte, error) {
	u := *n.url
	u.Path, u.RawQuery = path, query
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	for _, h := range []string{"Authorization", "X-API-KEY", "Content-Type", "Accept"} {
		if v := hdr.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxNodeAnswer+1))
	if err == nil && len(b) > maxNodeAnswer {
		err = fmt.Errorf("node %q answered more than %d bytes", n.name, maxNodeAnswer)
	}
	return resp.StatusCode, resp.Header, b, err
}

// create places POST /v1/sandboxes on the least loaded live node with room,
// trying the next one when a node answers no_capacity, and records the new
// sandbox's resource at once so the next call finds its node through any
// gateway.
func (g *Gateway) create(w http.ResponseWriter, r *http.Request, owner string) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxJSONBodyBytes))
	if err != nil {
		writeErr(w, api.CodeTooLarge, fmt.Sprintf("request body larger than %d bytes", api.MaxJSONBodyBytes))
		return
	}
	var want struct {
		Template string `json:"template"`
	}
	json.Unmarshal(body, &want) // the node validates the body; this only picks the node
	nodes, err := g.nodes.place(r.Context(), placement{template: want.Template})
	if ut := (*errUnknownTemplate)(nil); errors.As(err, &ut) {
		writeErr(w, api.CodeUnknownTemplate, ut.Error())
		return
	}
	if err != nil {
		writeErr(w, api.CodeUnavailable, "cluster state unavailable: "+err.Error())
		return
	}
	if len(nodes) == 0 {
		writeErr(w, api.CodeNoCapacity, "no live node has room for another sandbox now")
		return
	}
	var st int
	var hdr http.Header
	var ans []byte
	var node *nodeInfo
	for _, n := range nodes {
		g.nodes.placed(n.name, want.Template)
		st, hdr, ans, err = g.proxy.call(r.Context(), n, r.Method, r.URL.Path, r.URL.RawQuery, r.Header, body)
		if err != nil {
			g.cfg.Log.Warn("gateway: create on node failed", "node", n.name, "err", err)
			continue
		}
		node = n
		if st != http.StatusServiceUnavailable {
			break
		}
	}
	if node == nil {
		writeErr(w, api.CodeUnavailable, "no node answered the create")
		return
	}
	if st/100 == 2 {
		var sb api.Sandbox
		if json.Unmarshal(ans, &sb) == nil {
			g.record(r.Context(), sb.ID, node.name, owner, sb.Template)
		}
	}
	copyAnswer(w, st, hdr, ans)
}

// record writes the Sandbox object of a sandbox a node just created (REST
// or E2B), so that calls through any gateway find its node at once. A
// failure is only logged: the node's mirror writes it within seconds.
func (g *Gateway) record(ctx context.Context, id, node, owner, template string) {
	if !validID(id) {
		return
	}
	obj := newSandbox(id, node, owner, template)
	if err := g.cfg.Kube.Create(ctx, sandboxesPath(g.cfg.Namespace), obj, nil); err != nil && !kube.IsConflict(err) {
		g.cfg.Log.Warn("gateway: recording sandbox failed", "id", id, "node", node, "err", err)
	}
}

// list merges GET /v1/sandboxes from every live node. Each node orders its
// page by (created_at, id) and its cursor is "<unix nanos>.<id>", a
// position in that one global order, so the merged page and cursor are
// exact. Sandboxes of lost nodes are not listed.
func (g *Gateway) list(w http.ResponseWriter, r *http.Request) {
	nodes, err := g.nodes.live(r.Context())
	if err != nil {
		writeErr(w, api.CodeNoCapacity, err.Error())
		return
	}
	limit := 100
	if v, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && v > 0 {
		limit = v
	}
	type page struct {
		st   int
		body []byte
		err  error
		resp api.ListSandboxesResponse
	}
	pages := make([]page, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
			defer cancel()
			p := &pages[i]
			p.st, _, p.body, p.err = g.proxy.call(ctx, n, r.Method, r.URL.Path, r.URL.RawQuery, r.Header, nil)
			if p.err == nil && p.st == http.StatusOK {
				p.err = json.Unmarshal(p.body, &p.resp)
			}
		}()
	}
	wg.Wait()
	var all []api.Sandbox
	more := false
	for i, p := range pages {
		if p.err != nil {
			writeErr(w, api.CodeUnavailable, fmt.Sprintf("node %q: %v", nodes[i].name, p.err))
			return
		}
		if p.st != http.StatusOK { // a bad query: every node says the same
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(p.st)
			w.Write(p.body)
			return
		}
		all = append(all, p.resp.Sandboxes...)
		more = more || p.resp.NextCursor != ""
	}
	slices.SortFunc(all, func(a, b api.Sandbox) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	out := api.ListSandboxesResponse{Sandboxes: all}
	if len(all) > limit {
		out.Sandboxes, more = all[:limit], true
	}
	if more && len(out.Sandboxes) > 0 {
		last := out.Sandboxes[len(out.Sandboxes)-1]
		out.NextCursor = fmt.Sprintf("%d.%s", last.CreatedAt.UnixNano(), last.ID)
	}
	if out.Sandboxes == nil {
		out.Sandboxes = []api.Sandbox{}
	}
	writeJSON(w, http.StatusOK, out)
}
