package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAllowedHTTPAndHTTPS(t *testing.T) {
	w := newWorld(t, worldOpts{})
	w.setSandbox(srcSB1, "sb1", allowlist("api.example.com", "*.example.com"))
	c := w.client(srcSB1, w.internetPool)

	code, body, _, err := get(t, c, "http://api.example.com/")
	if err != nil || code != 200 || body != "hello from api.example.com" {
		t.Fatalf("http: %d %q %v", code, body, err)
	}
	// Keep-alive: a second request on the same connection.
	code, body, _, err = get(t, c, "http://api.example.com/x")
	if err != nil || code != 200 || body != "hello from api.example.com" {
		t.Fatalf("http again: %d %q %v", code, body, err)
	}
	code, body, _, err = get(t, c, "https://api.example.com/")
	if err != nil || code != 200 || body != "hello from api.example.com" {
		t.Fatalf("https: %d %q %v", code, body, err)
	}
	code, body, _, err = get(t, c, "https://a.example.com/")
	if err != nil || code != 200 || body != "hello from a.example.com" {
		t.Fatalf("https wildcard: %d %q %v", code, body, err)
	}
	// Upload through the parsed HTTP path, streamed.
	resp, err := c.Post("http://api.example.com/upload", "application/octet-stream", io.LimitReader(zeroReader{}, 3<<20))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "3145728" {
		t.Fatalf("upload: %q", b)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, d := range w.dials {
		if strings.HasPrefix(d, sandboxView.String()) {
			t.Errorf("proxy dialled the sandbox's destination %s instead of its own resolution", d)
		}
	}
	if len(w.up.sni) == 0 || w.up.sni[0] != "api.example.com" {
		t.Errorf("upstream SNI %v", w.up.sni)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestDeniedName(t *testing.T) {
	w := newWorld(t, worldOpts{})
	w.setSandbox(srcSB1, "sb1", allowlist("api.example.com"))
	c := w.client(srcSB1, w.internetPool)

	code, body, hdr, err := get(t, c, "http://other.example.com/")
	if err != nil || code != 403 || hdr.Get("X-Paddock-Egress") != "refused" || !strings.Contains(body, "not allowed") {
		t.Fatalf("denied http: %d %q %v", code, body, err)
	}
	if _, _, _, err := get(t, c, "https://other.example.com/"); err == nil {
		t.Fatal("denied https succeeded")
	}
	// Deny wins over allow.
	w.setSandbox(srcSB1, "sb1", Rules{Mode: ModeAllowlist, Allow: []string{"*.example.com"}, Deny: []string{"other.example.com"}})
	if code, _, _, _ := get(t, c, "http://other.example.com/"); code != 403 {
		t.Fatalf("deny over allow: %d", code)
	}
	if code, _, _, _ := get(t, c, "http://a.example.com/"); code != 200 {
		t.Fatalf("wildcard allow: %d", code)
	}
	// Off: nothing (and the live keep-alive connection is cut).
	w.setSandbox(srcSB1, "sb1", Rules{Mode: ModeOff, Allow: []string{"*"}})
	w.proxy.PolicyChanged("sb1")
	if code, _, _, _ := get(t, w.client(srcSB1, w.internetPool), "http://a.example.com/"); code != 403 {
		t.Fatalf("off: %d", code)
	}
	if n := w.dialCount(); n != 1 {
		t.Errorf("%d upstream dials, want 1 (only the allowed one)", n)
	}
}

func TestUnknownSourceClosed(t *testing.T) {
	w := newWorld(t, worldOpts{})
	w.setSandbox(srcSB1, "sb1", allowlist("*"))
	c, err := w.dial(context.Background(), srcBad, netip.AddrPortFrom(pubAPI, 80))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 10)); err == nil || n > 0 {
		t.Fatalf("unknown source got %d bytes, err %v", n, err)
	}
	if w.dialCount() != 0 {
		t.Fatal("dialled for an unknown source")
	}
}

func TestIPLiteralRefused(t *testing.T) {
	w := newWorld(t, worldOpts{})
	w.setSandbox(srcSB1, "sb1", allowlist("*.example.com"))
	c := w.client(srcSB1, w.internetPool)

	// HTTPS to an IP: the Go client sends no SNI for an IP literal.
	if _, _, _, err := get(t, c, "https://203.0.113.10/"); err == nil {
		t.Fatal("https to an IP literal succeeded")
	}
	code, body, _, err := get(t, c, "http://203.0.113.10/")
	if err != nil || code != 403 || !strings.Contains(body, "CIDR") {
		t.Fatalf("http to an IP literal: %d %q %v", code, body, err)
	}
	// A Host naming an IP literal while the packet went elsewhere.
	code, _, _, _ = get(t, c, "http://api.example.com/", "Host", "203.0.113.10")
	if code != 403 {
		t.Fatalf("Host: IP literal: %d", code)
	}
	// Raw TCP to another port.
	rc, err := w.dial(context.Background(), srcSB1, netip.AddrPortFrom(pubAPI, 5432))
	if err != nil {
		t.Fatal(err)
	}
	rc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := rc.Read(make([]byte, 1)); err == nil {
		t.Fatal("raw port connection not closed")
	}
	rc.Close()
	if n := w.dialCount(); n != 0 {
		t.Fatalf("%d upstream dials for refused addresses", n)
	}

	// An Allow CIDR opens them.
	w.setSandbox(srcSB1, "sb1", allowlist("203.0.113.0/24"))
	code, body, _, err = get(t, c, "http://203.0.113.10/")
	if err != nil || code != 200 {
		t.Fatalf("http to an allowed CIDR: %d %q %v", code, body, err)
	}
	code, _, _, err = get(t, c, "https://203.0.113.10/")
	if err != nil || code != 200 {
		t.Fatalf("https to an allowed CIDR: %d %v", code, err)
	}
}

func TestRebindingRefused(t *testing.T) {
	w := newWorld(t, worldOpts{})
	names := []string{"rebind.example.com", "loop.example.com", "meta.example.com", "v6loop.example.com", "mapped.example.com", "cgnat.example.com"}
	w.setSandbox(srcSB1, "sb1", allowlist(names...))
	c := w.client(srcSB1, w.internetPool)
	for _, name := range names {
		code, body, _, err := get(t, c, "http://"+name+"/")
		if err != nil || code != 403 || !strings.Contains(body, "may not reach") {
			t.Errorf("http %s: %d %q %v", name, code, body, err)
		}
		if _, _, _, err := get(t, c, "https://"+name+"/"); err == nil {
			t.Errorf("https %s succeeded", name)
		}
	}
	if n := w.dialCount(); n != 0 {
		t.Fatalf("%d upstream dials to refused answers", n)
	}
	// A mixed answer: the private address is dropped, the public one used.
	w.setSandbox(srcSB1, "sb1", allowlist("mixed.example.com"))
	if code, _, _, err := get(t, c, "http://mixed.example.com/"); code != 200 {
		t.Fatalf("mixed answer: %d %v", code, err)
	}
	w.mu.Lock()
	if w.dials[0] != "203.0.113.10:80" {
		t.Errorf("dialled %v", w.dials)
	}
	w.mu.Unlock()
	// Explicitly allowed by CIDR: a private answer is fine.
	w.setSandbox(srcSB1, "sb1", allowlist("rebind.example.com", "10.0.0.0/8"))
	if code, body, _, err := get(t, c, "http://rebind.example.com/"); code != 200 {
		t.Fatalf("private answer with CIDR: %d %q %v", code, body, err)
	}
}

func TestHostMismatchOnKeepAlive(t *testing.T) {
	w := newWorld(t, worldOpts{})
	w.setSandbox(srcSB1, "sb1", allowlist("api.example.com", "other.example.com"))
	c, err := w.dial(context.Background(), srcSB1, netip.AddrPortFrom(sandboxView, 80))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	// Same connection, another (even allowed) host: refused, since the
	// upstream is api.example.com's.
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: other.example.com\r\n\r\n")
	resp, err = http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 421 {
		t.Fatalf("second: %v %v", resp, err)
	}
}

func TestPolicyChangedCutsLiveConnections(t *testing.T) {
	w := newWorld(t, worldOpts{})
	w.setSandbox(srcSB1, "sb1", allowlist("api.example.com", "other.example.com"))

	// A TLS passthrough download that never ends, a plain HTTP one, and
	// one to a host that stays allowed.
	type stream struct {
		name string
		body io.ReadCloser
		err  chan error
	}
	open := func(url string) *stream {
		c := w.client(srcSB1, w.internetPool)
		c.Timeout = 0
		resp, err := c.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		s := &stream{name: url, body: resp.Body, err: make(chan error, 1)}
		go func() {
			_, err := io.Copy(io.Discard, resp.Body)
			s.err <- err
		}()
		return s
	}
	tlsS := open("https://other.example.com/endless")
	httpS := open("http://other.example.com/endless")
	keep := open("https://api.example.com/endless")
	defer keep.body.Close()
	time.Sleep(100 * time.Millisecond)
	if n := w.proxy.Conns("sb1"); n != 3 {
		t.Fatalf("%d live connections, want 3", n)
	}

	w.setSandbox(srcSB1, "sb1", allowlist("api.example.com"))
	start := time.Now()
	w.proxy.PolicyChanged("sb1")
	for _, s := range []*stream{tlsS, httpS} {
		select {
		case <-s.err:
		case <-time.After(time.Second):
			t.Fatalf("%s still open a second after PolicyChanged", s.name)
		}
	}
	t.Logf("cut within %v", time.Since(start))
	select {
	case err := <-keep.err:
		t.Fatalf("still-allowed connection cut: %v", err)
	case <-time.After(200 * time.Millisecond):
	}

	w.proxy.CloseSandbox("sb1")
	select {
	case <-keep.err:
	case <-time.After(time.Second):
		t.Fatal("CloseSandbox left a connection open")
	}
}

// A rule change while a connection is being set up (here: while the proxy
// resolves) must still apply to it.
func TestPolicyChangedDuringSetup(t *testing.T) {
	w := newWorld(t, worldOpts{})
	w.setSandbox(srcSB1, "sb1", allowlist("api.example.com"))
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	w.mu.Lock()
	w.resolveHk = func(host string) {
		once.Do(func() {
			close(entered)
			<-release
		})
	}
	w.mu.Unlock()
	res := make(chan int, 1)
	go func() {
		code, _, _, _ := get(t, w.client(srcSB1, w.internetPool), "http://api.example.com/")
		res <- code
	}()
	<-entered
	w.setSandbox(srcSB1, "sb1", allowlist("other.example.com"))
	w.proxy.PolicyChanged("sb1")
	close(release)
	if code := <-res; code == 200 {
		t.Fatal("connection set up under the old rules survived PolicyChanged")
	}
}

func TestDNS(t *testing.T) {
	w := newWorld(t, worldOpts{})
	w.setSandbox(srcSB1, "sb1", Rules{Mode: ModeAllowlist, Allow: []string{"api.example.com", "*.example.net", "rebind.example.com", "mixed.example.com"}, Deny: []string{"bad.example.net"}})
	w.dns["files.example.net"] = []netip.Addr{pubOther, netip.MustParseAddr("2001:db8::1")}

	ctx, cancel := context.WithCancel(context.Background())
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); w.proxy.ServeDNS(ctx, pc) }()
	go func() { defer wg.Done(); w.proxy.ServeDNSTCP(ctx, ln) }()
	defer func() { cancel(); wg.Wait() }()

	for _, tcp := range []bool{false, true} {
		q := func(src netip.Addr, name string, typ uint16) (rcode int, answers []netip.Addr, ok bool) {
			t.Helper()
			return dnsQuery(t, src, pc.LocalAddr().String(), ln.Addr().String(), tcp, name, typ)
		}
		rc, ans, ok := q(srcSB1, "api.example.com.", 1)
		if !ok || rc != 0 || len(ans) != 1 || ans[0] != pubAPI {
			t.Errorf("tcp=%v allowed A: rcode %d %v %v", tcp, rc, ans, ok)
		}
		rc, ans, _ = q(srcSB1, "FILES.example.net.", 1)
		if rc != 0 || len(ans) != 1 || ans[0] != pubOther {
			t.Errorf("tcp=%v wildcard A: rcode %d %v", tcp, rc, ans)
		}
		rc, ans, _ = q(srcSB1, "api.example.com.", 28)
		if rc != 0 || len(ans) != 0 {
			t.Errorf("tcp=%v AAAA: rcode %d %v", tcp, rc, ans)
		}
		rc, _, _ = q(srcSB1, "other.example.com.", 1)
		if rc != 3 {
			t.Errorf("tcp=%v denied: rcode %d, want NXDOMAIN", tcp, rc)
		}
		rc, _, _ = q(srcSB1, "bad.example.net.", 1)
		if rc != 3 {
			t.Errorf("tcp=%v deny entry: rcode %d, want NXDOMAIN", tcp, rc)
		}
		rc, ans, _ = q(srcSB1, "rebind.example.com.", 1)
		if rc != 0 || len(ans) != 0 {
			t.Errorf("tcp=%v rebinding: rcode %d %v", tcp, rc, ans)
		}
		rc, ans, _ = q(srcSB1, "mixed.example.com.", 1)
		if rc != 0 || len(ans) != 1 || ans[0] != pubAPI {
			t.Errorf("tcp=%v mixed: rcode %d %v", tcp, rc, ans)
		}
		rc, _, _ = q(srcSB1, "nonexistent.example.net.", 1)
		if rc != 3 {
			t.Errorf("tcp=%v nonexistent: rcode %d", tcp, rc)
		}
		if _, _, ok := q(srcBad, "api.example.com.", 1); ok {
			t.Errorf("tcp=%v unknown source answered", tcp)
		}
	}
	// Disallowed names were never resolved.
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range w.resolved {
		if n == "other.example.com" || n == "bad.example.net" {
			t.Errorf("resolved disallowed name %s", n)
		}
	}
}

func waitFor(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("timed out waiting for %s (goroutines %d)\n%s", what, runtime.NumGoroutine(), buf[:n])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestOriginalDstNeedsNAT(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			time.Sleep(100 * time.Millisecond)
			c.Close()
		}
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ap, err := OriginalDst(c); err == nil && ap.Addr().IsValid() && ap.Port() != c.LocalAddr().(*net.TCPAddr).AddrPort().Port() {
		t.Fatalf("OriginalDst of an untranslated connection: %v", ap)
	}
}

func TestStreamingAndUpgrade(t *testing.T) {
	w := newWorld(t, worldOpts{})
	w.setSandbox(srcSB1, "sb1", allowlist("api.example.com", "other.example.com"))
	ph := Placeholder("K")
	w.setSecrets("sb1", Secret{Name: "K", Value: "the-real-value", Placeholder: ph, Hosts: []string{"other.example.com"}})
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(w.caPEM)
	for _, url := range []string{"http://api.example.com/sse", "https://other.example.com/sse"} {
		c := w.client(srcSB1, roots)
		c.Timeout = 0
		start := time.Now()
		resp, err := c.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		resp.Body.Close()
		if err != nil || line != "data: first\n" || time.Since(start) > 2*time.Second {
			t.Fatalf("%s: first event %q %v after %v", url, line, err, time.Since(start))
		}
	}

	// Upgrade over plain HTTP and over terminated TLS: after the 101 the
	// bytes flow both ways untouched.
	for _, tlsOn := range []bool{false, true} {
		port := uint16(80)
		if tlsOn {
			port = 443
		}
		raw, err := w.dial(context.Background(), srcSB1, netip.AddrPortFrom(sandboxView, port))
		if err != nil {
			t.Fatal(err)
		}
		var c net.Conn = raw
		host := "api.example.com"
		if tlsOn {
			host = "other.example.com"
			c = tls.Client(raw, &tls.Config{ServerName: host, RootCAs: roots})
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "GET /upgrade HTTP/1.1\r\nHost: "+host+"\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 101 {
			t.Fatalf("tls=%v upgrade: %v %v", tlsOn, resp, err)
		}
		io.WriteString(c, "ping")
		got := make([]byte, 4)
		if _, err := io.ReadFull(br, got); err != nil || string(got) != "ping" {
			t.Fatalf("tls=%v echo: %q %v", tlsOn, got, err)
		}
		c.Close()
	}
}

func TestFullMode(t *testing.T) {
	w := newWorld(t, worldOpts{})
	w.setSandbox(srcSB1, "sb1", Rules{Mode: ModeFull, Deny: []string{"other.example.com"}})
	c := w.client(srcSB1, w.internetPool)
	if code, _, _, err := get(t, c, "https://api.example.com/"); code != 200 {
		t.Fatalf("full, allowed name: %d %v", code, err)
	}
	if code, _, _, _ := get(t, c, "http://other.example.com/"); code != 403 {
		t.Fatalf("full, denied name: %d", code)
	}
	// By address: public addresses go through, special ones never.
	if code, _, _, err := get(t, c, "https://203.0.113.10/"); code != 200 {
		t.Fatalf("full, public IP: %d %v", code, err)
	}
	for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://127.0.0.1/", "http://10.0.0.5/"} {
		if code, _, _, _ := get(t, c, u); code != 403 {
			t.Errorf("full, %s: %d", u, code)
		}
	}
	for _, name := range []string{"meta.example.com", "loop.example.com", "rebind.example.com"} {
		if code, _, _, _ := get(t, c, "http://"+name+"/"); code != 403 {
			t.Errorf("full, %s: %d", name, code)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, d := range w.dials {
		if !strings.HasPrefix(d, "203.0.113.") {
			t.Errorf("dialled %s", d)
		}
	}
}

// A sandbox that reaches the proxy's port directly (no DNAT, so the
// original destination is the proxy itself) gets nothing, even when a CIDR
// would allow that address.
func TestDirectToProxyRefused(t *testing.T) {
	w := newWorld(t, worldOpts{})
	w.setSandbox(srcSB1, "sb1", allowlist("127.0.0.0/8", "*"))
	self := w.ln[5432].Addr().(*net.TCPAddr).AddrPort()
	w.mu.Lock()
	w.fixedDst = self
	w.mu.Unlock()
	c, err := w.dial(context.Background(), srcSB1, netip.AddrPortFrom(pubAPI, 5432))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("direct connection not closed: %v", err)
	}
	if w.dialCount() != 0 {
		t.Fatal("proxy dialled itself")
	}
}
