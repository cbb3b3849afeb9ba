package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Network modes. A sandbox in ModeOff never reaches the proxy (it has no
// network), but the proxy refuses everything for it all the same.
const (
	ModeOff       = "off"
	ModeAllowlist = "allowlist"
	ModeFull      = "full"
)

// Rules is one sandbox's egress policy.
//
// Allow and Deny entries are host names ("pypi.org"), wildcards
// ("*.npmjs.org": any name below npmjs.org, at any depth, but not npmjs.org
// itself; "*" alone: every name), IP addresses or CIDR prefixes
// ("10.0.0.0/8", "2001:db8::/32"), each optionally followed by ":port"
// ("example.com:443", "10.1.2.3:5432", "[2001:db8::/32]:443"). An entry
// with a port applies to that port only.
//
// In ModeAllowlist a connection is allowed when its name (TLS SNI or HTTP
// Host) matches an Allow entry and no Deny entry; a connection without a
// name (or naming an IP literal) is allowed only when its address is in an
// Allow prefix. In ModeFull everything not denied is allowed, except
// connections without a name to special addresses. In both modes the
// addresses a name resolves to must not be private, loopback, link-local,
// multicast, unspecified, CGNAT or otherwise special unless an Allow prefix
// covers them, and must not be in a Deny prefix.
type Rules struct {
	Mode  string   `json:"mode"`
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// entry is one parsed Allow or Deny item.
type entry struct {
	name     string // lowercased, without a trailing dot; "" for a prefix
	wildcard bool   // name is a "*." suffix: matches names strictly below it
	any      bool   // "*": every name
	prefix   netip.Prefix
	port     uint16 // 0: any port
}

func (e entry) isPrefix() bool { return e.prefix.IsValid() }

func (e entry) portOK(port uint16) bool { return e.port == 0 || e.port == port }

func (e entry) matchName(host string) bool {
	switch {
	case e.isPrefix():
		return false
	case e.any:
		return true
	case e.wildcard:
		return len(host) > len(e.name)+1 && strings.HasSuffix(host, e.name) && host[len(host)-len(e.name)-1] == '.'
	default:
		return host == e.name
	}
}

// parseEntry parses one Allow or Deny item.
func parseEntry(s string) (entry, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return entry{}, errors.New("empty entry")
	}
	var e entry
	hostPart := s
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return entry{}, fmt.Errorf("%q: missing ]", s)
		}
		hostPart = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return entry{}, fmt.Errorf("%q: junk after ]", s)
			}
			p, err := parsePort(rest[1:])
			if err != nil {
				return entry{}, fmt.Errorf("%q: %w", s, err)
			}
			e.port = p
		}
	} else if _, err := netip.ParsePrefix(s); err == nil {
		hostPart = s
	} else if _, err := netip.ParseAddr(s); err == nil {
		hostPart = s
	} else if i := strings.LastIndexByte(s, ':'); i >= 0 {
		p, err := parsePort(s[i+1:])
		if err != nil {
			return entry{}, fmt.Errorf("%q: %w", s, err)
		}
		e.port = p
		hostPart = s[:i]
	}
	if pfx, err := netip.ParsePrefix(hostPart); err == nil {
		e.prefix = canonPrefix(pfx)
		return e, nil
	}
	if a, err := netip.ParseAddr(hostPart); err == nil {
		if a.Zone() != "" {
			return entry{}, fmt.Errorf("%q: zoned address", s)
		}
		a = a.Unmap()
		e.prefix = netip.PrefixFrom(a, a.BitLen())
		return e, nil
	}
	name := strings.ToLower(strings.TrimSpace(hostPart))
	if name == "*" {
		e.any = true
		return e, nil
	}
	if strings.HasPrefix(name, "*.") {
		e.wildcard = true
		name = name[2:]
	}
	name = strings.TrimSuffix(name, ".")
	if !validName(name) {
		return entry{}, fmt.Errorf("%q: not a host name, wildcard, address or prefix", s)
	}
	e.name = name
	return e, nil
}

func canonPrefix(p netip.Prefix) netip.Prefix {
	a := p.Addr()
	bits := p.Bits()
	if a.Is4In6() && bits >= 96 {
		a = a.Unmap()
		bits -= 96
	}
	return netip.PrefixFrom(a, bits).Masked()
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("bad port %q", s)
	}
	return uint16(n), nil
}

// normalizeHost lowercases a name and drops one trailing dot.
func normalizeHost(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	return strings.TrimSuffix(h, ".")
}

// validName reports whether s is a plausible DNS name: labels of letters,
// digits, '-' (not at either end) and '_', 1–63 bytes each, 253 bytes in
// all, not all digits at the top (so "1.2.3" is not taken for a name).
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	top := labels[len(labels)-1]
	if strings.Trim(top, "0123456789") == "" {
		return false
	}
	return true
}

// Validate reports the first malformed entry or an unknown mode. The API
// layer calls it before accepting rules; the proxy ignores bad entries.
func (r Rules) Validate() error {
	switch r.Mode {
	case ModeOff, ModeAllowlist, ModeFull:
	default:
		return fmt.Errorf("egress: unknown network mode %q", r.Mode)
	}
	for _, s := range r.Allow {
		if _, err := parseEntry(s); err != nil {
			return fmt.Errorf("egress: allow: %w", err)
		}
	}
	for _, s := range r.Deny {
		if _, err := parseEntry(s); err != nil {
			return fmt.Errorf("egress: deny: %w", err)
		}
	}
	return nil
}

// MatchHost reports whether host matches one name pattern: an exact name,
// "*.suffix" (any name strictly below suffix, not suffix itself) or "*"
// (any name). Comparison ignores case and a trailing dot. IP literals never
// match a name pattern; use a CIDR entry for addresses.
func MatchHost(pattern, host string) bool {
	host = normalizeHost(host)
	if host == "" || isIPLiteral(host) {
		return false
	}
	e, err := parseEntry(pattern)
	if err != nil || e.isPrefix() || e.port != 0 {
		return false
	}
	return e.matchName(host)
}

func isIPLiteral(h string) bool {
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	_, err := netip.ParseAddr(h)
	return err == nil
}

// policy is Rules compiled for evaluation, with the proxy's extra blocked
// ranges.
type policy struct {
	mode        string
	allow, deny []entry
	blocked     []netip.Prefix
	ceiling     *Ceiling
}

func compile(r Rules, blocked []netip.Prefix, ceiling *Ceiling) *policy {
	p := &policy{mode: r.Mode, blocked: blocked, ceiling: ceiling}
	for _, s := range r.Allow {
		if e, err := parseEntry(s); err == nil {
			p.allow = append(p.allow, e)
		}
	}
	for _, s := range r.Deny {
		if e, err := parseEntry(s); err == nil {
			p.deny = append(p.deny, e)
		}
	}
	return p
}

func (p *policy) on() bool { return p.mode == ModeAllowlist || p.mode == ModeFull }

// nameAllowed reports whether connections to host on port may proceed (the
// resolved addresses are checked separately). Port 0 asks about the name
// on any port, as DNS does: Allow entries then match whatever their port,
// and only port-less Deny entries apply.
func (p *policy) nameAllowed(host string, port uint16) bool {
	if !p.on() || host == "" || isIPLiteral(host) {
		return false
	}
	for _, e := range p.deny {
		if e.matchName(host) && (port == 0 && e.port == 0 || port != 0 && e.portOK(port)) {
			return false
		}
	}
	if p.mode == ModeFull {
		return true
	}
	for _, e := range p.allow {
		if e.matchName(host) && (port == 0 || e.portOK(port)) {
			return true
		}
	}
	return false
}

func (p *policy) inPrefix(list []entry, ip netip.Addr, port uint16, denyList bool) bool {
	for _, e := range list {
		if !e.isPrefix() || !e.prefix.Contains(ip) {
			continue
		}
		if port == 0 && (!denyList || e.port == 0) || port != 0 && e.portOK(port) {
			return true
		}
	}
	return false
}

// addrAllowed reports whether the proxy may connect to ip (an answer for an
// allowed name) on port. Port 0 means any port (used by DNS).
func (p *policy) addrAllowed(ip netip.Addr, port uint16) bool {
	ip = ip.Unmap()
	if !p.on() || !ip.IsValid() || ip.Zone() != "" {
		return false
	}
	if p.inPrefix(p.deny, ip, port, true) || p.ceiling.Refused(ip) != "" {
		return false
	}
	if p.special(ip) {
		return p.inPrefix(p.allow, ip, port, false)
	}
	return true
}

// rawAllowed reports whether a connection that names no host (or names an
// IP literal) may go to ip on port.
func (p *policy) rawAllowed(ip netip.Addr, port uint16) bool {
	ip = ip.Unmap()
	if !p.on() || !ip.IsValid() || ip.Zone() != "" {
		return false
	}
	if p.inPrefix(p.deny, ip, port, true) || p.ceiling.Refused(ip) != "" {
		return false
	}
	if p.inPrefix(p.allow, ip, port, false) {
		return true
	}
	return p.mode == ModeFull && !p.special(ip)
}

func (p *policy) special(ip netip.Addr) bool {
	if isSpecial(ip) {
		return true
	}
	for _, b := range p.blocked {
		if b.Contains(ip) {
			return true
		}
	}
	return false
}

// specialPrefixes are the ranges an answer may not point into unless an
// Allow prefix covers it: private, loopback, link-local (169.254/16 holds
// the cloud metadata service), CGNAT, multicast, reserved, unspecified,
// and the IPv6 ranges that embed or translate IPv4 addresses.
var specialPrefixes = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8",
		"169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24", "192.168.0.0/16",
		"198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4",
		"::/96", "::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64",
		"2001::/32", "2002::/16", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

func isSpecial(ip netip.Addr) bool {
	ip = ip.Unmap()
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return true
	}
	for _, p := range specialPrefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// HostPrefixes lists the addresses of this host's interfaces as single
// address prefixes, for Config.Blocked: a sandbox must not reach the host's
// own services through a public address either.
func HostPrefixes() ([]netip.Prefix, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ipn.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
	}
	return out, nil
}
