package cluster

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// broadcast sends a write that every node must see (secrets: each node's
// egress proxy substitutes them for its own sandboxes) to every live node.
// All must accept it; otherwise the answer names the nodes that did not,
// and the caller retries (the writes are idempotent by name).
func (g *Gateway) broadcast(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxJSONBodyBytes))
	if err != nil {
		writeErr(w, api.CodeTooLarge, fmt.Sprintf("request body larger than %d bytes", api.MaxJSONBodyBytes))
		return
	}
	nodes, err := g.nodes.live(r.Context())
	if err != nil {
		writeErr(w, api.CodeNoCapacity, err.Error())
		return
	}
	slices.SortFunc(nodes, func(a, b *nodeInfo) int { return strings.Compare(a.name, b.name) })
	type answer struct {
		st   int
		hdr  http.Header
		body []byte
		err  error
	}
	ans := make([]answer, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
			defer cancel()
			a := &ans[i]
			a.st, a.hdr, a.body, a.err = g.proxy.call(ctx, n, r.Method, r.URL.Path, r.URL.RawQuery, r.Header, body)
		}()
	}
	wg.Wait()
	var failed []string
	for i, a := range ans {
		switch {
		case a.err != nil:
			failed = append(failed, fmt.Sprintf("%s (%v)", nodes[i].name, a.err))
		case a.st/100 == 4 && i == 0:
			copyAnswer(w, a.st, a.hdr, a.body) // the request is wrong: every node says so
			return
		case a.st/100 != 2:
			failed = append(failed, fmt.Sprintf("%s (%d)", nodes[i].name, a.st))
		}
	}
	if len(failed) > 0 {
		writeErr(w, api.CodeUnavailable, "not every node took the change; retry: "+strings.Join(failed, ", "))
		return
	}
	copyAnswer(w, ans[0].st, ans[0].hdr, ans[0].body)
}

// toStickyNode proxies a stateful session (MCP) to the live node the
// caller's key hashes to, so every request of a session reaches the node
// that holds it while the set of live nodes stays the same.
func (g *Gateway) toStickyNode(w http.ResponseWriter, r *http.Request, owner string) {
	nodes, err := g.nodes.live(r.Context())
	if err != nil {
		writeErr(w, api.CodeNoCapacity, err.Error())
		return
	}
	slices.SortFunc(nodes, func(a, b *nodeInfo) int { return strings.Compare(a.name, b.name) })
	h := fnv.New32a()
	h.Write([]byte(owner))
	g.proxy.forward(w, r, nodes[int(h.Sum32()%uint32(len(nodes)))])
}

func copyAnswer(w http.ResponseWriter, st int, hdr http.Header, body []byte) {
	if ct := hdr.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(st)
	w.Write(body)
}
