package cluster

import (
	"bytes"
	"net/url"
	"os"
	"testing"
	"time"
)

func TestLeaseExpired(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		renew string
		secs  int32
		want  bool
	}{
		{"fresh", now.Add(-2 * time.Second).Format(microTime), 6, false},
		{"at the edge", now.Add(-6 * time.Second).Format(microTime), 6, false},
		{"expired", now.Add(-7 * time.Second).Format(microTime), 6, true},
		{"never renewed", "", 6, true},
		{"garbage", "yesterday", 6, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := Lease{Spec: LeaseSpec{RenewTime: tt.renew, LeaseDurationSeconds: tt.secs}}
			if got := l.Expired(now); got != tt.want {
				t.Fatalf("Expired = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		"sbabcdefghijklmnopqrstu2": true,
		"":                         false,
		"sb":                       false,
		"SBABC":                    false,
		"sb/../x":                  false,
		"sb_abc":                   false,
		"sb%2fabc":                 false,
		string(make([]byte, 64)):   false,
	} {
		if got := validID(id); got != want {
			t.Errorf("validID(%q) = %v, want %v", id, got, want)
		}
	}
}

func TestOwnerHash(t *testing.T) {
	a, b := OwnerHash("key_0011223344556677"), OwnerHash("key_8899aabbccddeeff")
	if len(a) != 32 || a == b || a != OwnerHash("key_0011223344556677") {
		t.Fatalf("OwnerHash: %q %q", a, b)
	}
}

// TestPlace: live nodes with room, least loaded first, counting this
// gateway's creates the Leases do not show yet; lost and full nodes never.
func TestPlace(t *testing.T) {
	u, _ := url.Parse("http://127.0.0.1:1")
	renewed := time.Now().Add(-time.Second)
	c := &nodeCache{refresh: time.Hour, at: time.Now(), pending: map[string][]time.Time{},
		nodes: map[string]*nodeInfo{
			"a":    {name: "a", url: u, capacity: 10, live: 5, renewedAt: renewed},
			"b":    {name: "b", url: u, capacity: 10, live: 1, renewedAt: renewed},
			"c":    {name: "c", url: u, capacity: 4, live: 1, renewedAt: renewed, templates: []string{"base"}},
			"full": {name: "full", url: u, capacity: 2, live: 2, renewedAt: renewed},
			"lost": {name: "lost", url: u, capacity: 10, live: 0, lost: true},
		}}
	names := func(tmpl string) []string {
		ns, err := c.place(t.Context(), tmpl)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, n := range ns {
			out = append(out, n.name)
		}
		return out
	}
	if got := names(""); len(got) != 3 || got[0] != "b" || got[1] != "c" || got[2] != "a" {
		t.Fatalf("order = %v, want [b c a]", got)
	}
	if got := names("base"); len(got) != 1 || got[0] != "c" {
		t.Fatalf("template base (listed by c only) = %v, want [c]", got)
	}
	if got := names("python"); len(got) != 3 {
		t.Fatalf("template python (listed by none) = %v, want every node with room", got)
	}
	for range 3 {
		c.placed("b")
	}
	if got := names(""); got[0] != "c" {
		t.Fatalf("after 3 creates on b, order = %v, want c first", got)
	}
}

// TestCRDInStep: the CRD the code installs is the one deploy/kubernetes
// applies.
func TestCRDInStep(t *testing.T) {
	b, err := os.ReadFile("../../deploy/kubernetes/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, CRD) {
		t.Fatal("deploy/kubernetes/crd.yaml differs from internal/cluster/crd.yaml: copy it over")
	}
}

func TestPortRouting(t *testing.T) {
	for _, tt := range []struct {
		host, domain, path string
		wantHost, wantPath string
	}{
		{"8000-sbabc.ports.example:7420", "ports.example:7420", "", "sbabc", ""},
		{"8000-sbabc.PORTS.example", "ports.example", "", "sbabc", ""},
		{"8000-sbabc.ports.example", "", "", "", ""},
		{"x.8000-sbabc.ports.example", "ports.example", "", "", ""},
		{"99999-sbabc.ports.example", "ports.example", "", "", ""},
		{"8000-sb_x.ports.example", "ports.example", "", "", ""},
		{"", "", "/v1/sandboxes/sbabc/ports/8000/x", "", "sbabc"},
		{"", "", "/v1/sandboxes/sbabc/ports", "", ""},
		{"", "", "/v1/sandboxes/sbabc/exec", "", ""},
		{"", "", "/v1/sandboxes/../ports/8000/", "", ""},
	} {
		id, _ := parsePortHost(tt.host, tt.domain)
		pid, _ := portPath(tt.path)
		if id != tt.wantHost || pid != tt.wantPath {
			t.Errorf("%q %q %q: host id %q path id %q, want %q %q", tt.host, tt.domain, tt.path, id, pid, tt.wantHost, tt.wantPath)
		}
	}
}
