package manager_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/internal/backend/fake"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// totalMeter is the fake backend with sandbox.MeterTotal (the sum of the
// sandboxes' counters, as a parent cgroup's) and a count of Stats reads.
type totalMeter struct {
	*fake.Backend
	mu    sync.Mutex
	reads map[string]int
}

func (b *totalMeter) Stats(ctx context.Context, id string) (sandbox.Stats, error) {
	b.mu.Lock()
	b.reads[id]++
	b.mu.Unlock()
	return b.Backend.Stats(ctx, id)
}

func (b *totalMeter) TotalCPUSeconds(ctx context.Context) (float64, error) {
	b.mu.Lock()
	ids := make([]string, 0, len(b.reads))
	for id := range b.reads {
		ids = append(ids, id)
	}
	b.mu.Unlock()
	total := 1.0 // what ended sandboxes used
	for _, id := range ids {
		st, _ := b.Backend.Stats(ctx, id)
		total += st.CPUSeconds
	}
	return total, nil
}

func (b *totalMeter) readsOf(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reads[id]
}

// TestMeteringQuiet: a sandbox whose CPU time stands still is not read at
// every pass; it is read again when it is used, or when the total CPU
// time shows that one of the quiet sandboxes moved.
func TestMeteringQuiet(t *testing.T) {
	tm := newTestManager(t)
	var tb *totalMeter
	tm.wrap = func(b *fake.Backend) sandbox.Backend {
		tb = &totalMeter{Backend: b, reads: map[string]int{}}
		return tb
	}
	tm.start()
	a := tm.create("alice", sandbox.CreateRequest{})
	b := tm.create("alice", sandbox.CreateRequest{})
	for _, id := range []string{a.ID, b.ID} {
		tm.backend.Host().SetStats(id, sandbox.Stats{CPUSeconds: 1})
	}
	tm.runReaper()
	// Each wait (wait) is well under quietRead (1 min), after which
	// metering reads a quiet sandbox anyway.
	const wait = 10 * time.Second
	// Read twice with the same counter: quiet.
	within(t, wait, "both sandboxes read twice", func() bool { return tb.readsOf(a.ID) >= 2 && tb.readsOf(b.ID) >= 2 })
	time.Sleep(50 * time.Millisecond)
	ra, rb := tb.readsOf(a.ID), tb.readsOf(b.ID)
	h0, _ := tm.m.MetricsHistory(context.Background(), "alice", a.ID)
	time.Sleep(300 * time.Millisecond) // about 60 passes
	if n := tb.readsOf(a.ID) - ra + tb.readsOf(b.ID) - rb; n != 0 {
		t.Fatalf("quiet sandboxes were read %d times in 60 passes", n)
	}
	if h1, _ := tm.m.MetricsHistory(context.Background(), "alice", a.ID); len(h1)-len(h0) < 10 {
		t.Fatalf("a quiet sandbox's history grew by %d samples in 60 passes", len(h1)-len(h0))
	}
	// A call on a makes it read again; b stays quiet.
	ra, rb = tb.readsOf(a.ID), tb.readsOf(b.ID)
	tm.m.Active("alice", a.ID)()
	within(t, wait, "a read after a call on it", func() bool { return tb.readsOf(a.ID) > ra })
	if tb.readsOf(b.ID) != rb {
		t.Fatal("a call on one sandbox made metering read another")
	}
	// b's counter moves without any call (a background process): the
	// total shows it, and its usage is stored.
	tm.backend.Host().SetStats(b.ID, sandbox.Stats{CPUSeconds: 3})
	within(t, wait, "b's new CPU time stored", func() bool { return tm.record(b.ID).Usage.CPUSeconds == 3 })
}
