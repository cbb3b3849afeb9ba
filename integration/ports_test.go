package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

const portServer = `
import http.server, socketserver, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.headers.get("Upgrade", "").lower() == "websocket":
            self.send_response(101)
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            self.end_headers()
            self.wfile.flush()
            while True:
                b = self.rfile.read1(4096)
                if not b:
                    return
                self.wfile.write(b.upper())
                self.wfile.flush()
        body = ("path=%s auth=%s cookie=%s" % (self.path, self.headers.get("Authorization"), self.headers.get("Cookie"))).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
socketserver.ThreadingTCPServer.allow_reuse_address = True
http.server.ThreadingHTTPServer(("127.0.0.1", 8000), H).serve_forever()
`

func TestPorts(t *testing.T) {
	ctx := ctxT(t)
	sb := newSandbox(t, nil)
	if _, err := sb.Files().Write(ctx, "srv.py", []byte(portServer), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Start(ctx, api.ExecRequest{Argv: []string{"python3", "srv.py"}}); err != nil {
		t.Fatal(err)
	}
	var ports []api.Port
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var err error
		if ports, err = sb.Ports(ctx); err != nil {
			t.Fatal(err)
		}
		if len(ports) > 0 {
			break
		}
	}
	if len(ports) != 1 || ports[0].Port != 8000 || ports[0].Address != "127.0.0.1" {
		t.Fatalf("ports: %+v", ports)
	}
	get := func(url, key string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := get(ports[0].URL+"hello?x=1", shared.keys[0]); st != 200 || body != "path=/hello?x=1 auth=None cookie=None" {
		t.Fatalf("with API key: %d %q (the key must not reach the sandbox)", st, body)
	}
	if st, body := get(ports[0].SignedURL, ""); st != 200 || !strings.HasPrefix(body, "path=/ auth=None cookie=None") {
		t.Fatalf("signed URL: %d %q", st, body)
	}
	if st, _ := get(ports[0].URL, shared.keys[1]); st != 404 {
		t.Fatalf("another key: %d, want 404", st)
	}
	if st, _ := get(ports[0].URL, ""); st != 401 {
		t.Fatalf("no credentials: %d, want 401", st)
	}
	bad := strings.Replace(ports[0].SignedURL, "/ports/8000/", "/ports/8001/", 1)
	if st, _ := get(bad, ""); st != 401 {
		t.Fatalf("token for another port: %d, want 401", st)
	}
	if st, _ := get(strings.Replace(ports[0].URL, "/8000/", "/9/", 1), shared.keys[0]); st != 502 {
		t.Fatalf("closed port: %d, want 502", st)
	}

	// WebSocket-style upgrade through the proxy.
	c, err := net.Dial("tcp", strings.TrimPrefix(shared.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /v1/sandboxes/%s/ports/8000/ws HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", sb.ID, shared.keys[0])
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprint(c, "hello ws")
	buf := make([]byte, 8)
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "HELLO WS" {
		t.Fatalf("websocket echo: %q %v", buf, err)
	}
}
