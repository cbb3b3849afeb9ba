package manager_test

import (
	"context"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// TestReaper: the reaper works from the persisted leases and the
// backend's liveness. Each case brings a sandbox into a condition and
// waits for the reaper's verdict.
func TestReaper(t *testing.T) {
	for _, tc := range []struct {
		name   string
		req    sandbox.CreateRequest
		prep   func(tm *testManager, id string)
		state  sandbox.State
		reason string
		onHost bool
	}{
		{"lease expired", sandbox.CreateRequest{},
			func(tm *testManager, id string) { tm.expire(id) },
			sandbox.Terminated, "expired", false},
		{"lease expired, on_timeout pause", sandbox.CreateRequest{OnTimeout: sandbox.OnTimeoutPause},
			func(tm *testManager, id string) { tm.expire(id) },
			sandbox.Paused, "expired", true},
		{"pause retention expired", sandbox.CreateRequest{},
			func(tm *testManager, id string) {
				if _, err := tm.m.Pause(context.Background(), "alice", id, sandbox.Retention{}); err != nil {
					tm.t.Fatal(err)
				}
				tm.expire(id)
			},
			sandbox.Terminated, "expired while paused", false},
		{"died", sandbox.CreateRequest{},
			func(tm *testManager, id string) {
				if err := tm.backend.Host().Kill(id); err != nil {
					tm.t.Fatal(err)
				}
			},
			sandbox.Terminated, "exited", false},
		{"over its cost limit", sandbox.CreateRequest{MaxCostMicros: 2000},
			func(tm *testManager, id string) {
				// An hour of CPU costs far more than 2000 micros.
				if err := tm.backend.Host().SetStats(id, sandbox.Stats{CPUSeconds: 3600, MemoryBytes: 1 << 20, PIDs: 1}); err != nil {
					tm.t.Fatal(err)
				}
			},
			sandbox.Terminated, "cost limit reached", false},
		{"lease expired, on_timeout stop", sandbox.CreateRequest{OnTimeout: sandbox.OnTimeoutStop},
			func(tm *testManager, id string) { tm.expire(id) },
			sandbox.Stopped, "expired", true},
		{"stop retention expired", sandbox.CreateRequest{},
			func(tm *testManager, id string) {
				if _, err := tm.m.Stop(context.Background(), "alice", id, 0); err != nil {
					tm.t.Fatal(err)
				}
				tm.expire(id)
			},
			sandbox.Terminated, "expired while stopped", false},
		{"pause, then stop", sandbox.CreateRequest{},
			func(tm *testManager, id string) {
				if _, err := tm.m.Pause(context.Background(), "alice", id,
					sandbox.Retention{KeepForSeconds: 3600, ThenStopAfterSeconds: 1}); err != nil {
					tm.t.Fatal(err)
				}
			},
			sandbox.Stopped, "stopped after pause", true},
		{"idle, on_idle pause", sandbox.CreateRequest{Idle: sandbox.IdlePolicy{TimeoutSeconds: 1}},
			func(tm *testManager, id string) {}, sandbox.Paused, "idle", true},
		{"idle, on_idle stop", sandbox.CreateRequest{Idle: sandbox.IdlePolicy{TimeoutSeconds: 1, OnIdle: sandbox.OnTimeoutStop}},
			func(tm *testManager, id string) {}, sandbox.Stopped, "idle", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tm := newTestManager(t)
			rec := tm.create("alice", tc.req)
			keep := tm.create("alice", sandbox.CreateRequest{}) // must be left alone
			tc.prep(tm, rec.ID)
			tm.runReaper()
			r := tm.waitState(rec.ID, tc.state)
			if r.Reason != tc.reason {
				t.Errorf("reason %q, want %q", r.Reason, tc.reason)
			}
			if tm.onHost(rec.ID) != tc.onHost {
				t.Errorf("on the host: %v, want %v", tm.onHost(rec.ID), tc.onHost)
			}
			if k := tm.record(keep.ID); k.State != sandbox.Running || !tm.onHost(keep.ID) {
				t.Errorf("the other sandbox is %s (%s)", k.State, k.Reason)
			}
		})
	}
}

// TestReaperPrunesEnded: records of ended sandboxes go once RetainEnded
// has passed since they ended, not before.
func TestReaperPrunesEnded(t *testing.T) {
	tm := newTestManager(t)
	old := tm.create("alice", sandbox.CreateRequest{})
	recent := tm.create("alice", sandbox.CreateRequest{})
	for _, id := range []string{old.ID, recent.ID} {
		if err := tm.m.Delete(context.Background(), "alice", id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tm.st.Update(old.ID, func(r *store.Record) error {
		ended := time.Now().Add(-2 * tm.cfg.RetainEnded)
		r.EndedAt = &ended
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tm.runReaper()
	eventually(t, "the old record is still there", func() bool {
		_, err := tm.st.Get(old.ID)
		return err != nil
	})
	if r := tm.record(recent.ID); r.State != sandbox.Terminated {
		t.Errorf("recent record: %s", r.State)
	}
}
