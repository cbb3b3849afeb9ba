package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
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
// gateway's creates the Leases do not show yet; lost and full nodes never;
// nodes listing the template first, then open ones; an idle warm-pool
// sandbox of the template before load; a template nobody has is an error.
func TestPlace(t *testing.T) {
	u, _ := url.Parse("http://127.0.0.1:1")
	renewed := time.Now().Add(-time.Second)
	c := &nodeCache{refresh: time.Hour, at: time.Now(), pending: map[string][]pendingCreate{},
		nodes: map[string]*nodeInfo{
			"a":    {name: "a", url: u, capacity: 10, live: 5, renewedAt: renewed, templates: []string{"base", "py"}, idle: map[string]int{"py": 1}},
			"b":    {name: "b", url: u, capacity: 10, live: 1, renewedAt: renewed, templates: []string{"base"}, open: true},
			"c":    {name: "c", url: u, capacity: 4, live: 1, renewedAt: renewed, templates: []string{"base", "go"}},
			"full": {name: "full", url: u, capacity: 2, live: 2, renewedAt: renewed, templates: []string{"base", "rust"}},
			"lost": {name: "lost", url: u, capacity: 10, live: 0, lost: true, templates: []string{"base", "zig"}},
		}}
	names := func(tmpl string) ([]string, error) {
		ns, err := c.place(t.Context(), placement{template: tmpl})
		var out []string
		for _, n := range ns {
			out = append(out, n.name)
		}
		return out, err
	}
	tests := []struct {
		template string
		closed   bool   // b not open
		want     string // the order, or "error"
	}{
		{"", false, "b c a"},
		{"base", false, "b c a"},
		{"go", false, "c"},           // listed by c only
		{"py", false, "a"},           // a has it (and an idle one)
		{"own-template", false, "b"}, // no node lists it: the open one
		{"rust", true, ""},           // only on a full node: no room, not unknown
		{"zig", true, "error"},       // only on a lost node
		{"nowhere", true, "error"},   // on no node, none open
	}
	for _, tt := range tests {
		c.nodes["b"].open = !tt.closed
		got, err := names(tt.template)
		if tt.want == "error" {
			if ut := (*errUnknownTemplate)(nil); !errors.As(err, &ut) {
				t.Errorf("%q: %v %v, want errUnknownTemplate", tt.template, got, err)
			}
			continue
		}
		if err != nil || strings.Join(got, " ") != tt.want {
			t.Errorf("%q: %v %v, want [%s]", tt.template, got, err, tt.want)
		}
	}
	// idle before load: a's idle "base" sandbox puts it first
	c.nodes["a"].idle["base"] = 1
	if got, _ := names(""); strings.Join(got, " ") != "a b c" {
		t.Errorf("with an idle base on a: %v, want [a b c]", got)
	}
	c.placed("a", "py") // another template's create leaves the idle base sandbox
	if got, _ := names(""); strings.Join(got, " ") != "a b c" {
		t.Errorf("after a py create on a: %v, want [a b c]", got)
	}
	c.pending["a"] = nil
	c.placed("a", "") // that create took a's idle sandbox as far as this gateway knows
	if got, _ := names(""); strings.Join(got, " ") != "b c a" {
		t.Errorf("after a create on a: %v, want [b c a]", got)
	}
	for range 3 {
		c.placed("b", "")
	}
	if got, _ := names(""); got[0] != "c" {
		t.Fatalf("after 3 creates on b, order = %v, want c first", got)
	}
}

// TestPlaceE2B: an E2B create goes only to nodes with an E2B endpoint,
// each resolving the templateID through its own E2B aliases; an id no
// such node has (listed or through an alias) is unknown when none is
// open.
func TestPlaceE2B(t *testing.T) {
	u, _ := url.Parse("http://127.0.0.1:1")
	renewed := time.Now().Add(-time.Second)
	c := &nodeCache{refresh: time.Hour, at: time.Now(), pending: map[string][]pendingCreate{},
		nodes: map[string]*nodeInfo{
			"a": {name: "a", url: u, e2bURL: u, capacity: 10, live: 1, renewedAt: renewed, templates: []string{"base"},
				e2bTemplates: map[string]string{"code-interpreter-v1": "base"}},
			"b": {name: "b", url: u, e2bURL: u, capacity: 10, live: 5, renewedAt: renewed, templates: []string{"base", "py"},
				e2bTemplates: map[string]string{"code-interpreter-v1": "py", "my-py": "py"}, idle: map[string]int{"py": 1}},
			"rest-only": {name: "rest-only", url: u, capacity: 10, renewedAt: renewed, templates: []string{"base", "go"}, open: true},
		}}
	tests := []struct {
		template string
		want     string // the order, or "error"
	}{
		{"", "a b"},
		{"base", "a b"},
		{"py", "b"},
		{"my-py", "b"},                 // b's alias for py
		{"code-interpreter-v1", "b a"}, // base on a, py on b: b has an idle py sandbox
		{"go", "error"},                // only on a node without an E2B endpoint
		{"nowhere", "error"},
	}
	for _, tt := range tests {
		ns, err := c.place(t.Context(), placement{template: tt.template, e2b: true})
		var got []string
		for _, n := range ns {
			got = append(got, n.name)
		}
		if tt.want == "error" {
			if ut := (*errUnknownTemplate)(nil); !errors.As(err, &ut) {
				t.Errorf("%q: %v %v, want errUnknownTemplate", tt.template, got, err)
			}
			continue
		}
		if err != nil || strings.Join(got, " ") != tt.want {
			t.Errorf("%q: %v %v, want [%s]", tt.template, got, err, tt.want)
		}
	}
	c.placed("b", "py") // the idle py sandbox is taken as far as this gateway knows
	if ns, _ := c.place(t.Context(), placement{template: "code-interpreter-v1", e2b: true}); len(ns) != 2 || ns[0].name != "a" {
		t.Errorf("after a py create on b: %v, want a first", ns)
	}
}

// TestLeaseAliases: sorted pairs, unusable names left out, bounded.
func TestLeaseAliases(t *testing.T) {
	a, cut := leaseAliases(map[string]string{"z": "base", "code-interpreter-v1": "base", "a,b": "x", "c": "d=e", "": "x"})
	if a != "code-interpreter-v1=base,z=base" || cut {
		t.Errorf("leaseAliases = %q %v", a, cut)
	}
	many := map[string]string{}
	for i := range maxLeaseTemplates + 1 {
		many[fmt.Sprintf("a%03d", i)] = "base"
	}
	if a, cut := leaseAliases(many); len(strings.Split(a, ",")) != maxLeaseTemplates || !cut {
		t.Errorf("%d pairs, cut %v", len(strings.Split(a, ",")), cut)
	}
}

// TestLeaseTemplates: sorted, deduplicated, bounded names; idle counts of
// listed templates only; open when asked or when the list was cut.
func TestLeaseTemplates(t *testing.T) {
	ann := leaseTemplates([]string{"py", "base", "py"}, map[string]int{"py": 2, "gone": 1}, false)
	if ann[annTemplates] != "base,py" || ann[annIdle] != "py=2" || ann[annOpen] != "" {
		t.Errorf("annotations %v", ann)
	}
	var many []string
	for i := range maxLeaseTemplates + 5 {
		many = append(many, fmt.Sprintf("t%03d", i))
	}
	ann = leaseTemplates(many, nil, false)
	if n := len(strings.Split(ann[annTemplates], ",")); n != maxLeaseTemplates || ann[annOpen] != "true" {
		t.Errorf("%d names, open %q; want %d and open", n, ann[annOpen], maxLeaseTemplates)
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

// TestE2BTarget: the E2B data plane names a sandbox by header or by a
// <port>-<id>.<domain> host; anything else is the control plane.
func TestE2BTarget(t *testing.T) {
	tests := []struct {
		host, header, domain string
		want                 string
		ok                   bool
	}{
		{"gw:7430", "sbabc", "", "sbabc", true},
		{"49983-sbabc.e2b.example", "", "e2b.example", "sbabc", true},
		{"49983-sbabc.E2B.example:443", "", "e2b.example", "sbabc", true},
		{"49983-sbabc.other.example", "", "e2b.example", "", false},
		{"49983-sb_x.e2b.example", "", "", "", false},
		{"99999-sbabc.e2b.example", "", "", "", false},
		{"api.e2b.example", "", "", "", false},
		{"127.0.0.1:7430", "", "", "", false},
	}
	for _, tt := range tests {
		r, _ := http.NewRequest("GET", "http://x/health", nil)
		r.Host = tt.host
		if tt.header != "" {
			r.Header.Set("E2b-Sandbox-Id", tt.header)
		}
		if id, ok := e2bTarget(r, tt.domain); id != tt.want || ok != tt.ok {
			t.Errorf("%q %q %q: %q %v, want %q %v", tt.host, tt.header, tt.domain, id, ok, tt.want, tt.ok)
		}
	}
}
