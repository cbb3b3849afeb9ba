package network

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
)

func TestParseEntry(t *testing.T) {
	pfx := netip.MustParsePrefix
	tests := []struct {
		in   string
		want Entry
		err  bool
	}{
		{in: "pypi.org", want: Entry{Host: "pypi.org"}},
		{in: "PyPI.org.", want: Entry{Host: "pypi.org"}},
		{in: "*.npmjs.org", want: Entry{Host: "npmjs.org", Wildcard: true}},
		{in: "git.example.com:8443", want: Entry{Host: "git.example.com", Port: 8443}},
		{in: "localindex", want: Entry{Host: "localindex"}},
		{in: "10.0.0.0/8", want: Entry{Prefix: pfx("10.0.0.0/8")}},
		{in: "10.1.2.3/8", want: Entry{Prefix: pfx("10.0.0.0/8")}},
		{in: "1.2.3.4", want: Entry{Prefix: pfx("1.2.3.4/32")}},
		{in: "1.2.3.4:22", want: Entry{Prefix: pfx("1.2.3.4/32"), Port: 22}},
		{in: "10.0.0.0/8:5432", want: Entry{Prefix: pfx("10.0.0.0/8"), Port: 5432}},
		{in: "", err: true},
		{in: "*", err: true},
		{in: "*.", err: true},
		{in: "a..b", err: true},
		{in: "-a.com", err: true},
		{in: "exa mple.com", err: true},
		{in: "999.1.1.1", err: true},
		{in: "1.2.3.4/33", err: true},
		{in: "pypi.org:0", err: true},
		{in: "pypi.org:65536", err: true},
		{in: "pypi.org:http", err: true},
		{in: "fc00::/7", err: true},
		{in: "::1", err: true},
		{in: "[::1]:80", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseEntry(tt.in)
			if tt.err {
				if !errors.Is(err, ErrInvalidPolicy) {
					t.Errorf("ParseEntry(%q) = %+v, %v; want ErrInvalidPolicy", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ParseEntry(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
			if again, err := ParseEntry(got.String()); err != nil || again != got {
				t.Errorf("round trip of %q: %+v, %v", got.String(), again, err)
			}
		})
	}
}

func TestEntryMatch(t *testing.T) {
	must := func(s string) Entry {
		e, err := ParseEntry(s)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	tests := []struct {
		entry, host string
		port        uint16
		want        bool
	}{
		{"pypi.org", "pypi.org", 443, true},
		{"pypi.org", "PYPI.ORG.", 443, true},
		{"pypi.org", "files.pypi.org", 443, false},
		{"*.npmjs.org", "registry.npmjs.org", 443, true},
		{"*.npmjs.org", "a.b.npmjs.org", 80, true},
		{"*.npmjs.org", "npmjs.org", 443, false},
		{"*.npmjs.org", "evilnpmjs.org", 443, false},
		{"git.example.com:8443", "git.example.com", 8443, true},
		{"git.example.com:8443", "git.example.com", 443, false},
		{"10.0.0.0/8", "10.1.2.3", 443, true},
		{"10.0.0.0/8", "11.1.2.3", 443, false},
	}
	for _, tt := range tests {
		if got := must(tt.entry).MatchHost(tt.host, tt.port); got != tt.want {
			t.Errorf("%s.MatchHost(%s, %d) = %v", tt.entry, tt.host, tt.port, got)
		}
	}
	if must("pypi.org").MatchAddr(netip.MustParseAddr("1.2.3.4"), 80) {
		t.Error("name entry matched an address")
	}
	if !must("1.2.3.0/24:80").MatchAddr(netip.MustParseAddr("1.2.3.4"), 80) || must("1.2.3.0/24:80").MatchAddr(netip.MustParseAddr("1.2.3.4"), 81) {
		t.Error("port entry")
	}
}

func TestValidate(t *testing.T) {
	many := make([]string, MaxEntries+1)
	for i := range many {
		many[i] = "a.example"
	}
	tests := []struct {
		name string
		p    Policy
		ok   bool
	}{
		{"zero value is off", Policy{}, true},
		{"off", Policy{Mode: ModeOff}, true},
		{"allowlist", Policy{Mode: ModeAllowlist, Allow: []string{"pypi.org", "*.npmjs.org", "10.0.0.0/8"}, Deny: []string{"evil.pypi.org"}}, true},
		{"full with address deny", Policy{Mode: ModeFull, Deny: []string{"1.2.3.0/24"}}, true},
		{"full with name deny", Policy{Mode: ModeFull, Deny: []string{"evil.com"}}, false},
		{"unknown mode", Policy{Mode: "open"}, false},
		{"bad entry", Policy{Mode: ModeAllowlist, Allow: []string{"bad host"}}, false},
		{"too many", Policy{Mode: ModeAllowlist, Allow: many}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrInvalidPolicy)) {
				t.Errorf("Validate() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestRoute(t *testing.T) {
	a := netip.MustParseAddr
	tests := []struct {
		name  string
		p     Policy
		proto uint8
		dst   string
		port  uint16
		want  action
	}{
		{"off drops DNS", Policy{Mode: ModeOff}, protoUDP, "1.1.1.1", 53, actDrop},
		{"allowlist DNS", Policy{Mode: ModeAllowlist}, protoUDP, "1.1.1.1", 53, actDNS},
		{"allowlist TCP DNS", Policy{Mode: ModeAllowlist}, protoTCP, "1.1.1.1", 53, actDNS},
		{"allowlist 443", Policy{Mode: ModeAllowlist}, protoTCP, "1.1.1.1", 443, actProxy},
		{"allowlist 80 of metadata", Policy{Mode: ModeAllowlist}, protoTCP, "169.254.169.254", 80, actProxy},
		{"allowlist UDP 443", Policy{Mode: ModeAllowlist}, protoUDP, "1.1.1.1", 443, actDrop},
		{"allowlist other port", Policy{Mode: ModeAllowlist}, protoTCP, "1.1.1.1", 22, actDrop},
		{"allowlist name port", Policy{Mode: ModeAllowlist, Allow: []string{"git.example.com:8443"}}, protoTCP, "1.1.1.1", 8443, actProxy},
		{"allowlist CIDR", Policy{Mode: ModeAllowlist, Allow: []string{"10.0.0.0/8"}}, protoTCP, "10.1.1.1", 22, actForward},
		{"allowlist CIDR 443 is direct", Policy{Mode: ModeAllowlist, Allow: []string{"10.0.0.0/8"}}, protoTCP, "10.1.1.1", 443, actForward},
		{"allowlist CIDR ICMP", Policy{Mode: ModeAllowlist, Allow: []string{"10.0.0.0/8"}}, protoICMP, "10.1.1.1", 0, actForward},
		{"allowlist port entry ICMP", Policy{Mode: ModeAllowlist, Allow: []string{"10.0.0.0/8:22"}}, protoICMP, "10.1.1.1", 0, actDrop},
		{"allowlist deny wins", Policy{Mode: ModeAllowlist, Allow: []string{"10.0.0.0/8"}, Deny: []string{"10.1.0.0/16"}}, protoTCP, "10.1.1.1", 22, actDrop},
		{"allowlist denied 443 not proxied", Policy{Mode: ModeAllowlist, Deny: []string{"1.1.1.1"}}, protoTCP, "1.1.1.1", 443, actDrop},
		{"full public", Policy{Mode: ModeFull}, protoUDP, "1.1.1.1", 443, actForward},
		{"full DNS", Policy{Mode: ModeFull}, protoUDP, "1.1.1.1", 53, actDNS},
		{"full metadata", Policy{Mode: ModeFull}, protoTCP, "169.254.169.254", 80, actDrop},
		{"full private", Policy{Mode: ModeFull}, protoTCP, "192.168.1.1", 80, actDrop},
		{"full CGNAT", Policy{Mode: ModeFull}, protoTCP, "100.64.0.1", 80, actDrop},
		{"full broadcast", Policy{Mode: ModeFull}, protoUDP, "255.255.255.255", 67, actDrop},
		{"full allowed private", Policy{Mode: ModeFull, Allow: []string{"192.168.0.0/16"}}, protoTCP, "192.168.1.1", 80, actForward},
		{"full deny", Policy{Mode: ModeFull, Deny: []string{"1.1.1.1:443"}}, protoTCP, "1.1.1.1", 443, actDrop},
		{"full deny other port", Policy{Mode: ModeFull, Deny: []string{"1.1.1.1:443"}}, protoTCP, "1.1.1.1", 80, actForward},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := compile(tt.p)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.route(tt.proto, a(tt.dst), tt.port); got != tt.want {
				t.Errorf("route = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIntervals(t *testing.T) {
	p := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	type el struct {
		key string
		end bool
	}
	conv := func(els []nftables.SetElement) []el {
		var out []el
		for _, e := range els {
			out = append(out, el{netip.AddrFrom4([4]byte(e.Key)).String(), e.IntervalEnd})
		}
		return out
	}
	tests := []struct {
		in   []netip.Prefix
		want []el
	}{
		{nil, nil},
		{p("10.0.0.0/8"), []el{{"10.0.0.0", false}, {"11.0.0.0", true}}},
		// overlapping and adjacent ranges merge
		{p("10.1.0.0/16", "10.0.0.0/8", "11.0.0.0/8", "1.2.3.4/32"),
			[]el{{"1.2.3.4", false}, {"1.2.3.5", true}, {"10.0.0.0", false}, {"12.0.0.0", true}}},
		// a range reaching the end of the address space has no end element
		{p("240.0.0.0/4"), []el{{"240.0.0.0", false}}},
		{p("0.0.0.0/0", "10.0.0.0/8"), []el{{"0.0.0.0", false}}},
	}
	for _, tt := range tests {
		if got := conv(intervals(tt.in)); !slices.Equal(got, tt.want) {
			t.Errorf("intervals(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestDisallowedFlows(t *testing.T) {
	m := &Manager{cfg: Config{ProxyPort: 3128, DNSPort: 5353}}
	l := &lease{HostAddr: netip.MustParseAddr("10.88.0.1"), SandboxAddr: netip.MustParseAddr("10.88.0.2")}
	ip := func(s string) net.IP { return net.ParseIP(s).To4() }
	flow := func(proto uint8, dst string, dport uint16, replySrc string, replyPort uint16) *netlink.ConntrackFlow {
		f := &netlink.ConntrackFlow{}
		f.Forward = netlink.IPTuple{Protocol: proto, SrcIP: ip("10.88.0.2"), SrcPort: 40000, DstIP: ip(dst), DstPort: dport}
		f.Reverse = netlink.IPTuple{Protocol: proto, SrcIP: ip(replySrc), SrcPort: replyPort, DstIP: ip("192.0.2.2"), DstPort: 40000}
		return f
	}
	forwarded := flow(protoTCP, "1.1.1.1", 8080, "1.1.1.1", 8080)
	proxied := flow(protoTCP, "1.1.1.1", 443, "10.88.0.1", 3128)
	dns := flow(protoUDP, "8.8.8.8", 53, "10.88.0.1", 5353)
	direct := flow(protoTCP, "10.88.0.1", 3128, "10.88.0.1", 3128)
	hostOpened := &netlink.ConntrackFlow{Forward: netlink.IPTuple{Protocol: protoTCP, SrcIP: ip("10.88.0.1"), DstIP: ip("10.88.0.2"), DstPort: 8000}}

	tests := []struct {
		name string
		p    Policy
		f    *netlink.ConntrackFlow
		cut  bool
	}{
		{"full keeps public", Policy{Mode: ModeFull}, forwarded, false},
		{"deny cuts", Policy{Mode: ModeFull, Deny: []string{"1.1.1.0/24"}}, forwarded, true},
		{"allowlist cuts forwarded", Policy{Mode: ModeAllowlist}, forwarded, true},
		{"allowlist keeps allowed CIDR", Policy{Mode: ModeAllowlist, Allow: []string{"1.1.1.1"}}, forwarded, false},
		{"allowlist keeps proxied", Policy{Mode: ModeAllowlist}, proxied, false},
		{"full cuts proxied (now direct)", Policy{Mode: ModeFull}, proxied, true},
		{"allowed CIDR cuts proxied (now direct)", Policy{Mode: ModeAllowlist, Allow: []string{"1.1.1.1"}}, proxied, true},
		{"DNS kept", Policy{Mode: ModeFull}, dns, false},
		{"off cuts DNS", Policy{Mode: ModeOff}, dns, true},
		{"direct proxy kept", Policy{Mode: ModeAllowlist}, direct, false},
		{"off cuts direct proxy", Policy{Mode: ModeOff}, direct, true},
		{"host-opened kept", Policy{Mode: ModeOff}, hostOpened, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := compile(tt.p)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.disallowedFlows(l, c)(tt.f); got != tt.cut {
				t.Errorf("cut = %v, want %v", got, tt.cut)
			}
		})
	}
}
