package network

import (
	"log/slog"
	"net/netip"
	"testing"
)

// TestCompileLeavesOutRefused: a stored policy with an entry beyond the
// operator's ceiling gets no rule for it (the API refuses new ones).
func TestCompileLeavesOutRefused(t *testing.T) {
	refused := netip.MustParsePrefix("127.0.0.0/8")
	m := &Manager{cfg: Config{Refuse: func(p netip.Prefix) bool { return p.Overlaps(refused) }}, log: slog.New(slog.DiscardHandler)}
	c, err := m.compile(Policy{Mode: ModeAllowlist, Allow: []string{"127.0.0.0/8", "203.0.113.0/24", "pypi.org", "127.0.0.1:5432"}})
	if err != nil {
		t.Fatal(err)
	}
	A := netip.MustParseAddr
	for _, tc := range []struct {
		dst  string
		port uint16
		want action
	}{
		{"127.0.0.1", 5432, actDrop},
		{"127.0.0.1", 22, actDrop},
		{"203.0.113.9", 22, actForward},
		{"198.51.100.1", 443, actProxy},
	} {
		if got := c.route(protoTCP, A(tc.dst), tc.port); got != tc.want {
			t.Errorf("%s:%d: %v, want %v", tc.dst, tc.port, got, tc.want)
		}
	}
}
