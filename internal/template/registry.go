package template

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/paddock-sandbox/paddock/internal/egress"
)

// ErrRegistry is the one error a registry import gets for anything that
// goes wrong between the daemon and the registry: a host the operator's
// RegistryPolicy does not allow, a name resolving into a refused range, a
// closed or filtered port, a TLS failure, an HTTP error from upstream. It
// never carries the upstream's words, so a tenant cannot use imports to
// read or probe services the daemon can reach; the daemon's log has the
// details.
var ErrRegistry = errors.New("the registry could not be reached, is not allowed by the daemon's registry policy (paddockd --registry-allow), or does not have the image")

// RegistryPolicy says which registries imports may fetch from. Entries
// are host names ("ghcr.io"), "host:port", addresses or CIDR prefixes
// ("127.0.0.1:5000", "10.0.0.0/8"), and "*". A listed registry may
// resolve to any address, private ones included; "*" admits any other
// registry whose every address is public (not loopback, link-local,
// private, CGNAT, multicast, reserved or an address of this host). Every
// connection, redirects included, is checked: names are resolved by the
// daemon and the checked address is dialled, so DNS cannot rebind a
// registry into a refused range between the check and the connection.
type RegistryPolicy struct {
	names   []hostPort // listed by name
	prefs   []prefPort // listed by address
	public  bool       // "*"
	ceiling egress.Ceiling
	resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	rt      http.RoundTripper
}

type hostPort struct {
	host string
	port string // "" = any
}

type prefPort struct {
	prefix netip.Prefix
	port   string
}

// DefaultRegistryPolicy is "*": public registries only.
var DefaultRegistryPolicy = []string{"*"}

// NewRegistryPolicy parses entries (nil or empty: DefaultRegistryPolicy).
// host are this host's own addresses, refused like private ones unless
// listed.
func NewRegistryPolicy(entries []string, host []netip.Prefix) (*RegistryPolicy, error) {
	if len(entries) == 0 {
		entries = DefaultRegistryPolicy
	}
	p := &RegistryPolicy{ceiling: egress.Ceiling{Host: host},
		resolve: func(ctx context.Context, h string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", h)
		}}
	for _, e := range entries {
		e = strings.ToLower(strings.TrimSpace(e))
		if e == "*" {
			p.public = true
			continue
		}
		h, port := e, ""
		if hh, pp, err := net.SplitHostPort(e); err == nil {
			h, port = strings.Trim(hh, "[]"), pp
		}
		if pfx, err := netip.ParsePrefix(h); err == nil {
			p.prefs = append(p.prefs, prefPort{pfx.Masked(), port})
		} else if a, err := netip.ParseAddr(h); err == nil {
			p.prefs = append(p.prefs, prefPort{netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), port})
		} else if h != "" && !strings.ContainsAny(h, "/ ") {
			p.names = append(p.names, hostPort{strings.TrimSuffix(h, "."), port})
		} else {
			return nil, fmt.Errorf("registry policy entry %q: want host, host:port, address, CIDR or *", e)
		}
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil // a proxy would make the checked address moot
	t.DialContext = p.dial
	p.rt = t
	return p, nil
}

func portOK(want, got string) bool { return want == "" || want == got }

// allowedAddr reports whether a connection to ip:port for host may go.
func (p *RegistryPolicy) allowedAddr(host string, ip netip.Addr, port string) bool {
	ip = ip.Unmap()
	for _, n := range p.names {
		if n.host == host && portOK(n.port, port) {
			return true
		}
	}
	for _, pp := range p.prefs {
		if pp.prefix.Contains(ip) && portOK(pp.port, port) {
			return true
		}
	}
	return p.public && p.ceiling.Refused(ip) == ""
}

// dial is the transport's DialContext: it resolves addr's host itself,
// keeps only the addresses the policy allows and dials those.
func (p *RegistryPolicy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	var ips []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{a}
	} else if ips, err = p.resolve(ctx, host); err != nil {
		return nil, err
	}
	var d net.Dialer
	var lastErr error = fmt.Errorf("registry %s: no allowed address", addr)
	for _, ip := range ips {
		if !p.allowedAddr(host, ip, port) {
			continue
		}
		c, err := d.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// transport returns the registry transport: it dials only through the
// policy and ignores any environment proxy.
func (p *RegistryPolicy) transport() http.RoundTripper { return p.rt }

// registryErr turns an error from fetching a registry image into
// ErrRegistry, keeping only the store's own verdicts (limits, budget,
// unsafe content, a bad reference, cancellation): whatever came from the
// network or the upstream is logged, never returned.
func (s *Store) registryErr(ref string, err error) error {
	if err == nil {
		return nil
	}
	for _, keep := range []error{ErrLimit, ErrBudget, ErrUnsafe, ErrInvalid, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, keep) {
			return err
		}
	}
	s.log.Warn("template: registry import failed", "ref", ref, "err", err)
	return fmt.Errorf("image %q: %w", ref, ErrRegistry)
}
