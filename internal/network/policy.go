package network

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Mode is a sandbox's network mode.
type Mode string

// The network modes. The zero Mode means ModeOff.
const (
	// ModeOff: no connectivity at all. Setup gives the sandbox a pinned
	// namespace holding only lo; Update to another mode attaches it
	// later, and Update to ModeOff detaches an attached one (its veth
	// pair, rules, lease and connections go; the namespace stays).
	ModeOff Mode = "off"
	// ModeAllowlist: TCP 80 and 443 (and the ports named by name
	// entries) go to the egress proxy, which checks the HTTP Host or TLS
	// SNI against Allow; DNS goes to the daemon's resolver; only CIDR
	// entries of Allow are reachable directly; everything else is dropped.
	ModeAllowlist Mode = "allowlist"
	// ModeFull: everything is forwarded and masqueraded except
	// link-local, loopback, private and reserved ranges and the host's own
	// addresses, unless a CIDR entry of Allow names them. DNS still goes
	// to the daemon's resolver.
	ModeFull Mode = "full"
)

// MaxEntries bounds each of Policy.Allow and Policy.Deny.
const MaxEntries = 256

// ErrInvalidPolicy classifies every error Policy.Validate returns.
var ErrInvalidPolicy = errors.New("invalid network policy")

// Policy is a sandbox's network policy, the wire shape of
// {"mode":…,"allow":[…],"deny":[…]}. Entries are host names
// ("pypi.org"), wildcards ("*.npmjs.org": any name below npmjs.org, not
// npmjs.org itself), IPv4 addresses or CIDRs ("10.0.0.0/8"), each with an
// optional ":port" suffix ("10.1.2.3:5432", "git.example.com:8443").
//
// Name entries are enforced by the egress proxy and the DNS resolver
// (allowlist mode); address entries are enforced by the packet filter. Deny
// wins over Allow. In full mode Deny may hold only address entries: nothing
// that looks at names is on the path there.
type Policy struct {
	Mode  Mode     `json:"mode"`
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// Validate reports whether p is well formed. Errors wrap ErrInvalidPolicy.
func (p Policy) Validate() error {
	_, err := compile(p)
	return err
}

// Entry is one parsed Allow or Deny entry: either a host name (Host, with
// Wildcard for "*." entries, Host then being the suffix) or an IPv4 Prefix.
// Port 0 means any port.
type Entry struct {
	Host     string
	Wildcard bool
	Prefix   netip.Prefix
	Port     uint16
}

// IsName reports whether e names a host rather than addresses.
func (e Entry) IsName() bool { return e.Host != "" }

// String returns e in the form ParseEntry accepts.
func (e Entry) String() string {
	var s string
	switch {
	case e.Wildcard:
		s = "*." + e.Host
	case e.Host != "":
		s = e.Host
	default:
		s = e.Prefix.String()
	}
	if e.Port != 0 {
		s += ":" + strconv.Itoa(int(e.Port))
	}
	return s
}

// MatchHost reports whether a connection to host:port is covered by e.
// host is compared case-insensitively, with any trailing dot removed.
// Address entries match a host given as an IPv4 literal.
func (e Entry) MatchHost(host string, port uint16) bool {
	if e.Port != 0 && e.Port != port {
		return false
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if e.Host == "" {
		a, err := netip.ParseAddr(host)
		return err == nil && e.Prefix.Contains(a.Unmap())
	}
	if e.Wildcard {
		return strings.HasSuffix(host, "."+e.Host)
	}
	return host == e.Host
}

// MatchAddr reports whether a connection to addr:port is covered by an
// address entry e. Name entries never match.
func (e Entry) MatchAddr(addr netip.Addr, port uint16) bool {
	if e.Host != "" || (e.Port != 0 && e.Port != port) {
		return false
	}
	return e.Prefix.IsValid() && e.Prefix.Contains(addr.Unmap())
}

// ParseEntry parses one Allow or Deny entry.
func ParseEntry(s string) (Entry, error) {
	var e Entry
	orig := s
	s = strings.TrimSpace(s)
	if s == "" {
		return e, fmt.Errorf("%w: empty entry", ErrInvalidPolicy)
	}
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		if strings.Count(s, ":") > 1 || strings.HasPrefix(s, "[") {
			return e, fmt.Errorf("%w: %q: IPv6 entries are not supported (sandboxes have IPv4 only)", ErrInvalidPolicy, orig)
		}
		n, err := strconv.ParseUint(s[i+1:], 10, 16)
		if err != nil || n == 0 {
			return e, fmt.Errorf("%w: %q: bad port", ErrInvalidPolicy, orig)
		}
		e.Port, s = uint16(n), s[:i]
	}
	if strings.ContainsRune(s, '/') {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return e, fmt.Errorf("%w: %q: %v", ErrInvalidPolicy, orig, err)
		}
		if !p.Addr().Is4() {
			return e, fmt.Errorf("%w: %q: only IPv4 prefixes are supported", ErrInvalidPolicy, orig)
		}
		e.Prefix = p.Masked()
		return e, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		if !a.Is4() {
			return e, fmt.Errorf("%w: %q: only IPv4 addresses are supported", ErrInvalidPolicy, orig)
		}
		e.Prefix = netip.PrefixFrom(a, 32)
		return e, nil
	}
	s = strings.TrimSuffix(strings.ToLower(s), ".")
	if rest, ok := strings.CutPrefix(s, "*."); ok {
		e.Wildcard, s = true, rest
	}
	if err := checkHostname(s); err != nil {
		return e, fmt.Errorf("%w: %q: %v", ErrInvalidPolicy, orig, err)
	}
	e.Host = s
	return e, nil
}

func checkHostname(s string) error {
	if s == "" || len(s) > 253 {
		return errors.New("bad host name length")
	}
	labels := strings.Split(s, ".")
	numeric := true
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return errors.New("empty or over-long label")
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return errors.New("label starts or ends with '-'")
		}
		for _, c := range l {
			switch {
			case c >= 'a' && c <= 'z', c == '-', c == '_':
				numeric = false
			case c >= '0' && c <= '9':
			default:
				return fmt.Errorf("invalid character %q", c)
			}
		}
	}
	if numeric {
		return errors.New("not a valid IPv4 address")
	}
	return nil
}

// action is where a new connection from a sandbox goes.
type action int

const (
	actDrop action = iota
	actForward
	actProxy
	actDNS
)

func (a action) String() string {
	return [...]string{"drop", "forward", "proxy", "dns"}[a]
}

// compiled is a validated policy in the form the rules are built from.
type compiled struct {
	mode  Mode
	allow []Entry // address entries only
	deny  []Entry // address entries only
	ports []uint16
}

func compile(p Policy) (*compiled, error) {
	c := &compiled{mode: p.Mode}
	switch p.Mode {
	case "":
		c.mode = ModeOff
	case ModeOff, ModeAllowlist, ModeFull:
	default:
		return nil, fmt.Errorf("%w: unknown mode %q (want off, allowlist or full)", ErrInvalidPolicy, p.Mode)
	}
	if len(p.Allow) > MaxEntries || len(p.Deny) > MaxEntries {
		return nil, fmt.Errorf("%w: at most %d allow and %d deny entries", ErrInvalidPolicy, MaxEntries, MaxEntries)
	}
	ports := map[uint16]bool{80: true, 443: true}
	for _, s := range p.Allow {
		e, err := ParseEntry(s)
		if err != nil {
			return nil, err
		}
		if !e.IsName() {
			c.allow = append(c.allow, e)
		} else if e.Port != 0 {
			ports[e.Port] = true
		}
	}
	for _, s := range p.Deny {
		e, err := ParseEntry(s)
		if err != nil {
			return nil, err
		}
		if e.IsName() {
			if c.mode == ModeFull {
				return nil, fmt.Errorf("%w: deny entry %q is a name; in full mode only address entries can be enforced", ErrInvalidPolicy, s)
			}
			continue // the proxy and the resolver enforce it
		}
		c.deny = append(c.deny, e)
	}
	if c.mode == ModeAllowlist {
		for port := range ports {
			if port != 53 {
				c.ports = append(c.ports, port)
			}
		}
		sortU16(c.ports)
	}
	return c, nil
}

// compile compiles p for m's rules, leaving out the Allow address
// entries beyond the operator's ceiling (Config.Refuse).
func (m *Manager) compile(p Policy) (*compiled, error) {
	c, err := compile(p)
	if err != nil || m.cfg.Refuse == nil {
		return c, err
	}
	kept := c.allow[:0]
	for _, e := range c.allow {
		if m.cfg.Refuse(e.Prefix) {
			m.log.Warn("network: allow entry beyond the operator's ceiling left out", "entry", e.String())
			continue
		}
		kept = append(kept, e)
	}
	c.allow = kept
	return c, nil
}

func sortU16(s []uint16) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// IP protocol numbers.
const (
	protoICMP = 1
	protoTCP  = 6
	protoUDP  = 17
)

func matchAny(es []Entry, proto uint8, dst netip.Addr, port uint16) bool {
	for _, e := range es {
		if e.Port != 0 && proto != protoTCP && proto != protoUDP {
			continue
		}
		if e.MatchAddr(dst, port) {
			return true
		}
	}
	return false
}

// route is the Go mirror of the per-sandbox rules for a new connection
// from the sandbox to dst:port that does not go to a host address. It
// decides which established connections Update must cut.
func (c *compiled) route(proto uint8, dst netip.Addr, port uint16) action {
	if c.mode == ModeOff {
		return actDrop
	}
	if port == 53 && (proto == protoTCP || proto == protoUDP) {
		return actDNS
	}
	if matchAny(c.deny, proto, dst, port) {
		return actDrop
	}
	if matchAny(c.allow, proto, dst, port) {
		return actForward
	}
	if c.mode == ModeFull {
		if blockedRanges.contains(dst) {
			return actDrop
		}
		return actForward
	}
	if proto == protoTCP {
		for _, p := range c.ports {
			if p == port {
				return actProxy
			}
		}
	}
	return actDrop
}

// prefixes is a list of IPv4 prefixes.
type prefixes []netip.Prefix

func (ps prefixes) contains(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// blockedRanges are never reachable in full mode unless a CIDR entry of
// Allow names them: "this network", private (RFC 1918), shared (CGNAT),
// loopback, link-local (cloud metadata services), IETF protocol
// assignments, multicast, reserved and broadcast.
var blockedRanges = prefixes{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
}
