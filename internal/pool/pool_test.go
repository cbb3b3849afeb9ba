package pool

import (
	"context"
	"errors"
	"testing"
	"time"
)

type noCreator struct{}

func (noCreator) CreateIdle(context.Context, string) (string, string, error) {
	return "", "", context.Canceled
}

func sized(sizes map[string]int) Config {
	c := Config{Templates: map[string]Limits{}}
	for t, n := range sizes {
		c.Templates[t] = Limits{Min: n, Max: n}
	}
	return c
}

// TestTakeRef: a hand-out takes only a sandbox made from the caller's
// version of the template (another key's private template of the same
// name, or a template rebuilt since, resolve to another reference).
func TestTakeRef(t *testing.T) {
	p := New(sized(map[string]int{"py": 2}), noCreator{}, nil)
	p.idle["py"] = []idle{{id: "a", ref: "@old"}, {id: "b", ref: "@new"}}
	if id := p.Take("py", "@mine"); id != "" {
		t.Fatalf("took %q for another reference", id)
	}
	if id := p.Take("py", "@new"); id != "b" {
		t.Fatalf("took %q, want b", id)
	}
	if id := p.Take("py", "@new"); id != "" {
		t.Fatalf("took %q twice", id)
	}
	if _, ok := p.Find("py", "a"); !ok || p.Remove("py", "b") || !p.Remove("py", "a") {
		t.Fatal("find/remove")
	}
}

// TestEvict: an eviction takes the oldest sandbox of the fullest pool.
func TestEvict(t *testing.T) {
	p := New(sized(map[string]int{"a": 2, "b": 2}), noCreator{}, nil)
	p.idle["a"] = []idle{{id: "a1"}}
	p.idle["b"] = []idle{{id: "b1"}, {id: "b2"}}
	if tpl, id := p.Evict(); tpl != "b" || id != "b1" {
		t.Fatalf("evicted %s/%s, want b/b1", tpl, id)
	}
	p.Return("b", "b1", "")
	if st := p.Status(); st["b"] != [2]int{2, 0} || st["a"] != [2]int{1, 0} {
		t.Fatalf("status %v", st)
	}
}

// TestConfig: limits are clamped, Max 0 disables a template, defaults
// fill the policy.
func TestConfig(t *testing.T) {
	p := New(Config{Templates: map[string]Limits{"a": {Min: 5, Max: 3}, "b": {Min: -1, Max: 2}, "off": {Min: 1}}}, noCreator{}, nil)
	if p.sizes["a"] != (Limits{3, 3}) || p.sizes["b"] != (Limits{0, 2}) || p.Size("off") != 0 || !p.Enabled() {
		t.Fatalf("sizes %v", p.sizes)
	}
	if p.cfg.IdleAfter != DefaultIdleAfter || p.cfg.MemoryFloor != DefaultMemoryFloor {
		t.Fatalf("defaults %+v", p.cfg)
	}
	if New(Config{Templates: map[string]Limits{"base": {}}}, noCreator{}, nil).Enabled() {
		t.Fatal("a pool of max 0 is enabled")
	}
}

// TestTarget: the target follows the creates of the last minute up to
// Max, holds while creates keep coming, and falls back to Min after
// IdleAfter without one.
func TestTarget(t *testing.T) {
	p := New(Config{Templates: map[string]Limits{"base": {Min: 1, Max: 8}}, IdleAfter: 5 * time.Minute}, noCreator{}, nil)
	t0 := time.Unix(1e9, 0)
	steps := []struct {
		name    string
		creates int
		at      time.Duration
		want    int
	}{
		{"no demand", 0, 0, 1},
		{"one create", 1, 0, 1},
		{"a burst of 4", 3, time.Second, 4},
		{"a burst past max", 20, 2 * time.Second, 8},
		{"held after the minute", 0, 3 * time.Minute, 8},
		{"a slow create keeps it", 1, 4 * time.Minute, 8},
		{"still held", 0, 8 * time.Minute, 8},
		{"idle: back to min", 0, 9*time.Minute + time.Second, 1},
		{"a new burst starts small", 2, 10 * time.Minute, 2},
	}
	for _, s := range steps {
		for range s.creates {
			p.Demand("base", t0.Add(s.at))
		}
		if got := p.Target("base", t0.Add(s.at)); got != s.want {
			t.Fatalf("%s: target %d, want %d", s.name, got, s.want)
		}
	}
	p.Demand("other", t0) // not pooled: ignored
	if p.Target("other", t0) != 0 {
		t.Fatal("target of a template without a pool")
	}
}

// TestShrink: sandboxes beyond the target leave the idle list, oldest
// first, and belong to the caller.
func TestShrink(t *testing.T) {
	p := New(Config{Templates: map[string]Limits{"base": {Min: 1, Max: 4}}}, noCreator{}, nil)
	p.idle["base"] = []idle{{id: "a"}, {id: "b"}, {id: "c"}}
	out := p.Shrink(time.Now())
	if len(out["base"]) != 2 || out["base"][0] != "a" || out["base"][1] != "b" {
		t.Fatalf("shrunk %v", out)
	}
	if ids := p.Idle("base"); len(ids) != 1 || ids[0] != "c" {
		t.Fatalf("left %v", ids)
	}
	if out := p.Shrink(time.Now()); out != nil {
		t.Fatalf("shrunk again %v", out)
	}
}

// countCreator counts creates and succeeds.
type countCreator struct{ n chan struct{} }

func (c countCreator) CreateIdle(context.Context, string) (string, string, error) {
	c.n <- struct{}{}
	return "x", "", nil
}

// TestMemoryFloor: no refill starts while available memory is below the
// floor, and refills resume once it is not; an unreadable figure does not
// stop the pool.
func TestMemoryFloor(t *testing.T) {
	low := true
	mem := func() (uint64, uint64, error) {
		if low {
			return 10, 100, nil
		}
		return 90, 100, nil
	}
	c := countCreator{n: make(chan struct{}, 10)}
	p := New(Config{Templates: map[string]Limits{"base": {Min: 1, Max: 1}}, Memory: mem}, c, nil)
	sem := make(chan struct{}, 2)
	p.fillOnce(context.Background(), sem)
	if p.filling["base"] != 0 {
		t.Fatal("refill started with memory below the floor")
	}
	low = false
	p.fillOnce(context.Background(), sem)
	<-c.n
	p = New(Config{Templates: map[string]Limits{"base": {Min: 1, Max: 1}},
		Memory: func() (uint64, uint64, error) { return 0, 0, errors.New("no") }}, c, nil)
	p.fillOnce(context.Background(), make(chan struct{}, 2))
	<-c.n
}

// TestHostMemory reads this host's figures.
func TestHostMemory(t *testing.T) {
	avail, total, err := HostMemory()
	if err != nil || avail == 0 || avail > total {
		t.Fatalf("%d/%d %v", avail, total, err)
	}
}
