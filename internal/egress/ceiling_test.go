package egress

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestCeilingCheckRules(t *testing.T) {
	P := netip.MustParsePrefix
	c := &Ceiling{
		Allow: []netip.Prefix{P("10.20.0.0/16"), P("127.0.0.5/32")},
		Host:  []netip.Prefix{P("203.0.113.1/32")},
		Pool:  []netip.Prefix{P("10.88.0.0/16")},
	}
	wide := &Ceiling{Allow: []netip.Prefix{P("0.0.0.0/0")}, Pool: []netip.Prefix{P("10.88.0.0/16")}}
	cases := []struct {
		c      *Ceiling
		entry  string
		reason string // "" = accepted
	}{
		{c, "8.8.8.8", ""},
		{c, "203.0.113.0/25:443", "address of the daemon's host"},
		{&Ceiling{Host: []netip.Prefix{P("127.0.0.1/32")}}, "127.0.0.1", "loopback"},
		{c, "pypi.org", ""},
		{c, "localhost.example.com", ""}, // names: checked on every answer
		{c, "127.0.0.0/8", "loopback"},
		{c, "127.0.0.1", "loopback"},
		{c, "127.0.0.5", ""}, // opened by the operator
		{c, "127.0.0.5:8080", ""},
		{c, "169.254.169.254/32", "link-local"},
		{c, "169.254.169.254:80", "link-local"},
		{c, "10.0.0.0/8", "pool"},
		{c, "10.1.0.0/16", "private"},
		{c, "10.20.1.0/24", ""},
		{c, "10.20.0.0/15", "private"},
		{c, "172.16.5.5", "private"},
		{c, "192.168.1.1", "private"},
		{c, "100.64.0.1", "CGNAT"},
		{c, "0.0.0.0", "unspecified"},
		{c, "0.0.0.0/0", "pool"},
		{nil, "0.0.0.0/0", "unspecified"},
		{c, "224.0.0.1", "multicast"},
		{c, "255.255.255.255", "broadcast"},
		{c, "::1", "loopback"},
		{c, "[fe80::1]:80", "link-local"},
		{c, "fd00::/8", "ULA"},
		{c, "ff02::1", "multicast"},
		{c, "::", "unspecified"},
		{c, "::ffff:127.0.0.1", "loopback"},
		{c, "2001:db8::/32", ""},
		{c, "10.88.3.4", "pool"},
		{wide, "10.88.3.4", "pool"}, // the pool is never opened
		{wide, "127.0.0.0/8", ""},
		{wide, "0.0.0.0/0", "pool"},
		{nil, "169.254.169.254", "link-local"},
		{nil, "1.1.1.1", ""},
	}
	for _, tc := range cases {
		err := tc.c.CheckRules(Rules{Mode: ModeAllowlist, Allow: []string{tc.entry}})
		if tc.reason == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.entry, err)
			}
			continue
		}
		if !errors.Is(err, ErrCeiling) || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%q: got %v, want ErrCeiling with %q", tc.entry, err, tc.reason)
		}
	}
	// Deny entries only take away.
	if err := c.CheckRules(Rules{Mode: ModeFull, Deny: []string{"127.0.0.0/8"}}); err != nil {
		t.Errorf("deny: %v", err)
	}
}

func TestCeilingRefused(t *testing.T) {
	A := netip.MustParseAddr
	c := &Ceiling{Allow: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")},
		Host: []netip.Prefix{netip.MustParsePrefix("198.51.100.7/32")}, Pool: []netip.Prefix{netip.MustParsePrefix("10.88.0.0/16")}}
	for ip, want := range map[string]string{
		"127.0.0.1": "loopback", "169.254.169.254": "link-local", "10.1.1.1": "private",
		"10.20.3.4": "", "10.88.0.2": "pool", "198.51.100.7": "host", "8.8.8.8": "",
		"::ffff:127.0.0.1": "loopback", "::1": "loopback", "fd12::1": "ULA", "2606:4700::1": "",
	} {
		got := c.Refused(A(ip))
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("Refused(%s) = %q, want %q", ip, got, want)
		}
	}
}

// TestCeilingOverridesTenantAllow: a tenant's CIDR entry does not open
// what the operator has not, for resolved names and raw addresses alike.
func TestCeilingOverridesTenantAllow(t *testing.T) {
	A := netip.MustParseAddr
	r := Rules{Mode: ModeAllowlist, Allow: []string{"somehost.example", "127.0.0.0/8", "169.254.169.254/32", "10.20.0.0/16"}}
	op := &Ceiling{Allow: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}}
	for _, full := range []bool{false, true} {
		rr := r
		if full {
			rr.Mode = ModeFull
		}
		p := compile(rr, nil, op)
		for _, ip := range []string{"127.0.0.1", "169.254.169.254", "10.1.1.1"} {
			if p.addrAllowed(A(ip), 80) || p.rawAllowed(A(ip), 80) {
				t.Errorf("mode %s: %s allowed", rr.Mode, ip)
			}
		}
		if !p.addrAllowed(A("10.20.0.9"), 80) || !p.rawAllowed(A("10.20.0.9"), 80) {
			t.Errorf("mode %s: operator-opened, tenant-allowed 10.20.0.9 refused", rr.Mode)
		}
	}
}
