package egress

import (
	"net/netip"
	"testing"
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
		Deny: []string{"bad.npmjs.org", "10.1.2.0/24"}}, []netip.Prefix{netip.MustParsePrefix("203.0.113.99/32")},
		&Ceiling{Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	full := compile(Rules{Mode: ModeFull, Deny: []string{"evil.com", "8.8.8.8"}}, nil, nil)
	off := compile(Rules{Mode: ModeOff, Allow: []string{"pypi.org"}}, nil, nil)

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
