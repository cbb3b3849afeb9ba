package integration

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// More of the "daemon surface" family (issue 16): each key's share, the
// small defects of item 10, ports on their own origins, and paddock mcp
// at the end of its input.

// TestAdversarialSurfaceShares: with the default per-key shares one key
// cannot take every sandbox slot or every MCP session (finding 8): on a
// host of 6 sandboxes and 4 MCP sessions, alice gets 3 and 1, her next
// ones are 429 limit_exceeded and refused, and bob still gets his.
func TestAdversarialSurfaceShares(t *testing.T) {
	d := startSurfaceDaemon(t, 740, "--max-mcp-sessions", "4")
	for range 3 {
		newSandboxOn(t, d, 0, nil)
	}
	if _, err := d.client(0).Create(ctxT(t), nil); !errors.Is(err, client.ErrLimitExceeded) {
		t.Fatalf("alice's 4th sandbox of 6: %v, want 429 limit_exceeded", err)
	}
	newSandboxOn(t, d, 1, nil)
	if _, err := mcpHTTPOn(t, d, d.keys[0]); err != nil {
		t.Fatalf("alice's first MCP session: %v", err)
	}
	if _, err := mcpHTTPOn(t, d, d.keys[0]); err == nil || !strings.Contains(err.Error(), "too many MCP sessions for this API key") {
		t.Fatalf("alice's second MCP session: %v, want refused", err)
	}
	if _, err := mcpHTTPOn(t, d, d.keys[1]); err != nil {
		t.Fatalf("bob's MCP session: %v", err)
	}
}

// TestAdversarialSurfaceInputs: a lease near int64 (it became a lease
// ending in 1734) and metadata keys with NUL or control characters are
// 400 bad_request (item 10).
func TestAdversarialSurfaceInputs(t *testing.T) {
	requireDaemon(t)
	sb := newSandbox(t, nil)
	for _, c := range []struct{ path, body string }{
		{"/v1/sandboxes", `{"timeout_seconds": 9223372036854775807}`},
		{"/v1/sandboxes", `{"timeout_seconds": 9223372037}`},
		{"/v1/sandboxes", `{"metadata": {"\u0000": "x"}}`},
		{"/v1/sandboxes", `{"metadata": {"a\u001bb": "x"}}`},
		{"/v1/sandboxes/" + sb.ID + "/timeout", `{"timeout_seconds": 9223372036854775807}`},
	} {
		st, b := advRequest(t, "POST", c.path, strings.NewReader(c.body), map[string]string{"Content-Type": "application/json"})
		if st != 400 || !strings.Contains(string(b), "bad_request") {
			t.Errorf("POST %s %s: %d %.200s, want 400 bad_request", c.path, c.body, st, b)
		}
	}
}

// TestAdversarialSurfaceSnapshotSparse: a 64 MiB sandbox with a 1 GiB
// sparse file snapshots into a template of about its data, not 1 GiB of
// host disk (finding 5); a sandbox of the snapshot sees the 1 GiB file.
func TestAdversarialSurfaceSnapshotSparse(t *testing.T) {
	requireDaemon(t)
	sb := newSandbox(t, &api.CreateSandboxRequest{Resources: &api.Resources{DiskMiB: 64}})
	if res := advExec(t, sb, "truncate -s 1G /workspace/sparse && head -c 1048576 /dev/urandom > /workspace/data", 30); res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("setup: %+v", res)
	}
	tpl, err := sb.Snapshot(ctxT(t), advMarker("sparse"))
	if err != nil {
		t.Fatal(err)
	}
	defer shared.client(0).DeleteTemplate(ctxBG(), tpl.Name)
	t.Logf("snapshot of a 1 GiB sparse file and 1 MiB of data: %d bytes", tpl.Size)
	if tpl.Size > 8<<20 {
		t.Fatalf("snapshot takes %d bytes, want about the 1 MiB of data", tpl.Size)
	}
	sb2 := newSandbox(t, &api.CreateSandboxRequest{Template: tpl.Name})
	if res := advExec(t, sb2, "stat -c %s /workspace/sparse", 10); strings.TrimSpace(res.Stdout) != "1073741824" {
		t.Fatalf("the sparse file in the snapshot: %+v", res)
	}
}

// cookieServer sets a cookie and echoes the Cookie header it gets.
const cookieServer = `
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("cookie=%s" % self.headers.get("Cookie")).encode()
        self.send_response(200)
        self.send_header("Set-Cookie", "sandbox=1; Path=/")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", 8000), H).serve_forever()
`

// TestAdversarialSurfacePortOrigin: with --ports-domain, each port is
// served on <port>-<id>.<domain> (item 10): the signed origin URL works
// on the wildcard listener and sets its token cookie on that origin only;
// the path form on the API's origin passes no cookie either way; the
// wildcard listener serves no API.
func TestAdversarialSurfacePortOrigin(t *testing.T) {
	plisten := freePort()
	d := startSurfaceDaemon(t, 750, "--ports-domain", "ports.test", "--ports-listen", plisten)
	sb := newSandboxOn(t, d, 0, nil)
	ctx := ctxT(t)
	if _, err := sb.Files().Write(ctx, "c.py", []byte(cookieServer), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Start(ctx, api.ExecRequest{Command: "python3 c.py"}); err != nil {
		t.Fatal(err)
	}
	var ports []api.Port
	for deadline := time.Now().Add(10 * time.Second); len(ports) == 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ports, _ = sb.Ports(ctx)
	}
	if len(ports) != 1 || !strings.HasPrefix(ports[0].OriginURL, "http://8000-"+sb.ID+".ports.test/?paddock_token=") {
		t.Fatalf("ports: %+v", ports)
	}
	// get sends a request to addr with the Host and path of u.
	get := func(addr, u string, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
		host := req.URL.Host
		req.URL.Host = addr
		req.Host = host
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := get(plisten, ports[0].OriginURL, nil)
	cookies := resp.Header.Values("Set-Cookie")
	if resp.StatusCode != 200 || body != "cookie=None" || len(cookies) != 2 || !strings.Contains(strings.Join(cookies, ";"), "paddock_port_token=") {
		t.Fatalf("origin URL: %d %q cookies %q", resp.StatusCode, body, cookies)
	}
	tok := ""
	for _, c := range resp.Cookies() {
		if c.Name == "paddock_port_token" {
			tok = c.Value
		}
	}
	origin := "http://8000-" + sb.ID + ".ports.test/page"
	if resp, body := get(plisten, origin, map[string]string{"Cookie": "paddock_port_token=" + tok + "; sandbox=1"}); resp.StatusCode != 200 || body != "cookie=sandbox=1" {
		t.Fatalf("origin with the cookie: %d %q (the token cookie must not reach the sandbox)", resp.StatusCode, body)
	}
	if resp, _ := get(plisten, origin, nil); resp.StatusCode != 401 {
		t.Fatalf("origin without credentials: %d, want 401", resp.StatusCode)
	}
	// The path form: no cookie in, no Set-Cookie out.
	apiAddr := strings.TrimPrefix(d.url, "http://")
	resp, body = get(apiAddr, ports[0].SignedURL, map[string]string{"Cookie": "sandbox=1"})
	if resp.StatusCode != 200 || body != "cookie=None" || len(resp.Header.Values("Set-Cookie")) != 0 {
		t.Fatalf("path form: %d %q cookies %q", resp.StatusCode, body, resp.Header.Values("Set-Cookie"))
	}
	// The wildcard listener serves no API.
	if resp, _ := get(plisten, "http://"+plisten+"/v1/health", nil); resp.StatusCode != 404 {
		t.Fatalf("API on the ports listener: %d, want 404", resp.StatusCode)
	}
}

// TestMCPStdioEOF: `paddock mcp` answers every request it has read
// before it exits at the end of stdin (item 11): a tools/call sent just
// before stdin closes gets its result.
func TestMCPStdioEOF(t *testing.T) {
	requireDaemon(t)
	tag := "mcp_eof=" + advMarker("t")
	cmd := exec.Command(filepath.Join(*binDir, "paddock"), "mcp", "--meta", tag)
	cmd.Env = append(cmd.Environ(), "PADDOCK_URL="+shared.url, "PADDOCK_API_KEY="+shared.keys[0])
	cmd.Stdin = strings.NewReader(strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"sleep 1; echo answered"}}}`,
		""}, "\n"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal(sc.Bytes(), &m)
		got[string(m.ID)] = sc.Text()
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("paddock mcp: %v", err)
	}
	if !strings.Contains(got["2"], "answered") {
		t.Fatalf("no answer to the tools/call read before stdin's end: %v", got)
	}
}
