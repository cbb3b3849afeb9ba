package cluster

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// E2B list paging through the gateway (GET /v2/sandboxes with limit and
// nextToken, the next token answered in X-Next-Token).
//
// Every node orders its sandboxes by (creation time, id) and pages them
// with a cursor "<unix nanos>.<id>", a position in that one order over all
// nodes. The gateway asks every node for a page after the same position
// and merges: a node that answers a next token has sandboxes after it the
// gateway has not seen, so the merged page stops at the lowest such token
// (never skipping what a node did not answer yet) and at limit. The
// gateway's own token is that position, integrity-checked with a MAC keyed
// by the caller's API key: opaque, bound to the key (another key's token,
// an edited or truncated one is a 400), and stateless, so any gateway
// replica continues a list any other one began.
const (
	// defaultE2BListLimit is the page size of a list without limit (the
	// nodes' default).
	defaultE2BListLimit = 100
	// maxE2BToken bounds a nextToken the gateway decodes.
	maxE2BToken = 256
	// e2bTokenMAC is the length of a token's MAC.
	e2bTokenMAC = 16
)

// listPos is a position in the nodes' list order.
type listPos struct {
	nanos int64
	id    string
}

func (a listPos) cmp(b listPos) int {
	return cmp.Or(cmp.Compare(a.nanos, b.nanos), strings.Compare(a.id, b.id))
}

// nodeCursor is the position as a node's cursor.
func (a listPos) nodeCursor() string { return strconv.FormatInt(a.nanos, 10) + "." + a.id }

// parseNodeCursor reads a node's X-Next-Token.
func parseNodeCursor(s string) (listPos, error) {
	ns, id, ok := strings.Cut(s, ".")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || !validID(id) {
		return listPos{}, fmt.Errorf("bad next token %.80q", s)
	}
	return listPos{nanos: n, id: id}, nil
}

// tokenMAC is the MAC of a token's payload under the caller's key.
func tokenMAC(secret string, payload []byte) []byte {
	k := sha256.Sum256([]byte("paddock-gateway e2b list token\x00" + secret))
	m := hmac.New(sha256.New, k[:])
	m.Write(payload)
	return m.Sum(nil)[:e2bTokenMAC]
}

// encodeE2BToken is the gateway's nextToken of position p for the caller's
// key secret: base64url(8-byte nanos, id, MAC).
func encodeE2BToken(secret string, p listPos) string {
	payload := binary.BigEndian.AppendUint64(nil, uint64(p.nanos))
	payload = append(payload, p.id...)
	return base64.RawURLEncoding.EncodeToString(append(payload, tokenMAC(secret, payload)...))
}

// errBadToken is a nextToken the gateway did not give this key.
var errBadToken = errors.New("nextToken is not one this endpoint gave out for this API key (pass the X-Next-Token of the previous page unchanged)")

// decodeE2BToken reads a nextToken encodeE2BToken made for secret.
func decodeE2BToken(secret, tok string) (listPos, error) {
	if len(tok) > maxE2BToken {
		return listPos{}, errBadToken
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) < 8+3+e2bTokenMAC {
		return listPos{}, errBadToken
	}
	payload, mac := b[:len(b)-e2bTokenMAC], b[len(b)-e2bTokenMAC:]
	if !hmac.Equal(mac, tokenMAC(secret, payload)) {
		return listPos{}, errBadToken
	}
	p := listPos{nanos: int64(binary.BigEndian.Uint64(payload)), id: string(payload[8:])}
	if !validID(p.id) {
		return listPos{}, errBadToken
	}
	return p, nil
}

// listedItem is a node's list entry, kept raw, with its position.
type listedItem struct {
	raw json.RawMessage
	pos listPos
}

// nodePage is one node's answer to a list.
type nodePage struct {
	st    int
	body  []byte
	err   error
	items []listedItem
	next  *listPos // its X-Next-Token; nil: it has no more
}

// e2bList serves GET /v2/sandboxes (and the legacy GET /sandboxes, one
// page of running sandboxes) over every live node with an E2B endpoint,
// paging as the package comment above describes.
func (g *Gateway) e2bList(w http.ResponseWriter, r *http.Request, secret string) {
	v2 := strings.HasPrefix(r.URL.Path, "/v2/")
	q := r.URL.Query()
	limit := defaultE2BListLimit
	if l := q.Get("limit"); l != "" {
		limit, _ = strconv.Atoi(l) // the nodes refuse a bad one with E2B's error; this only cuts the page
	}
	q.Del("nextToken")
	if tok := r.URL.Query().Get("nextToken"); tok != "" && v2 {
		p, err := decodeE2BToken(secret, tok)
		if err != nil {
			writeE2BErr(w, http.StatusBadRequest, err.Error())
			return
		}
		q.Set("nextToken", p.nodeCursor())
	}
	nodes, err := g.nodes.live(r.Context())
	if err != nil {
		writeE2BErr(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	pages := g.e2bPages(r, nodes, q.Encode())
	var all []listedItem
	var cutoff *listPos
	for i, p := range pages {
		switch {
		case p.err != nil:
			writeE2BErr(w, http.StatusBadGateway, fmt.Sprintf("node %q: %v", nodes[i].name, p.err))
			return
		case p.st != 0 && p.st != http.StatusOK: // a bad query: every node says the same
			copyAnswer(w, p.st, http.Header{"Content-Type": {"application/json"}}, p.body)
			return
		}
		all = append(all, p.items...)
		if p.next != nil && (cutoff == nil || p.next.cmp(*cutoff) < 0) {
			cutoff = p.next
		}
	}
	if !v2 {
		cutoff = nil // the legacy list is one page: what every node answered
	}
	page, next := mergeE2BPages(all, cutoff, max(limit, 1))
	out := make([]json.RawMessage, len(page))
	for i, it := range page {
		out[i] = it.raw
	}
	if next != nil && v2 {
		w.Header().Set("X-Next-Token", encodeE2BToken(secret, *next))
	}
	writeJSON(w, http.StatusOK, out)
}

// mergeE2BPages is the merged page of the nodes' items: those up to
// cutoff (the lowest next token of a node; nil: every node answered all
// it has) in list order, at most limit; next is where the following page
// starts (nil: this is the last).
func mergeE2BPages(all []listedItem, cutoff *listPos, limit int) (page []listedItem, next *listPos) {
	slices.SortFunc(all, func(a, b listedItem) int { return a.pos.cmp(b.pos) })
	for _, it := range all {
		if cutoff != nil && it.pos.cmp(*cutoff) > 0 {
			break
		}
		if len(page) == limit {
			last := page[len(page)-1].pos
			return page, &last
		}
		page = append(page, it)
	}
	if page == nil {
		page = []listedItem{}
	}
	return page, cutoff
}

// e2bPages asks every node with an E2B endpoint for its list page (query
// rawQuery) at once.
func (g *Gateway) e2bPages(r *http.Request, nodes []*nodeInfo, rawQuery string) []nodePage {
	pages := make([]nodePage, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		en := e2bNode(n)
		if en == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
			defer cancel()
			p := &pages[i]
			var hdr http.Header
			p.st, hdr, p.body, p.err = g.proxy.call(ctx, en, r.Method, r.URL.Path, rawQuery, r.Header, nil)
			if p.err != nil || p.st != http.StatusOK {
				return
			}
			p.items, p.err = parseListed(p.body)
			if t := hdr.Get("X-Next-Token"); t != "" && p.err == nil {
				var pos listPos
				if pos, p.err = parseNodeCursor(t); p.err == nil {
					p.next = &pos
				}
			}
		}()
	}
	wg.Wait()
	return pages
}

// parseListed reads a node's list answer: a JSON array of E2B
// ListedSandbox objects, each placed by its startedAt and sandboxID.
func parseListed(body []byte) ([]listedItem, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(body, &raws); err != nil {
		return nil, err
	}
	out := make([]listedItem, 0, len(raws))
	for _, raw := range raws {
		var s struct {
			ID        string    `json:"sandboxID"`
			StartedAt time.Time `json:"startedAt"`
		}
		if err := json.Unmarshal(raw, &s); err != nil || !validID(s.ID) {
			return nil, fmt.Errorf("bad list entry %.120s", raw)
		}
		out = append(out, listedItem{raw: raw, pos: listPos{nanos: s.StartedAt.UnixNano(), id: s.ID}})
	}
	return out, nil
}
