package manager

import (
	"net/netip"
	"testing"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// TestEgressLookup: the proxy's policy source finds running sandboxes by
// address, then build sandboxes (which have no record), and nothing else.
func TestEgressLookup(t *testing.T) {
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	addrs := map[netip.Addr]string{
		netip.MustParseAddr("10.88.0.2"): "sbrun",
		netip.MustParseAddr("10.88.0.3"): "sbpaused",
		netip.MustParseAddr("10.88.0.4"): "build-1",
		netip.MustParseAddr("10.88.0.5"): "gone",
	}
	eg := NewEgress(st, func(a netip.Addr) (string, bool) { id, ok := addrs[a]; return id, ok })
	allow := store.NetworkPolicy{Mode: sandbox.NetworkAllowlist, Allow: []string{"example.com"}}
	for id, state := range map[string]sandbox.State{"sbrun": sandbox.Running, "sbpaused": sandbox.Paused} {
		if err := st.Put(&store.Record{ID: id, Owner: "k", State: state, Network: allow}); err != nil {
			t.Fatal(err)
		}
	}
	eg.setBuild("build-1", allow)
	tests := []struct {
		addr string
		id   string
		ok   bool
	}{
		{"10.88.0.2", "sbrun", true},
		{"10.88.0.3", "", false},
		{"10.88.0.4", "build-1", true},
		{"10.88.0.5", "", false},
		{"10.88.0.9", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			id, rules, ok := eg.Lookup(netip.MustParseAddr(tt.addr))
			if id != tt.id || ok != tt.ok || (ok && (rules.Mode != sandbox.NetworkAllowlist || len(rules.Allow) != 1)) {
				t.Fatalf("Lookup = %q, %+v, %v; want %q, %v", id, rules, ok, tt.id, tt.ok)
			}
		})
	}
	if !eg.dropBuild("build-1") || eg.dropBuild("build-1") {
		t.Fatal("dropBuild should report the policy once")
	}
	if _, _, ok := eg.Lookup(netip.MustParseAddr("10.88.0.4")); ok {
		t.Fatal("a dropped build sandbox is still found")
	}
}
