package integration

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
	"github.com/paddock-sandbox/paddock/tooluse"
	"github.com/paddock-sandbox/paddock/tooluse/mcp"
)

var mcpClient = sdk.NewClient(&sdk.Implementation{Name: "paddock-integration", Version: "1"}, nil)

// mcpStdio starts `paddock mcp args...` for key 0 and connects to it.
func mcpStdio(t *testing.T, args ...string) *sdk.ClientSession {
	requireDaemon(t)
	t.Helper()
	cmd := exec.Command(filepath.Join(*binDir, "paddock"), append([]string{"mcp"}, args...)...)
	cmd.Env = append(os.Environ(), "PADDOCK_URL="+shared.url, "PADDOCK_API_KEY="+shared.keys[0])
	cmd.Stderr = os.Stderr
	cs, err := mcpClient.Connect(ctxT(t), &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to paddock mcp: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// bearer adds an API key to every request.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// mcpHTTP connects to the shared daemon's /v1/mcp with key ("" for none).
func mcpHTTP(t *testing.T, key string) (*sdk.ClientSession, error) {
	requireDaemon(t)
	t.Helper()
	return mcpHTTPOn(t, shared, key)
}

func mcpHTTPOn(t *testing.T, d *daemon, key string) (*sdk.ClientSession, error) {
	t.Helper()
	hc := http.DefaultClient
	if key != "" {
		hc = &http.Client{Transport: bearer(key)}
	}
	tr := &sdk.StreamableClientTransport{Endpoint: d.url + "/v1/mcp", HTTPClient: hc, MaxRetries: -1}
	cs, err := mcpClient.Connect(ctxT(t), tr, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// mcpCall calls a tool and returns its text contents, joined, and isError.
func mcpCall(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(ctxT(t), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var texts []string
	for _, c := range res.Content {
		tc, ok := c.(*sdk.TextContent)
		if !ok {
			t.Fatalf("%s: content %T, want text", name, c)
		}
		texts = append(texts, tc.Text)
	}
	return strings.Join(texts, "\n"), res.IsError
}

// execOutput decodes the JSON result of a run_* tool.
func execOutput(t *testing.T, text string) tooluse.ExecOutput {
	t.Helper()
	var out tooluse.ExecOutput
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		t.Fatalf("not an exec result: %q", text)
	}
	return out
}

// liveSandboxes lists key's live sandboxes with the metadata.
func liveSandboxes(t *testing.T, key int, meta map[string]string) []api.Sandbox {
	t.Helper()
	var out []api.Sandbox
	for sb, err := range shared.client(key).All(ctxT(t), client.ListOptions{Metadata: meta}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sb)
	}
	return out
}

// waitNoSandbox waits until key has no live sandbox with the metadata.
func waitNoSandbox(t *testing.T, key int, meta map[string]string) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for len(liveSandboxes(t, key, meta)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("sandboxes with %v still live: %+v", meta, liveSandboxes(t, key, meta))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestMCPStdio(t *testing.T) {
	tag := map[string]string{"mcp_test": rand.Text()}
	cs := mcpStdio(t, "--meta", "mcp_test="+tag["mcp_test"])

	res, err := cs.ListTools(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*sdk.Tool{}
	for _, tl := range res.Tools {
		got[tl.Name] = tl
	}
	want := tooluse.Tools(tooluse.Options{Tools: tooluse.AllToolNames()}) // run_code included
	if n := len(tooluse.AllToolNames()); len(got) != n || len(want) != n {
		t.Fatalf("tools/list: %d tools", len(got))
	}
	for _, w := range want {
		var schema any
		b, _ := json.Marshal(w.InputSchema)
		json.Unmarshal(b, &schema)
		if g := got[w.Name]; g == nil || g.Description != w.Description || !reflect.DeepEqual(g.InputSchema, schema) {
			t.Fatalf("tool %s: got %+v, want %+v", w.Name, g, w)
		}
	}
	if n := len(liveSandboxes(t, 0, tag)); n != 0 {
		t.Fatalf("%d sandboxes before the first call", n)
	}

	text, isErr := mcpCall(t, cs, tooluse.RunPython, map[string]any{"code": "print(6*7)"})
	if out := execOutput(t, text); isErr || out.ExitCode == nil || *out.ExitCode != 0 || out.Stdout != "42\n" {
		t.Fatalf("run_python: %q isError=%v", text, isErr)
	}
	text, isErr = mcpCall(t, cs, tooluse.RunCommand, map[string]any{"command": "echo oops >&2; exit 3"})
	if out := execOutput(t, text); !isErr || out.ExitCode == nil || *out.ExitCode != 3 || out.Stderr != "oops\n" {
		t.Fatalf("failing run_command: %q isError=%v", text, isErr)
	}
	if text, isErr = mcpCall(t, cs, tooluse.WriteFile, map[string]any{"path": "notes/a.txt", "content": "kept\n"}); isErr {
		t.Fatalf("write_file: %q", text)
	}
	text, isErr = mcpCall(t, cs, tooluse.RunCommand, map[string]any{"command": "cat /workspace/notes/a.txt"})
	if out := execOutput(t, text); isErr || out.Stdout != "kept\n" {
		t.Fatalf("file did not persist: %q", text)
	}
	if text, isErr = mcpCall(t, cs, tooluse.ReadFile, map[string]any{"path": "/workspace/notes/a.txt"}); isErr || text != "kept\n" {
		t.Fatalf("read_file: %q %v", text, isErr)
	}

	live := liveSandboxes(t, 0, tag)
	if len(live) != 1 || live[0].State != api.StateRunning || live[0].Metadata[mcp.MetadataKey] == "" {
		t.Fatalf("want one running sandbox tagged %s: %+v", mcp.MetadataKey, live)
	}
	cs.Close()
	waitNoSandbox(t, 0, tag)
}

func TestMCPSandboxExpiry(t *testing.T) {
	tag := map[string]string{"mcp_test": rand.Text()}
	cs := mcpStdio(t, "--sandbox-timeout", "2", "--meta", "mcp_test="+tag["mcp_test"])
	if text, isErr := mcpCall(t, cs, tooluse.WriteFile, map[string]any{"path": "a.txt", "content": "x"}); isErr {
		t.Fatalf("write_file: %q", text)
	}
	old := liveSandboxes(t, 0, tag)
	if len(old) != 1 {
		t.Fatalf("%d sandboxes", len(old))
	}
	waitNoSandbox(t, 0, tag) // the lease runs out
	text, isErr := mcpCall(t, cs, tooluse.RunCommand, map[string]any{"command": "ls /workspace"})
	if isErr || !strings.Contains(text, old[0].ID) || !strings.Contains(text, "new, empty sandbox") {
		t.Fatalf("call after expiry: %q isError=%v", text, isErr)
	}
	live := liveSandboxes(t, 0, tag)
	if len(live) != 1 || live[0].ID == old[0].ID || live[0].Metadata[mcp.MetadataKey] != old[0].Metadata[mcp.MetadataKey] {
		t.Fatalf("after expiry: %+v", live)
	}
}

func TestMCPHTTP(t *testing.T) {
	requireDaemon(t)
	cs1, err := mcpHTTP(t, shared.keys[0])
	if err != nil {
		t.Fatal(err)
	}
	cs2, err := mcpHTTP(t, shared.keys[0])
	if err != nil {
		t.Fatal(err)
	}
	if cs1.ID() == "" || cs1.ID() == cs2.ID() {
		t.Fatalf("session ids %q %q", cs1.ID(), cs2.ID())
	}
	res, err := cs1.ListTools(ctxT(t), nil)
	if err != nil || len(res.Tools) != len(tooluse.AllToolNames()) {
		t.Fatalf("tools/list: %v %v", res, err)
	}
	if text, isErr := mcpCall(t, cs1, tooluse.WriteFile, map[string]any{"path": "one.txt", "content": "1"}); isErr {
		t.Fatalf("write_file: %q", text)
	}
	text, isErr := mcpCall(t, cs2, tooluse.RunCommand, map[string]any{"command": "ls one.txt"})
	if !isErr || execOutput(t, text).ExitCode == nil {
		t.Fatalf("session 2 sees session 1's file: %q", text)
	}
	text, isErr = mcpCall(t, cs1, tooluse.RunPython, map[string]any{"code": "print(open('one.txt').read())"})
	if isErr || execOutput(t, text).Stdout != "1\n" {
		t.Fatalf("run_python: %q", text)
	}

	tag1, tag2 := map[string]string{mcp.MetadataKey: cs1.ID()}, map[string]string{mcp.MetadataKey: cs2.ID()}
	sb1, sb2 := liveSandboxes(t, 0, tag1), liveSandboxes(t, 0, tag2)
	if len(sb1) != 1 || len(sb2) != 1 || sb1[0].ID == sb2[0].ID {
		t.Fatalf("want one sandbox per session: %+v %+v", sb1, sb2)
	}
	cs1.Close()
	waitNoSandbox(t, 0, tag1)
	if text, isErr = mcpCall(t, cs2, tooluse.RunCommand, map[string]any{"command": "true"}); isErr {
		t.Fatalf("session 2 after closing session 1: %q", text)
	}
	cs2.Close()
	waitNoSandbox(t, 0, tag2)
}

func TestMCPHTTPAuth(t *testing.T) {
	requireDaemon(t)
	for name, auth := range map[string]string{"none": "", "unknown key": "Bearer pdk_nope", "not bearer": "Basic eDp5"} {
		req, _ := http.NewRequest("POST", shared.url+"/v1/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body api.ErrorResponse
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || body.Error.Code != api.CodeUnauthorized {
			t.Fatalf("%s: %d %+v", name, resp.StatusCode, body)
		}
	}
	if _, err := mcpHTTP(t, ""); err == nil {
		t.Fatal("MCP client connected without an API key")
	}

	// Sandboxes belong to the key of the session; another key cannot use it.
	bob, err := mcpHTTP(t, shared.keys[1])
	if err != nil {
		t.Fatal(err)
	}
	if text, isErr := mcpCall(t, bob, tooluse.RunCommand, map[string]any{"command": "true"}); isErr {
		t.Fatalf("bob: %q", text)
	}
	tag := map[string]string{mcp.MetadataKey: bob.ID()}
	if n, m := len(liveSandboxes(t, 1, tag)), len(liveSandboxes(t, 0, tag)); n != 1 || m != 0 {
		t.Fatalf("bob's session sandbox: %d under bob, %d under alice", n, m)
	}
	req, _ := http.NewRequestWithContext(context.Background(), "POST", shared.url+"/v1/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+shared.keys[0])
	req.Header.Set("Mcp-Session-Id", bob.ID())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("alice using bob's session: %d", resp.StatusCode)
	}
	bob.Close()
	waitNoSandbox(t, 1, tag)
}

// TestMCPDaemonShutdown stops the daemon with SIGTERM while an MCP session
// is open: the session's sandbox is deleted (MCP sessions do not survive a
// restart) and the daemon still exits promptly.
func TestMCPDaemonShutdown(t *testing.T) {
	requireDaemon(t)
	d, err := startDaemon(daemonOptions{extraArgs: []string{"--uid-base", strconv.Itoa(crashUIDBase + 300*65536), "--max-sandboxes", "10"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.shutdown()
	cs, err := mcpHTTPOn(t, d, d.keys[0])
	if err != nil {
		t.Fatal(err)
	}
	if text, isErr := mcpCall(t, cs, tooluse.RunCommand, map[string]any{"command": "true"}); isErr {
		t.Fatalf("run_command: %q", text)
	}
	var id string
	for sb, err := range d.client(0).All(ctxT(t), client.ListOptions{Metadata: map[string]string{mcp.MetadataKey: cs.ID()}}) {
		if err != nil {
			t.Fatal(err)
		}
		id = sb.ID
	}
	if id == "" {
		t.Fatal("no sandbox for the MCP session")
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- d.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("paddockd exited with %v after SIGTERM", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("paddockd did not exit within 20s of SIGTERM with an MCP session open")
	}
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	sb, err := d.client(0).Get(ctxT(t), id)
	if err != nil || sb.State != api.StateTerminated {
		t.Fatalf("the MCP session's sandbox after shutdown: %+v %v", sb, err)
	}
}
