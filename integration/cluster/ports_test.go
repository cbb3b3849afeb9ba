package cluster_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

const portServer = `
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("path=%s" % self.path).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", 8000), H).serve_forever()
`

// checkPorts: a port's URLs, listed through a gateway, name that gateway;
// its signed URL works through the gateway without a key, and the key
// form through the other gateway.
func checkPorts(t *testing.T, l *lab, ctx context.Context, id string) {
	sb := l.client(0, 0).Sandbox(id)
	if _, err := sb.Files().Write(ctx, "srv.py", []byte(portServer), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Start(ctx, api.ExecRequest{Argv: []string{"python3", "srv.py"}}); err != nil {
		t.Fatal(err)
	}
	var ports []api.Port
	for start := time.Now(); time.Since(start) < 15*time.Second && len(ports) == 0; time.Sleep(100 * time.Millisecond) {
		var err error
		if ports, err = sb.Ports(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(ports) != 1 || ports[0].Port != 8000 {
		t.Fatalf("ports through the gateway: %+v", ports)
	}
	if !strings.HasPrefix(ports[0].SignedURL, l.gwURLs[0]) {
		t.Fatalf("signed URL %q does not name the gateway %s", ports[0].SignedURL, l.gwURLs[0])
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
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return resp.StatusCode, string(b)
	}
	if st, body := get(ports[0].SignedURL, ""); st != 200 || !strings.HasPrefix(body, "path=/") {
		t.Fatalf("signed URL through the gateway, no key: %d %q", st, body)
	}
	other := strings.Replace(ports[0].URL, l.gwURLs[0], l.gwURLs[1], 1)
	if st, body := get(other+"hello", l.keys[0]); st != 200 || body != "path=/hello" {
		t.Fatalf("key form through the other gateway %s: %d %q", other, st, body)
	}
	if st, _ := get(other+"hello", ""); st != http.StatusUnauthorized {
		t.Fatalf("no key, no token: %d, want 401", st)
	}
}
