package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// upstreamPy serves HTTP on :80 and HTTPS on :443 inside the test's
// "internet" namespace and logs each request's Host and Authorization to
// a file the test reads (never back to the client).
const upstreamPy = `
import http.server, ssl, sys, threading
log = open(sys.argv[3], "a", buffering=1)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        log.write("%s %s %s\n" % (self.headers.get("Host"), self.path, self.headers.get("Authorization")))
        body = b"upstream ok\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
plain = http.server.ThreadingHTTPServer(("0.0.0.0", 80), H)
tls = http.server.ThreadingHTTPServer(("0.0.0.0", 443), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
tls.socket = ctx.wrap_socket(tls.socket, server_side=True)
threading.Thread(target=plain.serve_forever, daemon=True).start()
tls.serve_forever()
`

// internet is a network namespace standing in for the internet at
// 203.0.113.10, routed from the host through a veth pair.
type internet struct {
	ns, veth, log, caPEM string
	cmd                  *exec.Cmd
}

func startInternet(t *testing.T) *internet {
	requireDaemon(t)
	t.Helper()
	suffix := strconv.FormatInt(time.Now().UnixNano()%100000, 36)
	in := &internet{ns: "pdti-" + suffix, veth: "pdti" + suffix}
	dir := t.TempDir()
	run := func(args ...string) {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	run("ip", "netns", "add", in.ns)
	t.Cleanup(func() {
		if in.cmd != nil {
			in.cmd.Process.Kill()
			in.cmd.Wait()
		}
		exec.Command("ip", "link", "del", in.veth).Run()
		exec.Command("ip", "netns", "del", in.ns).Run()
	})
	run("ip", "link", "add", in.veth, "type", "veth", "peer", "name", in.veth+"i")
	run("ip", "link", "set", in.veth+"i", "netns", in.ns)
	run("ip", "addr", "add", "203.0.113.1/24", "dev", in.veth)
	run("ip", "link", "set", in.veth, "up")
	run("ip", "netns", "exec", in.ns, "ip", "addr", "add", "203.0.113.10/24", "dev", in.veth+"i")
	run("ip", "netns", "exec", in.ns, "ip", "link", "set", in.veth+"i", "up")
	run("ip", "netns", "exec", in.ns, "ip", "link", "set", "lo", "up")
	run("ip", "netns", "exec", in.ns, "ip", "route", "add", "default", "via", "203.0.113.1")
	// A CA and a certificate for the upstream's names.
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test upstream CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTpl, caTpl, &caKey.PublicKey, caKey)
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafDER, _ := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2),
		DNSNames: []string{"allowed.test", "secret.test", "other.test"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca, &key.PublicKey, caKey)
	keyDER, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	in.caPEM = filepath.Join(dir, "ca.pem")
	os.WriteFile(in.caPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644)
	in.log = filepath.Join(dir, "requests.log")
	os.WriteFile(filepath.Join(dir, "up.py"), []byte(upstreamPy), 0o644)
	in.cmd = exec.Command("ip", "netns", "exec", in.ns, "/usr/bin/python3", filepath.Join(dir, "up.py"), certFile, keyFile, in.log)
	if err := in.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if exec.Command("ip", "netns", "exec", in.ns, "bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/443").Run() == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return in
}

func (in *internet) requests() string { b, _ := os.ReadFile(in.log); return string(b) }

// TestNetwork covers the three network modes, live rule changes and
// secrets, with a local "internet" in a namespace the test made.
func TestNetwork(t *testing.T) {
	in := startInternet(t)
	d, err := startDaemon(daemonOptions{
		extraArgs: []string{"--uid-base", strconv.Itoa(crashUIDBase + 160*65536)},
		config: fmt.Sprintf(`{"network": {"pool": "10.89.0.0/16", "proxy_port": 15101, "dns_port": 15153, "upstream_ca": %q,
			"hosts": {"allowed.test": ["203.0.113.10"], "secret.test": ["203.0.113.10"], "other.test": ["203.0.113.10"], "rebind.test": ["10.0.0.5"], "meta.test": ["169.254.169.254"]}}}`, in.caPEM),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.shutdown()
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(d.logTail(5000))
		}
	})
	ctx := ctxT(t)
	c := d.client(0)
	sh := func(sb *client.Sandbox, cmd string) string {
		res, err := sb.Exec(ctx, api.ExecRequest{Command: cmd, TimeoutSeconds: 30})
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(res.Stdout + res.Stderr)
	}
	curl := "curl -s -o /dev/null -w '%{http_code}' --max-time 3 "

	t.Run("off", func(t *testing.T) {
		sb := newSandboxOn(t, d, 0, nil)
		if got := sh(sb, curl+"http://203.0.113.10/; echo; ip route; ip route add default dev lo 2>&1 | head -1"); !strings.HasPrefix(got, "000") || !strings.Contains(got, "Operation not permitted") {
			t.Fatalf("mode off: %q", got)
		}
	})

	t.Run("allowlist", func(t *testing.T) {
		sb := newSandboxOn(t, d, 0, &api.CreateSandboxRequest{Network: &api.NetworkPolicy{Mode: api.NetworkAllowlist, Allow: []string{"allowed.test", "rebind.test", "meta.test"}}})
		cases := []struct{ cmd, want string }{
			{curl + "http://allowed.test/", "200"},
			{curl + "--cacert /dev/null -k https://allowed.test/", "200"},
			{curl + "--resolve other.test:80:203.0.113.10 http://other.test/", "000"},
			{curl + "http://203.0.113.10/", "000"},
			{curl + "http://rebind.test/", "000"},
			{curl + "http://meta.test/", "000"},
			{curl + "http://169.254.169.254/", "000"},
			{curl + "http://10.89.0.1:7419/", "000"},
			{"getent hosts other.test || echo nxdomain", "nxdomain"},
			{"python3 -c \"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2); s.sendto(b'x', ('203.0.113.10', 9999)); print('sent')\"", "sent"},
		}
		for _, tc := range cases {
			got := sh(sb, tc.cmd)
			if tc.want == "000" && got == "403" {
				got = "000" // refused by the proxy with an HTTP answer
			}
			if got != tc.want {
				t.Errorf("%s: got %q, want %q", tc.cmd, got, tc.want)
			}
		}
		// A rule change applies to the running sandbox at once.
		req := api.NetworkPolicy{Mode: api.NetworkAllowlist, Allow: []string{"other.test"}}
		t0 := time.Now()
		if _, err := d.client(0).Sandbox(sb.ID).Exec(ctx, api.ExecRequest{Argv: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
		if err := patchNetwork(d, sb.ID, req); err != nil {
			t.Fatal(err)
		}
		if got := sh(sb, curl+"http://allowed.test/"); got != "000" && got != "403" {
			t.Errorf("after removing allowed.test: %q", got)
		}
		if got := sh(sb, curl+"http://other.test/"); got != "200" {
			t.Errorf("after adding other.test: %q", got)
		}
		t.Logf("rule change applied and checked in %v", time.Since(t0))
	})

	t.Run("full", func(t *testing.T) {
		sb := newSandboxOn(t, d, 0, &api.CreateSandboxRequest{Network: &api.NetworkPolicy{Mode: api.NetworkFull}})
		for cmd, want := range map[string]string{
			curl + "http://203.0.113.10/":    "200",
			curl + "http://allowed.test/":    "200",
			curl + "http://169.254.169.254/": "000",
			curl + "http://10.0.0.5/":        "000",
		} {
			if got := sh(sb, cmd); got != want && !(want == "000" && got == "403") {
				t.Errorf("%s: got %q, want %q", cmd, got, want)
			}
		}
	})

	t.Run("template build with network", func(t *testing.T) {
		tpl, err := c.CreateTemplate(ctx, api.CreateTemplateRequest{
			Name:    "fetched",
			Network: &api.NetworkPolicy{Mode: api.NetworkAllowlist, Allow: []string{"allowed.test"}},
			Recipe: &api.Recipe{From: "base", Steps: []api.RecipeStep{
				{Run: "curl -s --max-time 5 http://allowed.test/ > /opt/fetched.txt"},
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		sb := newSandboxOn(t, d, 0, &api.CreateSandboxRequest{Template: tpl.Name})
		if got := sh(sb, "cat /opt/fetched.txt"); got != "upstream ok" {
			t.Fatalf("file fetched during the build: %q", got)
		}
	})

	t.Run("secrets", func(t *testing.T) {
		if _, err := c.CreateSecret(ctx, api.CreateSecretRequest{Name: "API_TOKEN", Value: "s3cr3t-value-42", Hosts: []string{"secret.test"}}); err != nil {
			t.Fatal(err)
		}
		secs, err := c.Secrets(ctx)
		if err != nil || len(secs) != 1 || secs[0].Name != "API_TOKEN" {
			t.Fatalf("list secrets: %+v %v", secs, err)
		}
		if _, err := c.Create(ctx, &api.CreateSandboxRequest{Secrets: []string{"API_TOKEN"}, Network: &api.NetworkPolicy{Mode: api.NetworkFull}}); !errors.Is(err, client.ErrBadRequest) {
			t.Fatalf("secrets with network off: %v", err)
		}
		sb := newSandboxOn(t, d, 0, &api.CreateSandboxRequest{Secrets: []string{"API_TOKEN"},
			Network: &api.NetworkPolicy{Mode: api.NetworkAllowlist, Allow: []string{"secret.test", "allowed.test"}}})
		if got := sh(sb, "echo $API_TOKEN; grep -rs s3cr3t /proc/*/environ /etc /root /workspace /tmp | head -3"); !strings.HasPrefix(got, "paddock-secret-") || strings.Contains(got, "s3cr3t") {
			t.Fatalf("the sandbox holds the secret: %q", got)
		}
		if got := sh(sb, curl+`-H "Authorization: Bearer $API_TOKEN" https://secret.test/bound`); got != "200" {
			t.Fatalf("request to the bound host: %q", got)
		}
		if got := sh(sb, curl+`-k -H "Authorization: Bearer $API_TOKEN" https://allowed.test/unbound`); got != "200" {
			t.Fatalf("request to an unbound host: %q", got)
		}
		log := in.requests()
		if !strings.Contains(log, "secret.test /bound Bearer s3cr3t-value-42") {
			t.Errorf("upstream did not get the real value: %q", log)
		}
		if !strings.Contains(log, "allowed.test /unbound Bearer paddock-secret-") || strings.Contains(strings.SplitN(log[strings.Index(log, "/unbound"):], "\n", 2)[0], "s3cr3t") {
			t.Errorf("unbound host got something other than the placeholder: %q", log)
		}
	})
}

func patchNetwork(d *daemon, id string, p api.NetworkPolicy) error {
	return d.client(0).Sandbox(id).SetNetwork(ctxBG(), p)
}
