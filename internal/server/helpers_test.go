package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/backend/fake"
	"github.com/paddock-sandbox/paddock/internal/manager"
	"github.com/paddock-sandbox/paddock/internal/server"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// TestMain lets the test binary serve as the fake agents' command shim.
func TestMain(m *testing.M) {
	fake.HandleShim()
	os.Exit(m.Run())
}

// Limits of the test server (see newTestServer).
const (
	testMaxSandboxes = 5
	testMaxPerKey    = 3
	testMaxFileBytes = 1 << 20
)

// testServer is a real server and manager over the fake backend, served
// by httptest with the daemon's own http.Server settings.
type testServer struct {
	t       *testing.T
	url     string
	alice   string // API keys
	bob     string
	backend *fake.Backend
}

// newTestServer is the one place the tests build a server: the
// manager's and the server's constructors are about to change, the HTTP
// API is not.
func newTestServer(t *testing.T) *testServer {
	t.Helper()
	return newTestServerWith(t, nil)
}

// newTestServerWith is newTestServer with the server's config changed by
// edit.
func newTestServerWith(t *testing.T, edit func(*server.Config)) *testServer {
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
	for _, k := range []*string{&ts.alice, &ts.bob} {
		if *k, _, err = keys.Create("k"); err != nil {
			t.Fatal(err)
		}
	}
	host, err := fake.NewHost(log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close() })
	ts.backend = fake.New(host, fake.Config{})

	cfg := manager.DefaultConfig()
	cfg.MaxSandboxes, cfg.MaxPerKey = testMaxSandboxes, testMaxPerKey
	mgr := manager.New(cfg, manager.Deps{Store: st, Backend: ts.backend, Log: log})
	if err := mgr.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	scfg := server.Config{MaxFileBytes: testMaxFileBytes, Version: "test"}
	if edit != nil {
		edit(&scfg)
	}
	srv := server.New(scfg, mgr, keys, log)
	hs := httptest.NewUnstartedServer(srv)
	hs.Config = srv.HTTPServer("")
	hs.Listener = srv.Listener(hs.Listener)
	hs.Start()
	t.Cleanup(hs.Close)
	ts.url = hs.URL
	return ts
}

// response is an answer read whole.
type response struct {
	status int
	header http.Header
	body   []byte
}

// errBody decodes an api.ErrorResponse answer.
func (r response) errBody(t *testing.T) api.ErrorBody {
	t.Helper()
	var e api.ErrorResponse
	if err := json.Unmarshal(r.body, &e); err != nil || e.Error.Code == "" {
		t.Fatalf("answer %d is not an error body: %q", r.status, r.body)
	}
	return e.Error
}

// do sends a request with key (none if empty). body is sent raw if it is
// []byte or string, else as JSON.
func (ts *testServer) do(method, path, key string, body any) response {
	ts.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			ts.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, ts.url+path, rd)
	if err != nil {
		ts.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	return readResponse(ts.t, resp)
}

// readResponse reads and closes resp.
func readResponse(t *testing.T, resp *http.Response) response {
	t.Helper()
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

// json sends a request and decodes a want-status answer into out.
func (ts *testServer) json(method, path, key string, body any, want int, out any) {
	ts.t.Helper()
	r := ts.do(method, path, key, body)
	if r.status != want {
		ts.t.Fatalf("%s %s: %d %s, want %d", method, path, r.status, r.body, want)
	}
	if out != nil {
		if err := json.Unmarshal(r.body, out); err != nil {
			ts.t.Fatalf("%s %s: %v in %q", method, path, err, r.body)
		}
	}
}

// create makes a sandbox for key.
func (ts *testServer) create(key string) api.Sandbox {
	ts.t.Helper()
	var sb api.Sandbox
	ts.json(http.MethodPost, "/v1/sandboxes", key, api.CreateSandboxRequest{}, http.StatusCreated, &sb)
	if sb.ID == "" || sb.State != "running" {
		ts.t.Fatalf("created sandbox %+v", sb)
	}
	return sb
}

// exec runs req in sandbox id and returns the result.
func (ts *testServer) exec(key, id string, req api.ExecRequest) api.ExecResult {
	ts.t.Helper()
	var res api.ExecResult
	ts.json(http.MethodPost, "/v1/sandboxes/"+id+"/exec", key, req, http.StatusOK, &res)
	return res
}

// eventually polls cond until it holds, within a generous deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
