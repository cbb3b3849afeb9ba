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
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestMatchHost(t *testing.T) {
	for _, tc := range []struct {
		pattern, host string
		want          bool
	}{
		{"pypi.org", "pypi.org", true},
		{"pypi.org", "PyPI.org.", true},
		{"PYPI.ORG", "pypi.org", true},
		{"pypi.org", "files.pypi.org", false},
		{"pypi.org", "evilpypi.org", false},
		{"pypi.org", "pypi.org.evil.com", false},
		{"*.npmjs.org", "registry.npmjs.org", true},
		{"*.npmjs.org", "a.b.npmjs.org", true},
		{"*.npmjs.org", "npmjs.org", false},
		{"*.npmjs.org", "evilnpmjs.org", false},
		{"*.npmjs.org", "npmjs.org.evil.com", false},
		{"*.npmjs.org", ".npmjs.org", false},
		{"*", "anything.example", true},
		{"*", "1.2.3.4", false},
		{"1.2.3.4", "1.2.3.4", false}, // addresses are CIDR entries, not names
		{"10.0.0.0/8", "10.0.0.1", false},
		{"example.com", "", false},
		{"", "example.com", false},
		{"*.", "example.com", false},
		{"ex*ample.com", "example.com", false},
		{"example.com:443", "example.com", false}, // a port entry is not a name pattern
	} {
		t.Run(tc.pattern+"~"+tc.host, func(t *testing.T) {
			if got := MatchHost(tc.pattern, tc.host); got != tc.want {
				t.Errorf("MatchHost(%q, %q) = %v, want %v", tc.pattern, tc.host, got, tc.want)
			}
		})
	}
}

func TestRulesValidate(t *testing.T) {
	good := []string{"pypi.org", "*.npmjs.org", "*", "example.com:443", "10.0.0.0/8", "10.0.0.0/8:5432",
		"1.2.3.4", "1.2.3.4:80", "2001:db8::/32", "[2001:db8::/32]:443", "[::1]:80", "fd00::1", "under_score.example"}
	for _, s := range good {
		if err := (Rules{Mode: ModeAllowlist, Allow: []string{s}}).Validate(); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	bad := []string{"", "exa mple.com", "example.com:0", "example.com:99999", "example.com:http", "[::1", "*.*.com", "1.2.3", "-", "a..b"}
	for _, s := range bad {
		if err := (Rules{Mode: ModeAllowlist, Deny: []string{s}}).Validate(); err == nil {
			t.Errorf("%q: accepted", s)
		}
	}
	if err := (Rules{Mode: "open"}).Validate(); err == nil {
		t.Error("unknown mode accepted")
	}
}

func TestPolicy(t *testing.T) {
	A := netip.MustParseAddr
	al := compile(Rules{Mode: ModeAllowlist, Allow: []string{"pypi.org", "*.npmjs.org", "db.internal", "10.1.0.0/16", "198.51.100.0/24:443", "secure.example:443"},
		Deny: []string{"bad.npmjs.org", "10.1.2.0/24"}}, []netip.Prefix{netip.MustParsePrefix("203.0.113.99/32")})
	full := compile(Rules{Mode: ModeFull, Deny: []string{"evil.com", "8.8.8.8"}}, nil)
	off := compile(Rules{Mode: ModeOff, Allow: []string{"pypi.org"}}, nil)

	names := []struct {
		p    *policy
		host string
		port uint16
		want bool
	}{
		{al, "pypi.org", 443, true},
		{al, "registry.npmjs.org", 80, true},
		{al, "bad.npmjs.org", 443, false},
		{al, "npmjs.org", 443, false},
		{al, "github.com", 443, false},
		{al, "secure.example", 443, true},
		{al, "secure.example", 80, false},
		{al, "secure.example", 0, true}, // DNS: any port
		{al, "10.1.0.1", 443, false},
		{full, "github.com", 443, true},
		{full, "evil.com", 443, false},
		{full, "sub.evil.com", 443, true},
		{off, "pypi.org", 443, false},
	}
	for _, tc := range names {
		if got := tc.p.nameAllowed(tc.host, tc.port); got != tc.want {
			t.Errorf("%s nameAllowed(%q, %d) = %v, want %v", tc.p.mode, tc.host, tc.port, got, tc.want)
		}
	}

	addrs := []struct {
		p    *policy
		ip   string
		port uint16
		want bool
	}{
		{al, "151.101.0.223", 443, true},
		{al, "10.0.0.5", 443, false},
		{al, "10.1.0.5", 443, true},  // allowed CIDR
		{al, "10.1.2.5", 443, false}, // denied CIDR inside it
		{al, "127.0.0.1", 443, false},
		{al, "169.254.169.254", 80, false},
		{al, "100.64.0.1", 443, false},
		{al, "172.16.0.1", 443, false},
		{al, "192.168.1.1", 443, false},
		{al, "224.0.0.1", 443, false},
		{al, "0.0.0.0", 443, false},
		{al, "255.255.255.255", 443, false},
		{al, "::1", 443, false},
		{al, "::", 443, false},
		{al, "fe80::1", 443, false},
		{al, "fd00::1", 443, false},
		{al, "::ffff:10.0.0.5", 443, false},
		{al, "::ffff:151.101.0.223", 443, true},
		{al, "64:ff9b::a00:5", 443, false},
		{al, "2606:4700::1111", 443, true},
		{al, "203.0.113.99", 443, false}, // Config.Blocked
		{full, "10.0.0.5", 443, false},
		{full, "8.8.8.8", 443, false},
		{off, "151.101.0.223", 443, false},
	}
	for _, tc := range addrs {
		if got := tc.p.addrAllowed(A(tc.ip), tc.port); got != tc.want {
			t.Errorf("%s addrAllowed(%s, %d) = %v, want %v", tc.p.mode, tc.ip, tc.port, got, tc.want)
		}
	}

	raws := []struct {
		p    *policy
		ip   string
		port uint16
		want bool
	}{
		{al, "151.101.0.223", 443, false}, // no CIDR: raw IP refused in allowlist
		{al, "10.1.0.5", 5432, true},
		{al, "10.1.2.5", 5432, false},
		{al, "198.51.100.5", 443, true},
		{al, "198.51.100.5", 80, false},
		{full, "151.101.0.223", 443, true},
		{full, "169.254.169.254", 80, false},
		{full, "127.0.0.1", 80, false},
		{full, "8.8.8.8", 53, false},
	}
	for _, tc := range raws {
		if got := tc.p.rawAllowed(A(tc.ip), tc.port); got != tc.want {
			t.Errorf("%s rawAllowed(%s, %d) = %v, want %v", tc.p.mode, tc.ip, tc.port, got, tc.want)
		}
	}
}

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

func TestSecretInjection(t *testing.T) {
	w := newWorld(t, worldOpts{})
	w.setSandbox(srcSB1, "sb1", allowlist("*.example.com"))
	w.setSandbox(srcSB2, "sb2", allowlist("*.example.com"))
	const real = "sk-REAL-0123456789abcdef"
	ph1 := Placeholder("OPENAI")
	ph2 := Placeholder("OPENAI")
	if ph1 == ph2 || !strings.HasPrefix(ph1, "paddock-secret-OPENAI-") {
		t.Fatalf("placeholders %q %q", ph1, ph2)
	}
	w.setSecrets("sb1", Secret{Name: "OPENAI", Value: real, Placeholder: ph1, Hosts: []string{"api.example.com"}})
	w.setSecrets("sb2", Secret{Name: "OPENAI", Value: real, Placeholder: ph2, Hosts: []string{"api.example.com"}})

	// The sandbox trusts only the Paddock CA here, so a successful
	// handshake shows the leaf chains to it.
	c := w.client(srcSB1, w.caPool)
	var leaf *x509.Certificate
	c.Transport.(*http.Transport).TLSClientConfig.VerifyConnection = func(cs tls.ConnectionState) error {
		leaf = cs.PeerCertificates[0]
		return nil
	}
	code, body, _, err := get(t, c, "https://api.example.com/", "Authorization", "Bearer "+ph1)
	if err != nil || code != 200 || body != "hello from api.example.com" {
		t.Fatalf("bound host: %d %q %v", code, body, err)
	}
	if got := w.up.lastAuth(); got != "Bearer "+real {
		t.Fatalf("upstream got Authorization %q", got)
	}
	if leaf == nil || leaf.Issuer.CommonName != CAName || leaf.DNSNames[0] != "api.example.com" {
		t.Fatalf("leaf %v", leaf)
	}
	// Keep-alive on the terminated connection, and a response that echoes
	// the value: masked on the way back.
	code, body, hdr, err := get(t, c, "https://api.example.com/echo-auth", "Authorization", "Bearer "+ph1)
	if err != nil || code != 200 {
		t.Fatalf("echo: %d %v", code, err)
	}
	if strings.Contains(body, real) || strings.Contains(hdr.Get("X-Echo"), real) {
		t.Fatalf("value came back to the sandbox: %q %q", body, hdr.Get("X-Echo"))
	}
	if hdr.Get("X-Echo") != "Bearer "+ph1 || !strings.Contains(body, strings.Repeat("*", len(real))) {
		t.Fatalf("echo not redacted as expected: %q %q", hdr.Get("X-Echo"), body)
	}
	// Streaming upload through the terminated connection.
	req, _ := http.NewRequest("POST", "https://api.example.com/upload", io.LimitReader(zeroReader{}, 1<<20))
	req.Header.Set("Authorization", "Bearer "+ph1)
	req.Header.Set("Expect", "100-continue")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "1048576" {
		t.Fatalf("upload: %q", b)
	}
	// Another sandbox's placeholder is just a string for sb1.
	get(t, c, "https://api.example.com/", "Authorization", "Bearer "+ph2)
	if got := w.up.lastAuth(); got != "Bearer "+ph2 {
		t.Fatalf("sb2's placeholder from sb1 became %q", got)
	}
	// Host must match the SNI on a terminated connection.
	code, _, _, _ = get(t, c, "https://api.example.com/", "Authorization", "Bearer "+ph1, "Host", "other.example.com")
	if code != 421 {
		t.Fatalf("Host mismatch: %d", code)
	}

	// An unbound host: TLS passes through (the client must trust the real
	// server), the placeholder arrives untouched.
	c2 := w.client(srcSB1, w.internetPool)
	code, _, _, err = get(t, c2, "https://other.example.com/", "Authorization", "Bearer "+ph1)
	if err != nil || code != 200 {
		t.Fatalf("unbound host: %d %v", code, err)
	}
	if got := w.up.lastAuth(); got != "Bearer "+ph1 {
		t.Fatalf("unbound host got %q", got)
	}
	// Plain HTTP to the bound host: untouched by default.
	code, _, _, _ = get(t, c2, "http://api.example.com/", "Authorization", "Bearer "+ph1)
	if code != 200 || w.up.lastAuth() != "Bearer "+ph1 {
		t.Fatalf("plain http to bound host: %d %q", code, w.up.lastAuth())
	}
	// ... and substituted where the secret allows plain HTTP.
	w.setSecrets("sb1", Secret{Name: "OPENAI", Value: real, Placeholder: ph1, Hosts: []string{"api.example.com"}, AllowPlainHTTP: true})
	c3 := w.client(srcSB1, w.internetPool)
	code, _, _, _ = get(t, c3, "http://api.example.com/", "Authorization", "Bearer "+ph1)
	if code != 200 || w.up.lastAuth() != "Bearer "+real {
		t.Fatalf("plain http with AllowPlainHTTP: %d %q", code, w.up.lastAuth())
	}

	for i, a := range w.up.allAuth() {
		if strings.Contains(a, real) && a != "Bearer "+real {
			t.Errorf("request %d: odd Authorization %q", i, a)
		}
	}
}

func TestSecretUpstreamVerified(t *testing.T) {
	w := newWorld(t, worldOpts{distrustUpstreams: true})
	w.setSandbox(srcSB1, "sb1", allowlist("api.example.com"))
	ph := Placeholder("K")
	w.setSecrets("sb1", Secret{Name: "K", Value: "v4lue-secret", Placeholder: ph, Hosts: []string{"api.example.com"}})
	c := w.client(srcSB1, w.caPool)
	code, body, _, err := get(t, c, "https://api.example.com/", "Authorization", ph)
	if err != nil || code != 502 || strings.Contains(body, "v4lue-secret") {
		t.Fatalf("unverified upstream: %d %q %v", code, body, err)
	}
	if w.up.lastAuth() != "<none>" {
		t.Fatalf("unverified upstream got a request: %q", w.up.lastAuth())
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

func TestConnectionCap10000(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 10,000 connections")
	}
	const cap = 64
	const attempts = 10000
	// A long peek timeout keeps the connections inside the cap open for
	// the whole test, however slow the machine.
	w := newWorld(t, worldOpts{maxConns: cap, peekTimeout: 5 * time.Minute})
	w.setSandbox(srcSB1, "sb1", allowlist("api.example.com"))
	// Direct dialling, no OriginalDst map entries needed for refused
	// connections; allowed ones wait in the ClientHello peek.
	w.mu.Lock()
	w.fixedDst = netip.AddrPortFrom(pubAPI, 443)
	w.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	base := runtime.NumGoroutine()

	var mu sync.Mutex
	var conns []net.Conn
	var refused, dialErrs, maxSeen atomic.Int64
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: srcSB1.AsSlice()}}
			for range jobs {
				c, err := d.Dial("tcp", w.ln[443].Addr().String())
				if err != nil {
					dialErrs.Add(1)
					continue
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
				if n := int64(w.proxy.Conns("sb1")); n > maxSeen.Load() {
					maxSeen.Store(n)
				}
			}
		}()
	}
	for i := range attempts {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if dialErrs.Load() > 0 {
		t.Logf("%d dial errors", dialErrs.Load())
	}
	if ms := maxSeen.Load(); ms > cap {
		t.Fatalf("saw %d live connections, cap %d", ms, cap)
	}
	// Every connection over the cap is closed by the proxy at once.
	var rwg sync.WaitGroup
	idx := make(chan net.Conn)
	for range 64 {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			buf := make([]byte, 1)
			for c := range idx {
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				if _, err := c.Read(buf); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
					refused.Add(1)
				}
			}
		}()
	}
	for _, c := range conns {
		idx <- c
	}
	close(idx)
	rwg.Wait()
	t.Logf("%d attempts, %d connected, %d closed by the proxy, cap %d, goroutines during: %d (base %d)",
		attempts, len(conns), refused.Load(), cap, runtime.NumGoroutine(), base)
	if want := int64(len(conns) - cap); refused.Load() < want {
		t.Fatalf("only %d connections refused, want at least %d", refused.Load(), want)
	}
	if n := w.proxy.Conns("sb1"); n != cap {
		t.Fatalf("%d live connections, want the cap %d", n, cap)
	}
	for _, c := range conns {
		c.Close()
	}
	// Everything is released: connections, goroutines.
	waitFor(t, 10*time.Second, "connections released", func() bool { return w.proxy.Conns("sb1") == 0 })
	waitFor(t, 10*time.Second, "goroutines back to baseline", func() bool { return runtime.NumGoroutine() <= base })

	// The proxy still serves.
	w.mu.Lock()
	w.fixedDst = netip.AddrPort{}
	w.mu.Unlock()
	if code, _, _, err := get(t, w.client(srcSB1, w.internetPool), "https://api.example.com/"); code != 200 {
		t.Fatalf("after the storm: %d %v", code, err)
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

func TestBandwidthLimit(t *testing.T) {
	const rate = 512 << 10 // bytes per second, per direction
	w := newWorld(t, worldOpts{bps: rate})
	w.setSandbox(srcSB1, "sb1", allowlist("api.example.com"))

	measure := func(t *testing.T, url string) {
		c := w.client(srcSB1, w.internetPool)
		c.Timeout = 0
		resp, err := c.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		start := time.Now()
		var n int64
		buf := make([]byte, 32<<10)
		for time.Since(start) < 1500*time.Millisecond {
			m, err := resp.Body.Read(buf)
			n += int64(m)
			if err != nil {
				t.Fatal(err)
			}
		}
		el := time.Since(start).Seconds()
		got := float64(n) / el
		t.Logf("%s: %d bytes in %.2fs = %.0f B/s (limit %d)", url, n, el, got, rate)
		if got > 2*rate {
			t.Errorf("%.0f B/s is more than twice the limit %d", got, rate)
		}
		if got < rate/4 {
			t.Errorf("%.0f B/s is far below the limit %d", got, rate)
		}
	}
	t.Run("https", func(t *testing.T) { measure(t, "https://api.example.com/endless") })
	t.Run("http", func(t *testing.T) { measure(t, "http://api.example.com/endless") })
	t.Run("upload", func(t *testing.T) {
		c := w.client(srcSB1, w.internetPool)
		start := time.Now()
		body := io.LimitReader(zeroReader{}, rate*3/2)
		resp, err := c.Post("http://api.example.com/upload", "application/octet-stream", body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		el := time.Since(start).Seconds()
		got := float64(rate*3/2) / el
		t.Logf("upload: %.2fs = %.0f B/s (limit %d)", el, got, rate)
		if got > 2*rate {
			t.Errorf("upload %.0f B/s is more than twice the limit", got)
		}
	})
}

func TestNewCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	ca, pem1, err := NewCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ca.Leaf.Subject.CommonName != CAName || !ca.Leaf.IsCA {
		t.Fatalf("CA %v", ca.Leaf.Subject)
	}
	if yrs := ca.Leaf.NotAfter.Sub(ca.Leaf.NotBefore).Hours() / 24 / 365; yrs < 9.9 {
		t.Fatalf("CA valid %.1f years", yrs)
	}
	fi, err := os.Stat(filepath.Join(dir, CAKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file %v %v", fi, err)
	}
	_, pem2, err := NewCA(dir)
	if err != nil || string(pem1) != string(pem2) {
		t.Fatalf("reload gave a different CA: %v", err)
	}
	// A leaf chains to it and names the host.
	lc := newLeafCache(ca)
	leaf, err := lc.get("api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Leaf)
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "api.example.com", Roots: pool}); err != nil {
		t.Fatal(err)
	}
	if again, _ := lc.get("api.example.com"); again != leaf {
		t.Fatal("leaf not cached")
	}
	// Half a CA is an error, not a silent replacement.
	os.Remove(filepath.Join(dir, CACertFile))
	if _, _, err := NewCA(dir); err == nil {
		t.Fatal("incomplete CA accepted")
	}
}

func TestRedactReader(t *testing.T) {
	secret := Secret{Value: "TOPSECRET", Placeholder: "paddock-secret-x"}
	in := "aTOPSECRETbTOPSECRTOPSECRETcTOPSECRE"
	want := "a*********bTOPSECR*********cTOPSECRE"
	for _, chunk := range []int{1, 2, 3, 5, 7, 100} {
		r := newRedactReader(io.NopCloser(&chunkReader{s: in, n: chunk}), []Secret{secret})
		got, err := io.ReadAll(r)
		if err != nil || string(got) != want {
			t.Errorf("chunk %d: %q %v, want %q", chunk, got, err, want)
		}
	}
}

type chunkReader struct {
	s string
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.s == "" {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.n)], c.s)
	c.s = c.s[n:]
	return n, nil
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

// When the upstream drops an idle keep-alive connection, the sandbox's
// connection is dropped too, so its client retries instead of seeing 502.
func TestUpstreamIdleClose(t *testing.T) {
	w := newWorld(t, worldOpts{})
	w.setSandbox(srcSB1, "sb1", allowlist("api.example.com"))
	c := w.client(srcSB1, w.internetPool)
	for i := range 3 {
		code, body, _, err := get(t, c, "http://api.example.com/")
		if err != nil || code != 200 {
			t.Fatalf("request %d: %d %q %v", i, code, body, err)
		}
		w.plainSrv.CloseClientConnections()
		time.Sleep(20 * time.Millisecond)
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
