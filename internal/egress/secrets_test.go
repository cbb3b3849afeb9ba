package egress

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
