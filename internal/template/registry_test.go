package template

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

func TestRegistryPolicyAllowedAddr(t *testing.T) {
	p, err := NewRegistryPolicy([]string{"ghcr.io", "Reg.Internal:5000", "127.0.0.1:5001", "10.9.0.0/16", "*"},
		[]netip.Prefix{netip.MustParsePrefix("198.51.100.7/32")})
	if err != nil {
		t.Fatal(err)
	}
	strict, _ := NewRegistryPolicy([]string{"ghcr.io"}, nil)
	def, _ := NewRegistryPolicy(nil, nil)
	A := netip.MustParseAddr
	for _, tc := range []struct {
		p        *RegistryPolicy
		host, ip string
		port     string
		want     bool
	}{
		{p, "ghcr.io", "10.1.1.1", "443", true}, // listed by name: any address
		{p, "reg.internal", "192.168.0.3", "5000", true},
		{p, "reg.internal", "192.168.0.3", "443", false},
		{p, "127.0.0.1", "127.0.0.1", "5001", true},
		{p, "127.0.0.1", "127.0.0.1", "5002", false},
		{p, "evil.example", "127.0.0.1", "5001", true}, // the address is listed
		{p, "evil.example", "127.0.0.2", "443", false},
		{p, "x.example", "10.9.3.3", "443", true},
		{p, "x.example", "169.254.169.254", "80", false},
		{p, "x.example", "198.51.100.7", "443", false}, // this host
		{p, "x.example", "8.8.8.8", "443", true},
		{p, "x.example", "::1", "443", false},
		{p, "x.example", "::ffff:127.0.0.1", "443", false},
		{strict, "x.example", "8.8.8.8", "443", false},
		{strict, "ghcr.io", "140.82.1.1", "443", true},
		{def, "x.example", "8.8.8.8", "443", true},
		{def, "x.example", "10.0.0.1", "443", false},
		{def, "localhost", "127.0.0.1", "5000", false},
	} {
		if got := tc.p.allowedAddr(tc.host, A(tc.ip), tc.port); got != tc.want {
			t.Errorf("%s (%s) port %s: %v, want %v", tc.host, tc.ip, tc.port, got, tc.want)
		}
	}
	if _, err := NewRegistryPolicy([]string{"a b"}, nil); err == nil {
		t.Error("bad entry accepted")
	}
}

// countingListener serves HTTP on loopback, counting accepted
// connections, and answers every request with a body that must never
// reach an error message.
func countingListener(t *testing.T) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = &atomic.Int64{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"errors":[{"code":"DENIED","message":"UPSTREAM-SECRET root:x:0:0"}]}`))
	}), ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			accepted.Add(1)
		}
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), accepted
}

func TestRegistryImportRefusedAndUniform(t *testing.T) {
	open, accepted := countingListener(t)
	closed := func() string {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		a := ln.Addr().String()
		ln.Close()
		return a
	}()
	ctx := context.Background()
	// Default policy: loopback is never dialled.
	e := newEnv(t, func(c *Config) { c.Registries, _ = NewRegistryPolicy(nil, nil) })
	var msgs []string
	for _, host := range []string{open, closed, "localhost:" + strings.Split(open, ":")[1]} {
		_, err := e.store.Pull(ctx, "x", Source{Registry: host + "/app:v1"})
		if !errors.Is(err, ErrRegistry) {
			t.Fatalf("%s: %v, want ErrRegistry", host, err)
		}
		msgs = append(msgs, strings.ReplaceAll(err.Error(), host, "HOST"))
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("refused registry accepted %d connections", n)
	}
	// Listed: the open port is reached, yet open and closed ports give the
	// same error, without the upstream's words.
	e2 := newEnv(t, func(c *Config) { c.Registries, _ = NewRegistryPolicy([]string{"127.0.0.1"}, nil) })
	for _, host := range []string{open, closed} {
		_, err := e2.store.Pull(ctx, "x", Source{Registry: host + "/app:v1"})
		if !errors.Is(err, ErrRegistry) || strings.Contains(err.Error(), "UPSTREAM-SECRET") || strings.Contains(err.Error(), "DENIED") {
			t.Fatalf("%s: %v", host, err)
		}
		msgs = append(msgs, strings.ReplaceAll(err.Error(), host, "HOST"))
	}
	if accepted.Load() == 0 {
		t.Error("listed registry was not reached")
	}
	for _, m := range msgs[1:] {
		if m != msgs[0] {
			t.Errorf("errors differ: %q vs %q", m, msgs[0])
		}
	}
	// And a real listed registry works.
	r := newRegistry(t)
	img, _ := random.Image(512, 1)
	ref := r.push(t, "ok", img)
	if _, err := e2.store.Pull(ctx, "ok", Source{Registry: ref}); err != nil {
		t.Fatalf("listed registry: %v", err)
	}
	var _ v1.Image = img
}
