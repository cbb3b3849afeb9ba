package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

func TestResolvedURL(t *testing.T) {
	tests := []struct {
		name, base, env, want string
	}{
		{"default", "", "", DefaultURL},
		{"env", "", "http://env:1", "http://env:1"},
		{"field wins", "https://field:2/", "http://env:1", "https://field:2"},
		{"v1 suffix", "http://h:7419/v1/", "", "http://h:7419"},
		{"no scheme", "10.0.0.1:7419", "", "http://10.0.0.1:7419"},
		{"path prefix", "https://proxy/paddock", "", "https://proxy/paddock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvURL, tt.env)
			c := &Client{BaseURL: tt.base}
			if got := c.ResolvedURL(); got != tt.want {
				t.Errorf("ResolvedURL() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEndpoint(t *testing.T) {
	c := &Client{BaseURL: "http://h:1"}
	tests := []struct {
		name  string
		path  string
		query url.Values
		want  string
	}{
		{"plain", "/sandboxes", nil, "http://h:1/v1/sandboxes"},
		{"escaped id", sandboxPath("a/b c", "exec"), nil, "http://h:1/v1/sandboxes/a%2Fb%20c/exec"},
		{"process", (&Process{Process: api.Process{ID: "p?1"}, sb: c.Sandbox("sb")}).path("wait"), nil, "http://h:1/v1/sandboxes/sb/processes/p%3F1/wait"},
		{"file path", sandboxPath("sb", "files"), fileQuery("/tmp/a b&c=d?.txt"), "http://h:1/v1/sandboxes/sb/files?path=%2Ftmp%2Fa+b%26c%3Dd%3F.txt"},
		{"list options", "/sandboxes", ListOptions{Limit: 5, Cursor: "c1", State: "running", Metadata: map[string]string{"team": "a b"}}.query(),
			"http://h:1/v1/sandboxes?cursor=c1&limit=5&metadata.team=a+b&state=running"},
		{"empty list options", "/sandboxes", ListOptions{}.query(), "http://h:1/v1/sandboxes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := c.endpoint(tt.path, tt.query); got != tt.want {
				t.Errorf("endpoint = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestModeString(t *testing.T) {
	tests := []struct {
		mode os.FileMode
		want string
	}{
		{0, ""},
		{0o644, "0644"},
		{0o755 | os.ModeDir, "0755"},
		{0o7, "0007"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := modeString(tt.mode); got != tt.want {
				t.Errorf("modeString(%v) = %q, want %q", tt.mode, got, tt.want)
			}
		})
	}
}

// recorder is a test server that records requests and answers with a
// canned status and body.
type recorder struct {
	mu     sync.Mutex
	reqs   []*http.Request
	bodies []string
	status int
	body   string
}

func (r *recorder) set(status int, body string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status, r.body = status, body
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.bodies = append(r.bodies, string(b))
	status, body := r.status, r.body
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func TestRequestHeadersAndBodies(t *testing.T) {
	rec := &recorder{status: http.StatusCreated, body: `{"id":"sb1","state":"running","expires_at":"2030-01-01T00:00:00Z"}`}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	t.Setenv(EnvAPIKey, "k-env")

	c := &Client{BaseURL: srv.URL}
	sb, err := c.Create(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if sb.ID != "sb1" || sb.State != api.StateRunning {
		t.Errorf("sandbox = %+v", sb.Sandbox)
	}
	rec.set(http.StatusOK, `{"id":"sb1","expires_at":"2031-01-01T00:00:00Z"}`)
	if err := sb.SetTimeout(context.Background(), 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if sb.ExpiresAt.Year() != 2031 {
		t.Errorf("ExpiresAt not updated: %v", sb.ExpiresAt)
	}
	c.APIKey, c.UserAgent = "k-field", "test/1"
	if _, err := c.Sandbox("sb1").Files().Write(context.Background(), "a.txt", []byte("hi"), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		method, path, query, auth, ua, ctype, body string
	}{
		{"POST", "/v1/sandboxes", "", "Bearer k-env", "paddock-go/" + Version, "application/json", "{}"},
		{"POST", "/v1/sandboxes/sb1/timeout", "", "Bearer k-env", "paddock-go/" + Version, "application/json", `{"timeout_seconds":2}`},
		{"PUT", "/v1/sandboxes/sb1/files", "mode=0600&path=a.txt", "Bearer k-field", "test/1", "application/octet-stream", "hi"},
	}
	if len(rec.reqs) != len(tests) {
		t.Fatalf("%d requests, want %d", len(rec.reqs), len(tests))
	}
	for i, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			r := rec.reqs[i]
			got := []string{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get("User-Agent"), r.Header.Get("Content-Type"), rec.bodies[i]}
			want := []string{tt.method, tt.path, tt.query, tt.auth, tt.ua, tt.ctype, tt.body}
			for j := range got {
				if got[j] != want[j] {
					t.Errorf("field %d = %q, want %q", j, got[j], want[j])
				}
			}
		})
	}
}

func TestAllFollowsCursor(t *testing.T) {
	pages := map[string]api.ListSandboxesResponse{
		"":   {Sandboxes: []api.Sandbox{{ID: "a"}, {ID: "b"}}, NextCursor: "c1"},
		"c1": {Sandboxes: []api.Sandbox{{ID: "c"}}, NextCursor: "c2"},
		"c2": {Sandboxes: []api.Sandbox{{ID: "d"}}},
		"c3": {Sandboxes: []api.Sandbox{{ID: "x"}}, NextCursor: "c3"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("state") != "running" {
			http.Error(w, "state filter lost", http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(pages[r.URL.Query().Get("cursor")])
	}))
	defer srv.Close()
	c := New(srv.URL, "")

	var ids []string
	for sb, err := range c.All(context.Background(), ListOptions{State: "running"}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
	}
	if got := len(ids); got != 4 || ids[0] != "a" || ids[3] != "d" {
		t.Errorf("ids = %v, want [a b c d]", ids)
	}

	var n int
	for _, err := range c.All(context.Background(), ListOptions{State: "running"}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		break
	}
	if n != 1 {
		t.Errorf("break did not stop the iteration")
	}

	var lastErr error
	for _, err := range c.All(context.Background(), ListOptions{State: "running", Cursor: "c3"}) {
		lastErr = err
	}
	if lastErr == nil {
		t.Error("a repeating cursor did not end in an error")
	}

	for _, err := range c.All(context.Background(), ListOptions{}) {
		if !errors.Is(err, ErrBadRequest) {
			t.Errorf("err = %v, want ErrBadRequest", err)
		}
	}
}

func TestCloseIdempotent(t *testing.T) {
	rec := &recorder{status: http.StatusNotFound, body: `{"error":{"code":"not_found","message":"gone"}}`}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	sb := New(srv.URL, "").Sandbox("sb1")
	if err := sb.Kill(context.Background()); !errors.Is(err, ErrNotFound) {
		t.Errorf("Kill: err = %v, want ErrNotFound", err)
	}
	if err := sb.Close(); err != nil {
		t.Errorf("Close after 404: %v", err)
	}
	if err := sb.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if len(rec.reqs) != 2 {
		t.Errorf("%d requests, want 2 (Kill, first Close)", len(rec.reqs))
	}

	rec.set(http.StatusInternalServerError, "")
	sb = New(srv.URL, "").Sandbox("sb2")
	if err := sb.Close(); !errors.Is(err, ErrInternal) {
		t.Errorf("Close on 500: err = %v, want ErrInternal", err)
	}
	rec.set(http.StatusNoContent, "")
	if err := sb.Close(); err != nil {
		t.Errorf("Close retry: %v", err)
	}
}
