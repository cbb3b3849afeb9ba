package cluster_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestE2BThroughGateway speaks the E2B SDK's wire format (REST control
// plane, Connect JSON process stream, /files) to a gateway's E2B endpoint
// in front of three nodes: a create placed on a node and recorded, a
// command, a file written and read back, the list, another key's 404 and
// the kill.
func TestE2BThroughGateway(t *testing.T) {
	l := newLab(t)
	l.e2b = true
	l.setup()
	l.addNodes(3)
	l.addGateways(1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gw := l.gwE2B[0]
	do := func(method, path string, hdr map[string]string, body []byte) (int, []byte) {
		t.Helper()
		st, _, b := e2bDo(t, ctx, method, gw+path, hdr, body)
		return st, b
	}
	alice := e2bKey(l.keys[0])

	st, b := do("POST", "/v2/sandboxes", alice, []byte(`{"templateID": "base", "timeout": 300}`))
	if st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, b)
	}
	var sb struct {
		SandboxID       string `json:"sandboxID"`
		EnvdAccessToken string `json:"envdAccessToken"`
	}
	if err := json.Unmarshal(b, &sb); err != nil || sb.SandboxID == "" || sb.EnvdAccessToken == "" {
		t.Fatalf("create answer %s: %v", b, err)
	}
	t.Logf("E2B sandbox %s on %s", sb.SandboxID, l.nodeOf(ctx, sb.SandboxID))

	envd := map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "E2b-Sandbox-Port": "49983",
		"X-Access-Token": sb.EnvdAccessToken, "Content-Type": "application/connect+json"}
	start := []byte(`{"process":{"cmd":"/bin/sh","args":["-c","echo hi; exit 3"]}}`)
	frame := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(start)))
	st, b = do("POST", "/process.Process/Start", envd, append(frame, start...))
	if st != http.StatusOK {
		t.Fatalf("process start: %d %s", st, b)
	}
	out, exit := "", any(nil)
	for len(b) >= 5 {
		n := binary.BigEndian.Uint32(b[1:5])
		var m struct {
			Event struct {
				Data *struct{ Stdout string } `json:"data"`
				End  *struct {
					ExitCode any `json:"exitCode"`
				} `json:"end"`
			} `json:"event"`
		}
		json.Unmarshal(b[5:5+n], &m)
		if d := m.Event.Data; d != nil {
			o, _ := base64.StdEncoding.DecodeString(d.Stdout)
			out += string(o)
		}
		if e := m.Event.End; e != nil {
			exit = e.ExitCode
		}
		b = b[5+n:]
	}
	if out != "hi\n" || exit != float64(3) {
		t.Fatalf("command through the gateway: output %q exit %v", out, exit)
	}

	files := map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "X-Access-Token": sb.EnvdAccessToken,
		"Content-Type": "application/octet-stream"}
	if st, b := do("POST", "/files?path=/tmp/e2b.txt", files, []byte("through the gateway")); st != http.StatusOK {
		t.Fatalf("upload: %d %s", st, b)
	}
	if st, b := do("GET", "/files?path=/tmp/e2b.txt", files, nil); st != http.StatusOK || string(b) != "through the gateway" {
		t.Fatalf("download: %d %q", st, b)
	}
	files["X-Access-Token"] = "pdk_envd_forged"
	if st, _ := do("GET", "/files?path=/tmp/e2b.txt", files, nil); st != http.StatusUnauthorized {
		t.Fatalf("download with a forged token: %d, want 401", st)
	}

	if st, b := do("GET", "/v2/sandboxes", alice, nil); st != http.StatusOK || !strings.Contains(string(b), sb.SandboxID) {
		t.Fatalf("list: %d %s", st, b)
	}
	bob := map[string]string{"X-API-KEY": l.keys[1]}
	if st, b := do("GET", "/sandboxes/"+sb.SandboxID, bob, nil); st != http.StatusNotFound {
		t.Fatalf("bob's get: %d %s, want 404", st, b)
	}
	if st, b := do("GET", "/v2/sandboxes", bob, nil); st != http.StatusOK || strings.Contains(string(b), sb.SandboxID) {
		t.Fatalf("bob's list: %d %s", st, b)
	}
	if st, b := do("DELETE", "/sandboxes/"+sb.SandboxID, alice, nil); st != http.StatusNoContent {
		t.Fatalf("kill: %d %s", st, b)
	}
	if st, _ := do("GET", "/sandboxes/"+sb.SandboxID, alice, nil); st != http.StatusNotFound {
		t.Fatalf("get after kill: %d, want 404", st)
	}
}

// TestE2BTemplatePlacement: E2B creates through the gateway are placed by
// their templateID like REST creates: a template (or an E2B alias of one)
// only node2 has lands on node2 and is made from that template, and a
// template no node has is answered as a node's own E2B endpoint answers
// it (400, E2B's error shape, naming it).
func TestE2BTemplatePlacement(t *testing.T) {
	l := newLab(t)
	l.e2b = true
	l.configs = map[int]string{
		1: `{"network": {"disabled": true}, "templates": {"tpl-e2b": {"runtime": "runc"}},
			"e2b": {"templates": {"my-alias": "tpl-e2b"}}}`,
	}
	l.setup()
	l.addNodes(3)
	l.addGateways(1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	post := func(url, body string) (int, []byte) {
		t.Helper()
		st, _, b := e2bDo(t, ctx, "POST", url+"/v2/sandboxes", e2bKey(l.keys[0]), []byte(body))
		return st, b
	}
	c := l.client(0, 0)
	for _, tc := range []struct{ id, template string }{
		{"tpl-e2b", "tpl-e2b"}, {"tpl-e2b", "tpl-e2b"}, {"my-alias", "tpl-e2b"}, {"tpl-e2b", "tpl-e2b"},
	} {
		st, b := post(l.gwE2B[0], `{"templateID": "`+tc.id+`", "timeout": 300}`)
		var sb struct {
			SandboxID  string `json:"sandboxID"`
			TemplateID string `json:"templateID"`
		}
		if st != http.StatusCreated || json.Unmarshal(b, &sb) != nil || sb.TemplateID != tc.id {
			t.Fatalf("create of %s: %d %s", tc.id, st, b)
		}
		t.Cleanup(func() {
			if s, err := c.Get(context.Background(), sb.SandboxID); err == nil {
				s.Kill(context.Background())
			}
		})
		if n := l.nodeOf(ctx, sb.SandboxID); n != "node2" {
			t.Fatalf("E2B create of %s on %s, want node2 (the only node with %s)", tc.id, n, tc.template)
		}
		s, err := c.Get(ctx, sb.SandboxID)
		if err != nil || s.Template != tc.template {
			t.Fatalf("sandbox %s made from %v (%v), want %s", sb.SandboxID, s, err, tc.template)
		}
	}
	// an unknown template: what node1's own E2B endpoint answers
	const bad = `{"templateID": "no-such-template"}`
	nst, nb := post("http://"+l.nodes[0].e2bListen, bad)
	gst, gb := post(l.gwE2B[0], bad)
	var ne, ge struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(nb, &ne) != nil || json.Unmarshal(gb, &ge) != nil || gst != nst || ge.Code != ne.Code ||
		gst != http.StatusBadRequest || !strings.Contains(ge.Message, "no-such-template") {
		t.Fatalf("unknown template: gateway %d %s, node %d %s; want the node's status and shape", gst, gb, nst, nb)
	}
	t.Logf("unknown template: gateway %d %s", gst, strings.TrimSpace(string(gb)))
}

// TestE2BListPagingThroughGateway: 7 sandboxes on 3 nodes, listed through
// the gateway with limit 2 following X-Next-Token (what the E2B SDKs'
// paginator does): every sandbox once, in creation order, pages of at
// most 2; a bad or another key's token is a 400 in E2B's error shape.
func TestE2BListPagingThroughGateway(t *testing.T) {
	l := newLab(t)
	l.e2b = true
	l.setup()
	l.addNodes(3)
	l.addGateways(1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	do := func(method, path, key string) (int, http.Header, []byte) {
		t.Helper()
		return e2bDo(t, ctx, method, l.gwE2B[0]+path, e2bKey(key), []byte(`{"templateID": "base", "timeout": 300}`))
	}
	var made []string
	onNode := map[string]int{}
	for range 7 {
		st, _, b := do("POST", "/v2/sandboxes", l.keys[0])
		var sb struct {
			SandboxID string `json:"sandboxID"`
		}
		if st != http.StatusCreated || json.Unmarshal(b, &sb) != nil {
			t.Fatalf("create: %d %s", st, b)
		}
		made = append(made, sb.SandboxID)
		onNode[l.nodeOf(ctx, sb.SandboxID)]++
		t.Cleanup(func() { do("DELETE", "/sandboxes/"+sb.SandboxID, l.keys[0]) })
	}
	if len(onNode) < 2 {
		t.Fatalf("7 creates all on one node: %v", onNode)
	}
	var got []string
	tok, pages := "", 0
	for pages = 1; ; pages++ {
		path := "/v2/sandboxes?limit=2"
		if tok != "" {
			path += "&nextToken=" + url.QueryEscape(tok)
		}
		st, hdr, b := do("GET", path, l.keys[0])
		var items []struct {
			SandboxID string `json:"sandboxID"`
		}
		if st != http.StatusOK || json.Unmarshal(b, &items) != nil || len(items) > 2 {
			t.Fatalf("page %d: %d %s", pages, st, b)
		}
		for _, it := range items {
			got = append(got, it.SandboxID)
		}
		if tok = hdr.Get("X-Next-Token"); tok == "" || pages > 20 {
			break
		}
		if pages == 1 { // the token is the caller's: bob's list refuses it
			if st, _, b := do("GET", "/v2/sandboxes?limit=2&nextToken="+url.QueryEscape(tok), l.keys[1]); st != http.StatusBadRequest {
				t.Fatalf("alice's token in bob's list: %d %s, want 400", st, b)
			}
		}
	}
	// creates were sequential, so creation order is the order they were made
	if !slices.Equal(got, made) {
		t.Fatalf("paged %v in %d pages, want %v", got, pages, made)
	}
	t.Logf("7 sandboxes on %v listed in %d pages of at most 2", onNode, pages)
	st, _, b := do("GET", "/v2/sandboxes?nextToken=not-a-token", l.keys[0])
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if st != http.StatusBadRequest || json.Unmarshal(b, &e) != nil || e.Code != 400 || !strings.Contains(e.Message, "nextToken") {
		t.Fatalf("bad token: %d %s, want 400 naming nextToken", st, b)
	}
}

// e2bKey is the headers of an E2B control-plane request with key.
func e2bKey(key string) map[string]string {
	return map[string]string{"X-API-KEY": key, "Content-Type": "application/json"}
}

// e2bDo sends an E2B API request (method, url, headers, body) and returns
// its status, headers and body. A ctx already done (in the test's
// cleanups) is replaced with a fresh one.
func e2bDo(t testing.TB, ctx context.Context, method, url string, hdr map[string]string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	if ctx.Err() != nil {
		ctx = context.Background()
	}
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}
