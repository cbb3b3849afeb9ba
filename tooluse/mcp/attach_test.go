package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/tooluse"
)

// connectWith opens an in-memory MCP session whose client sends caps.
func connectWith(t *testing.T, s *Server, caps *sdk.ClientCapabilities) (*sdk.ClientSession, error) {
	t.Helper()
	ct, st := sdk.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := s.MCP().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{Capabilities: caps}).Connect(ctx, ct, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func TestAttach(t *testing.T) {
	f, c := newFakeDaemon(t)
	sb, err := c.Create(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, c, Options{Attach: sb.ID})
	cs, err := connect(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if text, isErr := call(t, cs, tooluse.WriteFile, map[string]any{"path": "/workspace/a.txt", "content": "hi"}); isErr {
		t.Fatal(text)
	}
	if got := string(f.boxes[sb.ID].files["/workspace/a.txt"]); got != "hi" {
		t.Fatalf("the call did not run in the attached sandbox: %q", got)
	}
	cs.Close()
	waitFor(t, "the session to end", func() bool { return s.Sessions() == 0 })
	if live := f.live(""); len(live) != 1 || live[0].ID != sb.ID {
		t.Fatalf("the attached sandbox must outlive the session: live %+v", live)
	}
	if len(f.creates) != 1 {
		t.Fatalf("%d creates, want only the test's own", len(f.creates))
	}

	// Gone: an error result, never a replacement.
	cs, err = connect(t, s)
	if err != nil {
		t.Fatal(err)
	}
	f.expire(sb.ID)
	text, isErr := call(t, cs, tooluse.RunCommand, map[string]any{"command": "true"})
	if !isErr || !strings.Contains(text, "attached to, is gone") {
		t.Fatalf("call in a gone attached sandbox: %q %v", text, isErr)
	}
	if len(f.creates) != 1 {
		t.Fatal("an attached session created a sandbox")
	}

	// A missing sandbox fails the initialize.
	s2 := newServer(t, c, Options{Attach: "sb_nope"})
	if _, err := connect(t, s2); err == nil || !strings.Contains(err.Error(), "sb_nope") {
		t.Fatalf("attach to a missing sandbox: err = %v", err)
	}
}

func TestClientConfig(t *testing.T) {
	f, c := newFakeDaemon(t)
	cfg := map[string]any{"template": "python-3.12", "sandbox_timeout": 900, "timeout": 5, "network": "off"}
	caps := &sdk.ClientCapabilities{Experimental: map[string]any{MetaKey: cfg}}

	// Not allowed: ignored.
	cs, err := connectWith(t, newServer(t, c, Options{}), caps)
	if err != nil {
		t.Fatal(err)
	}
	call(t, cs, tooluse.RunCommand, map[string]any{"command": "true"})
	if got := f.creates[len(f.creates)-1]; got.Template != "" || got.TimeoutSeconds != 0 {
		t.Fatalf("config applied without ClientConfig: %+v", got)
	}

	cs, err = connectWith(t, newServer(t, c, Options{ClientConfig: true, Sandbox: &api.CreateSandboxRequest{TimeoutSeconds: 60}}), caps)
	if err != nil {
		t.Fatal(err)
	}
	call(t, cs, tooluse.RunCommand, map[string]any{"command": "true"})
	got := f.creates[len(f.creates)-1]
	if got.Template != "python-3.12" || got.TimeoutSeconds != 900 || got.Network == nil || got.Network.Mode != "off" {
		t.Fatalf("create request %+v, want the session's config", got)
	}
	if f.lastExec.TimeoutSeconds != 5 {
		t.Fatalf("exec timeout %v, want 5", f.lastExec.TimeoutSeconds)
	}

	// A bad config fails the initialize with a message naming the field.
	bad := &sdk.ClientCapabilities{Experimental: map[string]any{MetaKey: map[string]any{"sandbox": "sb_1", "template": "x"}}}
	if _, err := connectWith(t, newServer(t, c, Options{ClientConfig: true}), bad); err == nil || !strings.Contains(err.Error(), "excludes template") {
		t.Fatalf("bad config: err = %v", err)
	}
	unknown := &sdk.ClientCapabilities{Experimental: map[string]any{MetaKey: map[string]any{"lease": 5}}}
	if _, err := connectWith(t, newServer(t, c, Options{ClientConfig: true}), unknown); err == nil || !strings.Contains(err.Error(), "lease") {
		t.Fatalf("unknown field: err = %v", err)
	}
}

func TestConfigHeaderOverHTTP(t *testing.T) {
	f, c := newFakeDaemon(t)
	s := newServer(t, c, Options{ClientConfig: true})
	hs := httptest.NewServer(s.HTTPHandler(nil))
	t.Cleanup(hs.Close)
	hc := &http.Client{Transport: headerRT{ConfigHeader: `{"template": "from-header"}`}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call(t, cs, tooluse.RunCommand, map[string]any{"command": "true"})
	if got := f.creates[len(f.creates)-1].Template; got != "from-header" {
		t.Fatalf("template %q, want from-header", got)
	}
}

type headerRT map[string]string

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func TestParseQuery(t *testing.T) {
	for _, tc := range []struct {
		q    string
		want *SessionConfig
		err  string
	}{
		{"", nil, ""},
		{"sandbox=sb_1", &SessionConfig{Sandbox: "sb_1"}, ""},
		{"template=python&sandbox_timeout=1h&timeout=2.5", &SessionConfig{Template: "python", SandboxTimeout: 3600, Timeout: 2.5}, ""},
		{"network=off", &SessionConfig{Network: &api.NetworkPolicy{Mode: "off"}}, ""},
		{"allow=a.example,b.example&allow=c.example", &SessionConfig{Network: &api.NetworkPolicy{Mode: "allowlist", Allow: []string{"a.example", "b.example", "c.example"}}}, ""},
		{"timeout=-1", nil, "timeout must be"},
		{"timeout=soon", nil, "timeout must be seconds"},
		{"sandbox_timeout=1.5", nil, "whole seconds"},
		{"sandbox_timeout=100000", nil, "at most 86400"},
		{"network=restricted", nil, "network must be"},
		{"sandbox=sb_1&template=x", nil, "excludes"},
	} {
		t.Run(tc.q, func(t *testing.T) {
			q, _ := url.ParseQuery(tc.q)
			got, err := ParseQuery(q)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseQuery = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
