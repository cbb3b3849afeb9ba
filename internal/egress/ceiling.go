package egress

import (
	"errors"
	"fmt"
	"net/netip"
)

// ErrCeiling classifies the errors Ceiling.CheckRules returns: a tenant's
// Allow entry names addresses the operator has not opened to tenants.
var ErrCeiling = errors.New("network entry refused by the operator's policy")

// Ceiling is the operator's bound on what a tenant's network policy may
// open: loopback, link-local (the cloud metadata service), private,
// shared (CGNAT), unique-local, unspecified, multicast, broadcast and
// other special-purpose ranges, the host's own addresses and the daemon's
// sandbox pool are never reachable by a tenant's Allow entry, nor through
// any name that resolves into them, unless an Allow prefix of the
// operator (paddockd --network-allow-private) covers them. The pool is
// never opened: sandboxes do not reach each other.
//
// The zero Ceiling refuses every special range and lifts none.
type Ceiling struct {
	// Allow are the ranges the operator opens to tenants (a tenant must
	// still name them in its own Allow list).
	Allow []netip.Prefix
	// Host are the host's own addresses (HostPrefixes).
	Host []netip.Prefix
	// Pool are the daemon's sandbox address ranges; never opened.
	Pool []netip.Prefix
}

// ceilingRange is one range a tenant may not reach, with the reason
// given in errors.
type ceilingRange struct {
	prefix netip.Prefix
	reason string
}

// ceilingRanges are the special-purpose ranges every tenant is kept out
// of unless the operator opens them.
var ceilingRanges = func() []ceilingRange {
	var out []ceilingRange
	for _, r := range [][2]string{
		{"0.0.0.0/8", "unspecified (this network)"},
		{"10.0.0.0/8", "private (RFC 1918)"},
		{"100.64.0.0/10", "shared address space (CGNAT)"},
		{"127.0.0.0/8", "loopback"},
		{"169.254.0.0/16", "link-local (cloud metadata service)"},
		{"172.16.0.0/12", "private (RFC 1918)"},
		{"192.0.0.0/24", "IETF protocol assignments"},
		{"192.168.0.0/16", "private (RFC 1918)"},
		{"198.18.0.0/15", "benchmarking"},
		{"224.0.0.0/4", "multicast"},
		{"240.0.0.0/4", "reserved and broadcast"},
		{"::/128", "unspecified"},
		{"::1/128", "loopback"},
		{"::/96", "IPv4-compatible"},
		{"::ffff:0:0/96", "IPv4-mapped"},
		{"64:ff9b::/96", "NAT64"},
		{"64:ff9b:1::/48", "NAT64"},
		{"100::/64", "discard"},
		{"2001::/32", "Teredo"},
		{"2002::/16", "6to4"},
		{"fc00::/7", "unique local (ULA)"},
		{"fe80::/10", "link-local"},
		{"fec0::/10", "site-local"},
		{"ff00::/8", "multicast"},
	} {
		out = append(out, ceilingRange{netip.MustParsePrefix(r[0]), r[1]})
	}
	return out
}()

// ranges lists every range of c with its reason: the pool first, the
// host's addresses last; liftable reports whether the operator may open it.
func (c *Ceiling) ranges(yield func(r ceilingRange, liftable bool) bool) {
	if c != nil {
		for _, p := range c.Pool {
			if !yield(ceilingRange{p, "the daemon's sandbox address pool"}, false) {
				return
			}
		}
	}
	for _, r := range ceilingRanges {
		if !yield(r, true) {
			return
		}
	}
	if c != nil {
		for _, p := range c.Host {
			if !yield(ceilingRange{p, "an address of the daemon's host"}, true) {
				return
			}
		}
	}
}

// lifted reports whether the operator's Allow covers all of p.
func (c *Ceiling) lifted(p netip.Prefix) bool {
	if c == nil {
		return false
	}
	for _, a := range c.Allow {
		if a.Bits() <= p.Bits() && a.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// Refused returns why ip is out of tenants' reach ("" when it is not).
func (c *Ceiling) Refused(ip netip.Addr) string {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.Zone() != "" {
		return "not a plain address"
	}
	reason := ""
	c.ranges(func(r ceilingRange, liftable bool) bool {
		if r.prefix.Contains(ip) && (!liftable || !c.lifted(netip.PrefixFrom(ip, ip.BitLen()))) {
			reason = r.reason
			return false
		}
		return true
	})
	return reason
}

// CheckPrefix reports whether a tenant may name p in an Allow entry:
// every part of p that falls into a refused range must lie inside one
// operator Allow prefix. Errors wrap ErrCeiling and give the reason.
func (c *Ceiling) CheckPrefix(p netip.Prefix) error {
	p = canonPrefix(p)
	var err error
	c.ranges(func(r ceilingRange, liftable bool) bool {
		if !p.Overlaps(r.prefix) {
			return true
		}
		inter := p
		if r.prefix.Bits() > p.Bits() {
			inter = r.prefix
		}
		if !liftable {
			err = fmt.Errorf("%w: %s reaches %s, which is %s", ErrCeiling, p, r.prefix, r.reason)
			return false
		}
		if !c.lifted(inter) {
			err = fmt.Errorf("%w: %s reaches %s, which is %s (an operator opens ranges with paddockd --network-allow-private)",
				ErrCeiling, p, r.prefix, r.reason)
			return false
		}
		return true
	})
	return err
}

// CheckRules checks every address entry of r's Allow list against the
// ceiling (Deny entries only take away, and names are checked on every
// answer by the proxy and the resolver). Errors wrap ErrCeiling.
func (c *Ceiling) CheckRules(r Rules) error {
	for _, s := range r.Allow {
		e, err := parseEntry(s)
		if err != nil || !e.isPrefix() {
			continue
		}
		if err := c.CheckPrefix(e.prefix); err != nil {
			return fmt.Errorf("allow entry %q: %w", s, err)
		}
	}
	return nil
}
