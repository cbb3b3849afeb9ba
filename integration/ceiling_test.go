package integration

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// Adversarial suite, "daemon surface" family: the operator's ceiling on
// tenants' network entries, registry imports (SSRF) and import paths (a
// host path oracle). A loopback service on the host counts the
// connections it accepts: none of these cases may reach it.

// ceilService is a host service on loopback that counts accepted
// connections and answers with words that must never reach a tenant.
type ceilService struct {
	addr     string
	port     string
	accepted atomic.Int64
}

// ceilStoreName matches the store's internal image names in errors.
var ceilStoreName = regexp.MustCompile(`\b[tp]-[0-9a-f]{16,}\b`)

const ceilSecret = "UPSTREAM-SECRET-root:x:0:0"

func startCeilService(t *testing.T, addr string) *ceilService {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &ceilService{addr: ln.Addr().String()}
	_, s.port, _ = net.SplitHostPort(s.addr)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"errors":[{"code":"DENIED","message":%q}]}`, ceilSecret)
	}), ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.accepted.Add(1)
		}
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return s
}

// ceilClosedPort returns a loopback address nothing listens on.
func ceilClosedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	ln.Close()
	return a
}

// ceilHostAddress returns one non-loopback IPv4 address of this host ("" if none).
func ceilHostAddress() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return ""
}

func TestAdversarialDaemonSurfaceCeiling(t *testing.T) {
	requireDaemon(t)
	// Never listed anywhere: must accept nothing. Port 80, where the
	// egress proxy would take a sandbox's HTTP.
	unlisted := startCeilService(t, "127.0.0.77:80")
	listed := startCeilService(t, "127.0.0.1:0") // a listed "registry" that answers with secrets
	closed := ceilClosedPort(t)
	goodRef := pushImage(t, "ceiling/toy:v1", toyImage(t))
	regHostPort := strings.SplitN(goodRef, "/", 2)[0]
	d, err := startDaemon(daemonOptions{
		extraArgs: []string{"--uid-base", strconv.Itoa(crashUIDBase + 700*65536),
			"--registry-allow", strings.Join([]string{regHostPort, listed.addr, closed}, ",")},
		config: `{"network": {"pool": "10.93.0.0/16", "proxy_port": 15301, "dns_port": 15353,
			"hosts": {"loop.test": ["127.0.0.77"], "meta.test": ["169.254.169.254"]}}}`,
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
	badRequest := func(t *testing.T, what string, err error, want string) {
		t.Helper()
		if !errors.Is(err, client.ErrBadRequest) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want 400 mentioning %q", what, err, want)
		}
	}

	t.Run("network entries at create", func(t *testing.T) {
		entries := map[string]string{
			"127.0.0.0/8": "loopback", "127.0.0.1:" + unlisted.port: "loopback",
			"169.254.169.254/32": "link-local", "169.254.169.254": "link-local",
			"10.0.0.0/8": "pool", "10.1.0.0/16": "private", "192.168.0.0/16": "private", "172.16.0.1": "private",
			"100.64.0.0/10": "CGNAT", "0.0.0.0/0": "pool", "0.0.0.0": "unspecified", "224.0.0.1": "multicast",
			"255.255.255.255": "broadcast", "10.93.0.5": "pool",
		}
		if h := ceilHostAddress(); h != "" {
			entries[h] = "host"
		}
		for _, mode := range []string{api.NetworkAllowlist, api.NetworkFull} {
			for e, reason := range entries {
				_, err := c.Create(ctx, &api.CreateSandboxRequest{Network: &api.NetworkPolicy{Mode: mode, Allow: []string{e}}})
				badRequest(t, mode+" allow "+e, err, reason)
			}
		}
	})

	t.Run("network entries at PATCH and build", func(t *testing.T) {
		sb := newSandboxOn(t, d, 0, &api.CreateSandboxRequest{Network: &api.NetworkPolicy{Mode: api.NetworkAllowlist, Allow: []string{"example.test"}}})
		err := sb.SetNetwork(ctx, api.NetworkPolicy{Mode: api.NetworkAllowlist, Allow: []string{"127.0.0.1/32"}})
		badRequest(t, "PATCH allow 127.0.0.1/32", err, "loopback")
		_, err = c.CreateTemplate(ctx, api.CreateTemplateRequest{Name: "ceil-build", Dockerfile: "FROM base\nRUN true\n",
			Network: &api.NetworkPolicy{Mode: api.NetworkAllowlist, Allow: []string{"169.254.169.254/32"}}})
		badRequest(t, "build network allow 169.254.169.254/32", err, "link-local")

		// A name that resolves to host loopback: the resolver drops the
		// answer and the proxy refuses to dial it, even when the sandbox
		// forces the name onto an address of its choosing; an IP literal in
		// the Host header is refused too.
		sb2 := newSandboxOn(t, d, 0, &api.CreateSandboxRequest{Network: &api.NetworkPolicy{Mode: api.NetworkAllowlist,
			Allow: []string{"loop.test", "meta.test"}}})
		curl := "curl -s -o /dev/null -w '%{http_code}' --max-time 3 "
		for _, cmd := range []string{
			curl + "http://loop.test/",
			curl + "--resolve loop.test:80:198.51.100.1 http://loop.test/",
			curl + "-H 'Host: 127.0.0.77' http://198.51.100.1/",
			curl + "--resolve meta.test:80:198.51.100.1 http://meta.test/",
			curl + "http://169.254.169.254/",
		} {
			if got := strings.TrimSpace(advExec(t, sb2, cmd, 20).Stdout); got == "200" || got == "401" {
				t.Errorf("%s: %q", cmd, got)
			}
		}
	})

	t.Run("registry imports", func(t *testing.T) {
		for _, ref := range []string{unlisted.addr + "/x:v1", "localhost:" + unlisted.port + "/x:v1", "169.254.169.254/x:v1", "10.93.0.1/x:v1"} {
			_, err := c.CreateTemplate(ctx, api.CreateTemplateRequest{Name: "ceil-ssrf", From: &api.TemplateSource{Image: ref}})
			badRequest(t, "import "+ref, err, "registry policy")
		}
		// A build's FROM that is no template is pulled the same way (and
		// answered as an unknown template).
		_, err := c.CreateTemplate(ctx, api.CreateTemplateRequest{Name: "ceil-ssrf-build", Dockerfile: "FROM " + unlisted.addr + "/x:v1\nRUN true\n"})
		if err == nil || !strings.Contains(err.Error(), "registry policy") {
			t.Errorf("build FROM %s: %v", unlisted.addr, err)
		}

		// Listed registries: an open port answering with secrets and a
		// closed port give the same error, without the upstream's words.
		var msgs []string
		for _, host := range []string{listed.addr, closed} {
			_, err := c.CreateTemplate(ctx, api.CreateTemplateRequest{Name: "ceil-probe", From: &api.TemplateSource{Image: host + "/x:v1"}})
			badRequest(t, "import from listed "+host, err, "registry policy")
			if err != nil && (strings.Contains(err.Error(), ceilSecret) || strings.Contains(err.Error(), "DENIED")) {
				t.Errorf("upstream body in the error: %v", err)
			}
			if err != nil {
				msgs = append(msgs, ceilStoreName.ReplaceAllString(strings.ReplaceAll(err.Error(), host, "HOST"), "IMAGE"))
			}
		}
		if len(msgs) == 2 && msgs[0] != msgs[1] {
			t.Errorf("open and closed ports differ:\n%s\n%s", msgs[0], msgs[1])
		}
		if listed.accepted.Load() == 0 {
			t.Error("the listed registry was never reached")
		}
		if _, err := c.CreateTemplate(ctx, api.CreateTemplateRequest{Name: "ceil-good", From: &api.TemplateSource{Image: goodRef}}); err != nil {
			t.Errorf("import from the listed registry: %v", err)
		}
	})

	t.Run("import paths", func(t *testing.T) {
		imp := filepath.Join(d.stateDir, "import")
		os.Symlink("/etc/shadow", filepath.Join(imp, "to-shadow"))
		os.Symlink("/etc/nonexistent", filepath.Join(imp, "to-missing"))
		paths := []string{"/etc/shadow", "/etc/nonexistent", "/etc", "/root/.ssh/id_rsa", "/proc/self/root/etc/shadow",
			filepath.Join(imp, "to-shadow"), filepath.Join(imp, "to-missing"), filepath.Join(imp, "missing"),
			filepath.Join(imp, "../keys.json"), "relative/path"}
		var first string
		for _, p := range paths {
			for _, src := range []api.TemplateSource{{OCILayout: p}, {Tarball: p}} {
				_, err := c.CreateTemplate(ctx, api.CreateTemplateRequest{Name: "ceil-path", From: &src})
				badRequest(t, "import "+p, err, "import directories")
				if err == nil {
					continue
				}
				if first == "" {
					first = err.Error()
				} else if err.Error() != first {
					t.Errorf("%s: %q differs from %q", p, err, first)
				}
			}
		}
	})

	if n := unlisted.accepted.Load(); n != 0 {
		t.Errorf("the host's loopback service accepted %d connections", n)
	}
}

// TestDaemonSurfaceCeilingOperatorOpens: a range the operator opens with
// --network-allow-private is accepted in a tenant's allow list, and the
// proxy then reaches it (the loopback service counts the connection).
func TestDaemonSurfaceCeilingOperatorOpens(t *testing.T) {
	requireDaemon(t)
	svc := startCeilService(t, "127.0.0.78:80")
	d, err := startDaemon(daemonOptions{
		extraArgs: []string{"--uid-base", strconv.Itoa(crashUIDBase + 720*65536), "--network-allow-private", "127.0.0.78/32"},
		config:    `{"network": {"pool": "10.94.0.0/16", "proxy_port": 15401, "dns_port": 15453}}`,
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
	_, err = d.client(0).Create(ctx, &api.CreateSandboxRequest{Network: &api.NetworkPolicy{Mode: api.NetworkAllowlist, Allow: []string{"127.0.0.0/8"}}})
	if !errors.Is(err, client.ErrBadRequest) || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("127.0.0.0/8 (wider than the operator's range): %v", err)
	}
	sb := newSandboxOn(t, d, 0, &api.CreateSandboxRequest{Network: &api.NetworkPolicy{Mode: api.NetworkAllowlist,
		Allow: []string{"127.0.0.78/32"}}})
	cmd := "curl -s -o /dev/null -w '%{http_code}' --max-time 5 -H 'Host: 127.0.0.78' http://198.51.100.1/"
	if got := strings.TrimSpace(advExec(t, sb, cmd, 20).Stdout); got != "401" {
		t.Errorf("opened range: %q, want the service's 401", got)
	}
	if svc.accepted.Load() == 0 {
		t.Error("the opened loopback service was not reached")
	}
}
