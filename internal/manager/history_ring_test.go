package manager

import (
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

func TestHistoryRing(t *testing.T) {
	for _, tc := range []struct {
		size, adds int
		wantFirst  float64
	}{
		{size: 3, adds: 0},
		{size: 3, adds: 2, wantFirst: 0},
		{size: 3, adds: 3, wantFirst: 0},
		{size: 3, adds: 4, wantFirst: 1},
		{size: 3, adds: 10, wantFirst: 7},
		{size: 1, adds: 5, wantFirst: 4},
	} {
		h := newHistory(tc.size)
		t0 := time.Unix(1e9, 0)
		for i := range tc.adds {
			h.add("sb", t0.Add(time.Duration(i)*time.Second), store.Usage{CPUSeconds: float64(i)}, sandbox.Stats{})
		}
		got := h.get("sb")
		if want := min(tc.adds, tc.size); len(got) != want {
			t.Fatalf("size %d, %d adds: %d samples; want %d", tc.size, tc.adds, len(got), want)
		}
		for i, s := range got {
			if s.CPUSeconds != tc.wantFirst+float64(i) {
				t.Errorf("size %d, %d adds: sample %d is %v; want oldest first from %v", tc.size, tc.adds, i, s.CPUSeconds, tc.wantFirst)
			}
		}
	}
}

func TestHistoryKeep(t *testing.T) {
	h := newHistory(4)
	for _, id := range []string{"a", "b"} {
		h.add(id, time.Now(), store.Usage{}, sandbox.Stats{MemoryBytes: 7})
	}
	h.keep(map[string]bool{"b": true})
	if len(h.get("a")) != 0 || len(h.get("b")) != 1 || h.get("b")[0].MemoryBytes != 7 {
		t.Errorf("after keep(b): a=%v b=%v", h.get("a"), h.get("b"))
	}
	if got := h.get("nope"); got == nil || len(got) != 0 {
		t.Errorf("unknown sandbox: %v; want an empty, non-nil slice", got)
	}
}
