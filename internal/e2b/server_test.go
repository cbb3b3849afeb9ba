package e2b_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/internal/agent"
	"github.com/paddock-sandbox/paddock/internal/backend/fake"
	"github.com/paddock-sandbox/paddock/internal/e2b"
	"github.com/paddock-sandbox/paddock/internal/manager"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// TestMain lets the test binary serve as the fake agents' command shim.
func TestMain(m *testing.M) {
	fake.HandleShim()
	os.Exit(m.Run())
}

// testServer is the E2B endpoint over a real manager and the fake backend.
type testServer struct {
	t     *testing.T
	url   string
	key   string
	agent *agent.Client // the sandboxes' agents, straight
}

func newTestServer(t *testing.T) *testServer {
	t.Helper()
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	keys, err := store.OpenKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t}
	if ts.key, _, err = keys.Create("k"); err != nil {
		t.Fatal(err)
	}
	host, err := fake.NewHost(log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close() })
	backend := fake.New(host, fake.Config{})
	ts.agent = agent.NewClient(backend.Dial)
	mgr := manager.New(manager.DefaultConfig(), manager.Deps{Store: st, Backend: backend, Log: log})
	if err := mgr.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	tokenKey, err := st.PortKey()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := e2b.New(e2b.Config{Domain: "e2b.test", Templates: map[string]string{"code-interpreter-v1": "base"},
		TokenKey: tokenKey}, mgr, keys, log)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	ts.url = hs.URL
	return ts
}

// do sends a request with headers; body is JSON-encoded unless []byte.
func (ts *testServer) do(method, path string, hdr map[string]string, body any) (int, http.Header, []byte) {
	ts.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, _ := json.Marshal(b)
		rd = bytes.NewReader(data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, ts.url+path, rd)
	for k, v := range hdr {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, data
}

type created struct {
	SandboxID       string `json:"sandboxID"`
	TemplateID      string `json:"templateID"`
	EnvdAccessToken string `json:"envdAccessToken"`
	EnvdVersion     string `json:"envdVersion"`
	Domain          string `json:"domain"`
}

func (ts *testServer) create(body any) created {
	ts.t.Helper()
	st, _, data := ts.do("POST", "/v2/sandboxes", map[string]string{"X-API-KEY": ts.key}, body)
	if st != http.StatusCreated {
		ts.t.Fatalf("create: %d %s", st, data)
	}
	var c created
	json.Unmarshal(data, &c)
	return c
}

func TestControlPlane(t *testing.T) {
	ts := newTestServer(t)
	key := map[string]string{"X-API-KEY": ts.key}
	sb := ts.create(map[string]any{"templateID": "code-interpreter-v1", "metadata": map[string]string{"a": "b c"}, "timeout": 60})
	if sb.SandboxID == "" || sb.EnvdAccessToken == "" || sb.EnvdVersion == "" || sb.Domain != "e2b.test" ||
		sb.TemplateID != "code-interpreter-v1" {
		t.Fatalf("created %+v", sb)
	}
	for _, tc := range []struct {
		name, method, path string
		hdr                map[string]string
		body               any
		want               int
	}{
		{"no key", "GET", "/v2/sandboxes", nil, nil, 401},
		{"wrong key", "GET", "/v2/sandboxes", map[string]string{"X-API-KEY": "e2b_nope"}, nil, 401},
		{"hex key", "GET", "/v2/sandboxes", map[string]string{"X-API-KEY": "e2b_" + hex.EncodeToString([]byte(ts.key))}, nil, 200},
		{"bearer key", "GET", "/v2/sandboxes", map[string]string{"Authorization": "Bearer " + ts.key}, nil, 200},
		{"get", "GET", "/sandboxes/" + sb.SandboxID, key, nil, 200},
		{"get unknown", "GET", "/sandboxes/sbunknown", key, nil, 404},
		{"reserved metadata", "POST", "/v2/sandboxes", key, map[string]any{"metadata": map[string]string{"paddock.e2b/x": "1"}}, 400},
		{"unknown template", "POST", "/v2/sandboxes", key, map[string]any{"templateID": "nope"}, 400},
		{"mcp refused", "POST", "/v2/sandboxes", key, map[string]any{"mcp": map[string]any{"x": 1}}, 501},
		{"bad timeout", "POST", "/sandboxes/" + sb.SandboxID + "/timeout", key, map[string]any{"timeout": 0}, 400},
		{"timeout", "POST", "/sandboxes/" + sb.SandboxID + "/timeout", key, map[string]any{"timeout": 120}, 204},
		{"bad state filter", "GET", "/v2/sandboxes?state=dead", key, nil, 400},
		{"bad limit", "GET", "/v2/sandboxes?limit=0", key, nil, 400},
		{"metrics", "GET", "/sandboxes/" + sb.SandboxID + "/metrics", key, nil, 200},
		{"logs", "GET", "/v2/sandboxes/" + sb.SandboxID + "/logs", key, nil, 200},
		{"connect running", "POST", "/v2/sandboxes/" + sb.SandboxID + "/connect", key, map[string]any{"timeout": 30}, 200},
		{"not served", "GET", "/volumes", key, nil, 501},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _, data := ts.do(tc.method, tc.path, tc.hdr, tc.body)
			if st != tc.want {
				t.Fatalf("%d %s, want %d", st, data, tc.want)
			}
			if st >= 400 {
				var e struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				}
				if json.Unmarshal(data, &e) != nil || e.Code != st || e.Message == "" {
					t.Fatalf("error body %s", data)
				}
			}
		})
	}
	// The metadata filter arrives percent-encoded twice, as the SDKs send it.
	st, _, data := ts.do("GET", "/v2/sandboxes?metadata="+"a%3Db%252520c", key, nil)
	if st != 200 || !strings.Contains(string(data), sb.SandboxID) {
		t.Fatalf("list by metadata: %d %s", st, data)
	}
	if _, _, data := ts.do("GET", "/v2/sandboxes?metadata=a%3Dz", key, nil); string(bytes.TrimSpace(data)) != "[]" {
		t.Fatalf("list by other metadata: %s", data)
	}
	if st, _, _ := ts.do("DELETE", "/sandboxes/"+sb.SandboxID, key, nil); st != 204 {
		t.Fatalf("kill: %d", st)
	}
	if st, _, _ := ts.do("DELETE", "/sandboxes/"+sb.SandboxID, key, nil); st != 404 {
		t.Fatalf("kill again: %d", st)
	}
}

// envelope frames one Connect stream message.
func envelope(flags byte, msg []byte) []byte {
	out := make([]byte, 5, 5+len(msg))
	out[0] = flags
	binary.BigEndian.PutUint32(out[1:], uint32(len(msg)))
	return append(out, msg...)
}

// frames splits a Connect stream answer into its messages.
func frames(t *testing.T, data []byte) (msgs []map[string]any, end map[string]any) {
	t.Helper()
	for len(data) > 0 {
		if len(data) < 5 {
			t.Fatalf("truncated frame")
		}
		n := binary.BigEndian.Uint32(data[1:5])
		var m map[string]any
		if err := json.Unmarshal(data[5:5+n], &m); err != nil {
			t.Fatalf("frame %q: %v", data[5:5+n], err)
		}
		if data[0]&2 != 0 {
			end = m
		} else {
			msgs = append(msgs, m)
		}
		data = data[5+n:]
	}
	return msgs, end
}

func TestProcessStream(t *testing.T) {
	ts := newTestServer(t)
	sb := ts.create(nil)
	envd := map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "E2b-Sandbox-Port": "49983",
		"X-Access-Token": sb.EnvdAccessToken, "Content-Type": "application/connect+json"}
	start := []byte(`{"process":{"cmd":"/bin/sh","args":["-c","echo hi; exit 3"]}}`)
	st, hdr, data := ts.do("POST", "/process.Process/Start", envd, envelope(0, start))
	if st != 200 || hdr.Get("Content-Type") != "application/connect+json" {
		t.Fatalf("start: %d %s", st, data)
	}
	msgs, end := frames(t, data)
	if end == nil || end["error"] != nil || len(msgs) < 3 {
		t.Fatalf("stream %v end %v", msgs, end)
	}
	var out string
	var exit any
	for _, m := range msgs {
		ev := m["event"].(map[string]any)
		if d, ok := ev["data"].(map[string]any); ok {
			b, _ := base64.StdEncoding.DecodeString(d["stdout"].(string))
			out += string(b)
		}
		if e, ok := ev["end"].(map[string]any); ok {
			exit = e["exitCode"]
		}
	}
	if out != "hi\n" || exit != float64(3) {
		t.Fatalf("output %q exit %v in %v", out, exit, msgs)
	}
	// envd keeps no process that ended: neither does the agent, so that
	// the record does not keep it from hibernating.
	if list, err := ts.agent.ListProcesses(context.Background(), sb.SandboxID); err != nil || len(list.Processes) != 0 {
		t.Fatalf("agent's records after the end: %+v %v", list, err)
	}

	// The same call by host name, E2B_DOMAIN style.
	byHost := map[string]string{"Host": "49983-" + sb.SandboxID + ".e2b.test", "X-Access-Token": sb.EnvdAccessToken,
		"Content-Type": "application/json"}
	if st, _, data := ts.do("POST", "/process.Process/List", byHost, []byte(`{}`)); st != 200 || !strings.Contains(string(data), "processes") {
		t.Fatalf("list by host: %d %s", st, data)
	}

	for _, tc := range []struct {
		name, path string
		hdr        map[string]string
		body       []byte
		status     int
		code       string
	}{
		{"wrong token", "/process.Process/List", map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "X-Access-Token": "x", "Content-Type": "application/json"}, []byte(`{}`), 401, "unauthenticated"},
		{"binary codec", "/process.Process/List", map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "X-Access-Token": sb.EnvdAccessToken, "Content-Type": "application/proto"}, []byte{}, 501, "unimplemented"},
		{"unknown method", "/process.Process/Nope", map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "X-Access-Token": sb.EnvdAccessToken, "Content-Type": "application/json"}, []byte(`{}`), 501, "unimplemented"},
		{"stat missing", "/filesystem.Filesystem/Stat", map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "X-Access-Token": sb.EnvdAccessToken, "Content-Type": "application/json"}, []byte(`{"path":"/nope/x"}`), 404, "not_found"},
		{"bad signal", "/process.Process/SendSignal", map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "X-Access-Token": sb.EnvdAccessToken, "Content-Type": "application/json"}, []byte(`{"process":{"pid":1},"signal":"SIGNAL_SIGHUP"}`), 400, "invalid_argument"},
		{"kill unknown pid", "/process.Process/SendSignal", map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "X-Access-Token": sb.EnvdAccessToken, "Content-Type": "application/json"}, []byte(`{"process":{"pid":999999},"signal":"SIGNAL_SIGKILL"}`), 404, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _, data := ts.do("POST", tc.path, tc.hdr, tc.body)
			var e struct{ Code string }
			json.Unmarshal(data, &e)
			if st != tc.status || e.Code != tc.code {
				t.Fatalf("%d %s, want %d %s", st, data, tc.status, tc.code)
			}
		})
	}

	// A stream request for a sandbox that is gone: 502, as E2B's edge.
	key := map[string]string{"X-API-KEY": ts.key}
	ts.do("DELETE", "/sandboxes/"+sb.SandboxID, key, nil)
	if st, _, _ := ts.do("POST", "/process.Process/Start", envd, envelope(0, start)); st != http.StatusBadGateway {
		t.Fatalf("start in a killed sandbox: %d", st)
	}
}
