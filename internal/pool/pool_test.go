package pool

import (
	"context"
	"testing"
)

type noCreator struct{}

func (noCreator) CreateIdle(context.Context, string) (string, string, error) {
	return "", "", context.Canceled
}

// TestTakeRef: a hand-out takes only a sandbox made from the caller's
// version of the template (another key's private template of the same
// name, or a template rebuilt since, resolve to another reference).
func TestTakeRef(t *testing.T) {
	p := New(map[string]int{"py": 2}, noCreator{}, nil)
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
	p := New(map[string]int{"a": 2, "b": 2}, noCreator{}, nil)
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
