package integration

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
	"github.com/paddock-sandbox/paddock/tooluse"
	"github.com/paddock-sandbox/paddock/tooluse/mcp"
)

// mcpHTTPQuery connects to d's /v1/mcp?query with key.
func mcpHTTPQuery(t *testing.T, d *daemon, key, query string) (*sdk.ClientSession, error) {
	t.Helper()
	tr := &sdk.StreamableClientTransport{Endpoint: d.url + "/v1/mcp?" + query,
		HTTPClient: &http.Client{Transport: bearer(key)}, MaxRetries: -1}
	cs, err := mcpClient.Connect(ctxT(t), tr, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// TestMCPAttach attaches MCP sessions (HTTP ?sandbox=ID and `paddock mcp
// --sandbox ID`) to an existing sandbox: the calls run there, the
// sandbox outlives the sessions, and another key cannot attach to it.
func TestMCPAttach(t *testing.T) {
	requireDaemon(t)
	sb := newSandbox(t, nil)
	if _, err := sb.Files().Write(ctxT(t), "/workspace/before.txt", []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cs, err := mcpHTTPQuery(t, shared, shared.keys[0], "sandbox="+sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	text, isErr := mcpCall(t, cs, tooluse.RunCommand, map[string]any{"command": "cat before.txt; echo http > from-http.txt"})
	if out := execOutput(t, text); isErr || out.Stdout != "mine\n" {
		t.Fatalf("call in the attached sandbox: %q", text)
	}
	cs.Close()

	stdio := mcpStdio(t, "--sandbox", sb.ID)
	text, isErr = mcpCall(t, stdio, tooluse.ReadFile, map[string]any{"path": "from-http.txt"})
	if isErr || text != "http\n" {
		t.Fatalf("stdio session attached to the same sandbox: %q %v", text, isErr)
	}
	stdio.Close()
	time.Sleep(500 * time.Millisecond) // a deletion, were there one, would be under way
	got, err := shared.client(0).Get(ctxT(t), sb.ID)
	if err != nil || got.State != api.StateRunning {
		t.Fatalf("the attached sandbox after its sessions ended: %+v %v", got, err)
	}

	// Another key's session cannot attach: the initialize fails.
	if _, err := mcpHTTPQuery(t, shared, shared.keys[1], "sandbox="+sb.ID); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("bob attaching to alice's sandbox: err = %v", err)
	}
}

// TestMCPHTTPOptions creates a session's sandbox with the options in the
// /v1/mcp query, and refuses bad ones with 400 before any session.
func TestMCPHTTPOptions(t *testing.T) {
	requireDaemon(t)
	cs, err := mcpHTTPQuery(t, shared, shared.keys[0], "template=python-3.12&sandbox_timeout=900&timeout=2&network=off")
	if err != nil {
		t.Fatal(err)
	}
	text, isErr := mcpCall(t, cs, tooluse.RunCommand, map[string]any{"command": "python -c 'print(1)'; sleep 30"})
	if out := execOutput(t, text); !isErr || !out.TimedOut || out.Stdout != "1\n" {
		t.Fatalf("per-call timeout of 2 s: %q", text)
	}
	live := liveSandboxes(t, 0, map[string]string{mcp.MetadataKey: cs.ID()})
	if len(live) != 1 {
		t.Fatalf("%d sandboxes", len(live))
	}
	if lease := live[0].ExpiresAt.Sub(live[0].CreatedAt); lease < 890*time.Second || lease > 910*time.Second {
		t.Errorf("lease %v, want 900 s", lease)
	}
	if live[0].Network.Mode != api.NetworkOff {
		t.Errorf("network %+v, want off", live[0].Network)
	}
	cs.Close()
	waitNoSandbox(t, 0, map[string]string{mcp.MetadataKey: cs.ID()})

	for _, q := range []string{"timeout=0", "sandbox_timeout=2d", "network=restricted", "sandbox=sb_x&template=base"} {
		req, _ := http.NewRequest("POST", shared.url+"/v1/mcp?"+q, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
		req.Header.Set("Authorization", "Bearer "+shared.keys[0])
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), api.CodeBadRequest) {
			t.Errorf("?%s: %d %s, want 400 bad_request", q, resp.StatusCode, body)
		}
	}
}

// TestMCPIdleSession abandons an MCP HTTP session without DELETE: the
// daemon ends it after --mcp-idle-timeout and deletes its sandbox, long
// before the sandbox's lease; an attached sandbox is kept.
func TestMCPIdleSession(t *testing.T) {
	requireDaemon(t)
	d, err := startDaemon(daemonOptions{extraArgs: []string{"--uid-base", strconv.Itoa(crashUIDBase + 700*65536),
		"--max-sandboxes", "10", "--mcp-idle-timeout", "2s"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.shutdown()
	c := d.client(0)
	mine, err := c.Create(ctxT(t), &api.CreateSandboxRequest{TimeoutSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	own, err := mcpHTTPOn(t, d, d.keys[0])
	if err != nil {
		t.Fatal(err)
	}
	attached, err := mcpHTTPQuery(t, d, d.keys[0], "sandbox="+mine.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range []*sdk.ClientSession{own, attached} {
		if text, isErr := mcpCall(t, cs, tooluse.RunCommand, map[string]any{"command": "true"}); isErr {
			t.Fatalf("run_command: %q", text)
		}
	}
	var id string
	for sb, err := range c.All(ctxT(t), client.ListOptions{Metadata: map[string]string{mcp.MetadataKey: own.ID()}}) {
		if err != nil {
			t.Fatal(err)
		}
		id = sb.ID
	}
	if id == "" {
		t.Fatal("no sandbox for the MCP session")
	}
	// Both clients go away without DELETE.
	deadline := time.Now().Add(30 * time.Second)
	for {
		sb, err := c.Get(ctxT(t), id)
		if errors.Is(err, client.ErrNotFound) || err == nil && sb.State == api.StateTerminated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle session's sandbox is still %+v %v", sb, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := own.CallTool(ctx, &sdk.CallToolParams{Name: tooluse.RunCommand, Arguments: map[string]any{"command": "true"}}); err == nil {
		t.Error("a call in the ended session succeeded")
	}
	if got, err := c.Get(ctxT(t), mine.ID); err != nil || got.State != api.StateRunning {
		t.Fatalf("the attached sandbox after its idle session ended: %+v %v", got, err)
	}
}
