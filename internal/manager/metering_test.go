package manager_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// TestMeteringCheckpoint: metering stores a sandbox's usage when its
// counters move, not at every pass, and readers still see usage accrued
// up to now; the cost limit is checked at every pass.
func TestMeteringCheckpoint(t *testing.T) {
	tm := newTestManager(t)
	ctx := context.Background()
	rec := tm.create("alice", sandbox.CreateRequest{})
	tm.backend.Host().SetStats(rec.ID, sandbox.Stats{CPUSeconds: 1})
	tm.runReaper()
	waitUsage := func(cpu float64) time.Time {
		t.Helper()
		within(t, 10*time.Second, fmt.Sprintf("stored CPU time %v", cpu), func() bool {
			return tm.record(rec.ID).Usage.CPUSeconds == cpu
		})
		return tm.record(rec.ID).Usage.SampledAt
	}
	at := waitUsage(1)
	h0, _ := tm.m.MetricsHistory(ctx, "alice", rec.ID)
	time.Sleep(300 * time.Millisecond) // about 60 passes of 5 ms
	h1, _ := tm.m.MetricsHistory(ctx, "alice", rec.ID)
	if len(h1)-len(h0) < 10 {
		t.Fatalf("history grew by %d samples in 300 ms of 5 ms passes", len(h1)-len(h0))
	}
	stored := tm.record(rec.ID).Usage
	if !stored.SampledAt.Equal(at) {
		t.Fatalf("an idle sandbox's usage was stored again (%s, then %s)", at, stored.SampledAt)
	}
	u, err := tm.m.Usage(ctx, "alice", rec.CreatedAt.Add(-time.Second), time.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if u.RunningSeconds < stored.RunningSeconds+0.25 || u.CPUSeconds != 1 || u.CostMicros <= stored.CostMicros {
		t.Fatalf("usage report %+v does not accrue past the stored %+v", u, stored)
	}
	m, err := tm.m.Metrics(ctx, "alice", rec.ID)
	if err != nil || m.RunningSeconds < stored.RunningSeconds+0.25 {
		t.Fatalf("metrics %+v (%v) do not accrue past the stored %+v", m, err, stored)
	}
	// Moving counters are stored at the next pass.
	tm.backend.Host().SetStats(rec.ID, sandbox.Stats{CPUSeconds: 2, MemoryPeakBytes: 1 << 20})
	if at2 := waitUsage(2); !at2.After(at) {
		t.Fatalf("sample time %s did not move past %s", at2, at)
	}
	// The cost limit is enforced from the accrued usage.
	capped := tm.create("alice", sandbox.CreateRequest{MaxCostMicros: 1 << 40})
	tm.backend.Host().SetStats(capped.ID, sandbox.Stats{CPUSeconds: 1e12})
	if r := tm.waitState(capped.ID, sandbox.Terminated); r.Reason != "cost limit reached" {
		t.Fatalf("capped sandbox ended with %q", r.Reason)
	}
}
