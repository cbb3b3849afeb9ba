package manager_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// TestMetricsHistory: the reaper's metering passes fill a sandbox's
// history, which only its owner reads.
func TestMetricsHistory(t *testing.T) {
	tm := newTestManager(t)
	rec := tm.create("alice", sandbox.CreateRequest{})
	tm.runReaper()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h, err := tm.m.MetricsHistory(ctx, "alice", rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) >= 3 {
			for i := 1; i < len(h); i++ {
				if !h[i].At.After(h[i-1].At) || h[i].CostMicros < h[i-1].CostMicros || h[i].CPUSeconds < h[i-1].CPUSeconds {
					t.Fatalf("samples out of order or counters going back: %+v then %+v", h[i-1], h[i])
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("history has %d samples after the reaper ran for 10 s", len(h))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := tm.m.MetricsHistory(ctx, "bob", rec.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("another key's history: %v; want not found", err)
	}
}
