package cluster

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestE2BToken: a token round-trips for its key; edited, truncated,
// extended, another key's, malformed or oversized tokens are errBadToken,
// never a panic.
func TestE2BToken(t *testing.T) {
	p := listPos{nanos: time.Now().UnixNano(), id: "sbabcdef234567"}
	tok := encodeE2BToken("pdk_alice", p)
	if got, err := decodeE2BToken("pdk_alice", tok); err != nil || got != p {
		t.Fatalf("round trip: %v %v, want %v", got, err, p)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	flipped := slices.Clone(raw)
	flipped[3] ^= 1
	bad := map[string]string{
		"another key":     tok, // decoded with bob's key below
		"edited position": enc(flipped),
		"truncated":       tok[:len(tok)-2],
		"extended":        tok + "AA",
		"not base64":      "!!!" + tok,
		"empty payload":   enc(nil),
		"short":           enc(raw[:10]),
		"oversized":       strings.Repeat("A", maxE2BToken+1),
		"node cursor":     strconv.FormatInt(p.nanos, 10) + "." + p.id,
	}
	for name, tk := range bad {
		key := "pdk_alice"
		if name == "another key" {
			key = "pdk_bob"
		}
		if _, err := decodeE2BToken(key, tk); err != errBadToken {
			t.Errorf("%s: %v, want errBadToken", name, err)
		}
	}
	// an id that is not one, under a valid MAC
	payload := append(raw[:8:8], "../x"...)
	if _, err := decodeE2BToken("k", enc(append(payload, tokenMAC("k", payload)...))); err != errBadToken {
		t.Errorf("bad id under a valid MAC: %v", err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := make([]byte, r.IntN(120))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		decodeE2BToken("k", enc(b))
		decodeE2BToken("k", string(b))
	}
}

func enc(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// fakeSandbox is a sandbox of a fakeNode.
type fakeSandbox struct {
	id      string
	started time.Time
	paused  bool
}

// fakeNode answers GET /v2/sandboxes the way a node's E2B endpoint pages
// (internal/e2b list over manager.List): sandboxes in (creation, id)
// order after the cursor, limit of them, the state filter applied after
// the page, the next token the last one of the page when more follow.
func fakeNode(t *testing.T, sbs []fakeSandbox) *httptest.Server {
	slices.SortFunc(sbs, func(a, b fakeSandbox) int {
		return listPos{a.started.UnixNano(), a.id}.cmp(listPos{b.started.UnixNano(), b.id})
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		limit := 100
		if l := q.Get("limit"); l != "" {
			limit, _ = strconv.Atoi(l)
		}
		var after *listPos
		if c := q.Get("nextToken"); c != "" {
			p, err := parseNodeCursor(c)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			after = &p
		}
		var page []fakeSandbox
		next := ""
		for _, s := range sbs {
			pos := listPos{s.started.UnixNano(), s.id}
			if after != nil && pos.cmp(*after) <= 0 {
				continue
			}
			if len(page) == limit {
				last := page[len(page)-1]
				next = listPos{last.started.UnixNano(), last.id}.nodeCursor()
				break
			}
			page = append(page, s)
		}
		out := []map[string]any{}
		for _, s := range page {
			st := map[bool]string{false: "running", true: "paused"}[s.paused]
			if want := q.Get("state"); want != "" && !strings.Contains(want, st) {
				continue
			}
			out = append(out, map[string]any{"sandboxID": s.id, "startedAt": s.started.Format(time.RFC3339Nano), "state": st})
		}
		if next != "" {
			w.Header().Set("X-Next-Token", next)
		}
		writeJSON(w, http.StatusOK, out)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// listGateway is a Gateway over fake nodes holding sbs (node i has the
// sandboxes whose index mod len(nodes) is i).
func listGateway(t *testing.T, nodes int, sbs []fakeSandbox) *Gateway {
	c := &nodeCache{refresh: time.Hour, at: time.Now(), pending: map[string][]pendingCreate{}, nodes: map[string]*nodeInfo{}}
	for i := range nodes {
		var mine []fakeSandbox
		for j := i; j < len(sbs); j += nodes {
			mine = append(mine, sbs[j])
		}
		u, _ := url.Parse(fakeNode(t, mine).URL)
		name := fmt.Sprintf("n%d", i)
		c.nodes[name] = &nodeInfo{name: name, url: u, e2bURL: u, capacity: 10, renewedAt: time.Now()}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	return &Gateway{cfg: GatewayConfig{Log: log}, nodes: c, proxy: newProxy(log)}
}

// pageAll lists through g with limit and query, following X-Next-Token;
// it returns the ids in order and the number of pages.
func pageAll(t *testing.T, g *Gateway, secret string, limit int, query string) ([]string, int) {
	var ids []string
	tok := ""
	for pages := 1; pages < 1000; pages++ {
		u := "/v2/sandboxes?limit=" + strconv.Itoa(limit) + query
		if tok != "" {
			u += "&nextToken=" + url.QueryEscape(tok)
		}
		w := httptest.NewRecorder()
		g.e2bList(w, httptest.NewRequest("GET", u, nil), secret)
		if w.Code != http.StatusOK {
			t.Fatalf("page %d: %d %s", pages, w.Code, w.Body)
		}
		var items []struct {
			ID string `json:"sandboxID"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &items); err != nil || len(items) > limit {
			t.Fatalf("page %d: %s (%v), at most %d items", pages, w.Body, err, limit)
		}
		for _, it := range items {
			ids = append(ids, it.ID)
		}
		if tok = w.Header().Get("X-Next-Token"); tok == "" {
			return ids, pages
		}
	}
	t.Fatal("the list never ended")
	return nil, 0
}

// TestE2BListPaging: paging the merged list of several nodes yields every
// sandbox once, in (creation, id) order, whatever the page size, ties in
// creation time and the state filter the nodes apply after their page;
// a bad token is a 400 in E2B's error shape.
func TestE2BListPaging(t *testing.T) {
	base := time.Date(2026, 12, 4, 20, 0, 0, 0, time.UTC)
	r := rand.New(rand.NewPCG(3, 4))
	cases := []struct {
		name    string
		n       int // sandboxes
		nodes   int
		limit   int
		ties    bool // many share a creation time
		pausedP float64
	}{
		{"7 on 3, limit 2", 7, 3, 2, false, 0},
		{"7 on 3, limit 1", 7, 3, 1, false, 0},
		{"7 on 3, limit 7", 7, 3, 7, false, 0},
		{"7 on 3, limit 100", 7, 3, 100, false, 0},
		{"ties", 40, 4, 3, true, 0},
		{"state filter after the node's page", 50, 3, 4, true, 0.6},
		{"one node", 9, 1, 2, false, 0.3},
		{"empty", 0, 3, 2, false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var sbs []fakeSandbox
			for i := range tc.n {
				d := time.Duration(r.IntN(1000)) * time.Millisecond
				if tc.ties {
					d = time.Duration(r.IntN(3)) * time.Second
				}
				sbs = append(sbs, fakeSandbox{id: fmt.Sprintf("sb%03dx", i), started: base.Add(d), paused: r.Float64() < tc.pausedP})
			}
			g := listGateway(t, tc.nodes, sbs)
			slices.SortFunc(sbs, func(a, b fakeSandbox) int {
				return listPos{a.started.UnixNano(), a.id}.cmp(listPos{b.started.UnixNano(), b.id})
			})
			for _, filter := range []string{"", "running"} {
				var want []string
				for _, s := range sbs {
					if filter == "" || !s.paused {
						want = append(want, s.id)
					}
				}
				q := ""
				if filter != "" {
					q = "&state=" + filter
				}
				got, pages := pageAll(t, g, "pdk_alice", tc.limit, q)
				if !slices.Equal(got, want) {
					t.Fatalf("state %q: paged %v, want %v", filter, got, want)
				}
				t.Logf("state %q: %d sandboxes in %d pages", filter, len(got), pages)
			}
		})
	}
	g := listGateway(t, 3, nil)
	for _, tok := range []string{"garbage", encodeE2BToken("pdk_bob", listPos{1, "sbabc"}), strings.Repeat("x", 5000)} {
		w := httptest.NewRecorder()
		g.e2bList(w, httptest.NewRequest("GET", "/v2/sandboxes?nextToken="+url.QueryEscape(tok), nil), "pdk_alice")
		var e struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		if w.Code != http.StatusBadRequest || json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Code != 400 || !strings.Contains(e.Message, "nextToken") {
			t.Errorf("token %.20q: %d %s, want 400 naming nextToken", tok, w.Code, w.Body)
		}
	}
}
