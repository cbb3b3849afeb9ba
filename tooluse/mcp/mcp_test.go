package mcp

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddock-sandbox/paddock/client"
	"github.com/paddock-sandbox/paddock/tooluse"
)

// connect opens an in-memory MCP session of a client with s.
func connect(t *testing.T, s *Server) (*sdk.ClientSession, error) {
	t.Helper()
	ct, st := sdk.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := s.MCP().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func newServer(t *testing.T, c *client.Client, opts Options) *Server {
	s := New(c, opts)
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// call calls the tool and returns its text contents joined and isError.
func call(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var texts []string
	for _, c := range res.Content {
		texts = append(texts, c.(*sdk.TextContent).Text)
	}
	return strings.Join(texts, "\n"), res.IsError
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestToolsMatchTooluse(t *testing.T) {
	_, c := newFakeDaemon(t)
	opts := tooluse.Options{Timeout: 2 * time.Minute}
	cs, err := connect(t, newServer(t, c, Options{Tools: opts}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*sdk.Tool{}
	for _, tl := range res.Tools {
		got[tl.Name] = tl
	}
	want := tooluse.Tools(opts)
	if len(got) != len(want) {
		t.Fatalf("%d tools, want %d", len(got), len(want))
	}
	for _, w := range want {
		g := got[w.Name]
		if g == nil || g.Description != w.Description {
			t.Fatalf("%s: got %+v", w.Name, g)
		}
		// Compare the schemas as JSON values.
		var ws any
		b, _ := json.Marshal(w.InputSchema)
		json.Unmarshal(b, &ws)
		if !reflect.DeepEqual(g.InputSchema, ws) {
			t.Errorf("%s schema: got %v, want %v", w.Name, g.InputSchema, ws)
		}
	}
}

func TestSessionSandbox(t *testing.T) {
	f, c := newFakeDaemon(t)
	s := newServer(t, c, Options{})
	cs, err := connect(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.live("")) != 0 {
		t.Fatal("sandbox created before the first call")
	}
	if text, isErr := call(t, cs, tooluse.WriteFile, map[string]any{"path": "/workspace/a.txt", "content": "hello"}); isErr {
		t.Fatal(text)
	}
	if text, isErr := call(t, cs, tooluse.ReadFile, map[string]any{"path": "/workspace/a.txt"}); isErr || text != "hello" {
		t.Fatalf("read_file: %q %v", text, isErr)
	}
	text, isErr := call(t, cs, tooluse.RunCommand, map[string]any{"command": "false"})
	if !isErr || !strings.Contains(text, `"exit_code":1`) {
		t.Fatalf("failing command: %q %v", text, isErr)
	}
	live := f.live("")
	if len(live) != 1 || live[0].Metadata[MetadataKey] == "" {
		t.Fatalf("live sandboxes: %+v", live)
	}
	if s.Sessions() != 1 {
		t.Fatalf("%d sessions", s.Sessions())
	}
	cs.Close()
	waitFor(t, "the sandbox to be deleted", func() bool { return len(f.live("")) == 0 && s.Sessions() == 0 })
}

func TestExpiredSandboxIsReplaced(t *testing.T) {
	f, c := newFakeDaemon(t)
	cs, err := connect(t, newServer(t, c, Options{}))
	if err != nil {
		t.Fatal(err)
	}
	call(t, cs, tooluse.WriteFile, map[string]any{"path": "/workspace/a.txt", "content": "hello"})
	old := f.live("")[0]
	f.expire(old.ID)
	text, isErr := call(t, cs, tooluse.RunCommand, map[string]any{"command": "echo hi"})
	if isErr || !strings.Contains(text, "is gone (expired)") || !strings.Contains(text, old.ID) || !strings.Contains(text, `"stdout":"echo hi"`) {
		t.Fatalf("after expiry: %q %v", text, isErr)
	}
	live := f.live("")
	if len(live) != 1 || live[0].ID == old.ID || live[0].Metadata[MetadataKey] != old.Metadata[MetadataKey] {
		t.Fatalf("live sandboxes: %+v", live)
	}
	// The next call uses the new sandbox without a note; the file is gone.
	text, isErr = call(t, cs, tooluse.ReadFile, map[string]any{"path": "/workspace/a.txt"})
	if !isErr || strings.Contains(text, "note:") {
		t.Fatalf("read_file after expiry: %q %v", text, isErr)
	}
}

func TestMaxSessions(t *testing.T) {
	_, c := newFakeDaemon(t)
	s := newServer(t, c, Options{MaxSessions: 1})
	if _, err := connect(t, s); err != nil {
		t.Fatal(err)
	}
	if _, err := connect(t, s); err == nil || !strings.Contains(err.Error(), "too many MCP sessions") {
		t.Fatalf("second session: %v", err)
	}
}

func TestPerCall(t *testing.T) {
	f, c := newFakeDaemon(t)
	cs, err := connect(t, newServer(t, c, Options{PerCall: true}))
	if err != nil {
		t.Fatal(err)
	}
	call(t, cs, tooluse.WriteFile, map[string]any{"path": "/workspace/a.txt", "content": "hello"})
	if text, isErr := call(t, cs, tooluse.ReadFile, map[string]any{"path": "/workspace/a.txt"}); !isErr {
		t.Fatalf("per-call read_file found the file: %q", text)
	}
	if live := f.live(""); len(live) != 0 || f.n != 2 {
		t.Fatalf("per-call: %d created, live %+v", f.n, live)
	}
}

func TestCloseDeletesSandboxes(t *testing.T) {
	f, c := newFakeDaemon(t)
	s := New(c, Options{})
	for range 2 {
		cs, err := connect(t, s)
		if err != nil {
			t.Fatal(err)
		}
		call(t, cs, tooluse.RunCommand, map[string]any{"command": "true"})
	}
	if n := len(f.live("")); n != 2 {
		t.Fatalf("%d live sandboxes, want 2", n)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(f.live("")); n != 0 || s.Sessions() != 0 {
		t.Fatalf("after Close: %d live sandboxes, %d sessions", n, s.Sessions())
	}
}
