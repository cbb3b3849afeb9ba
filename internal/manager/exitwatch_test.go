package manager_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/internal/backend/fake"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// watchingBackend is the fake backend as a sandbox.ExitWatcher whose
// exits the test reports itself.
type watchingBackend struct {
	*fake.Backend
	mu     sync.Mutex
	exited []string
}

func (w *watchingBackend) Exited() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.exited
	w.exited = nil
	return out
}

func (w *watchingBackend) report(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.exited = append(w.exited, id)
}

func (w *watchingBackend) pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.exited)
}

// newWatchingManager is newTestManager over a watchingBackend.
func newWatchingManager(t *testing.T) (*testManager, *watchingBackend) {
	tm := newTestManager(t)
	w := &watchingBackend{Backend: tm.backend}
	tm.wrap = func(b *fake.Backend) sandbox.Backend { w.Backend = b; return w }
	tm.start()
	return tm, w
}

// TestReaperExitWatcher: with a backend that reports exits, the reaper
// asks no running sandbox whether it is alive; a reported exit ends the
// sandbox (a stop or delete that got there first wins), and only it.
func TestReaperExitWatcher(t *testing.T) {
	t.Run("no polling", func(t *testing.T) {
		tm, w := newWatchingManager(t)
		var ids []string
		for range 3 {
			ids = append(ids, tm.create("alice", sandbox.CreateRequest{}).ID)
		}
		died := tm.create("bob", sandbox.CreateRequest{}).ID
		if err := tm.backend.Host().Kill(died); err != nil {
			t.Fatal(err)
		}
		before := tm.backend.Calls(fake.OpAlive)
		tm.runReaper()
		time.Sleep(100 * time.Millisecond) // twenty reaper passes and liveness intervals
		if n := tm.backend.Calls(fake.OpAlive) - before; n != 0 {
			t.Errorf("the reaper polled Alive %d times", n)
		}
		if r := tm.record(died); r.State != sandbox.Running {
			t.Fatalf("an unreported exit ended the sandbox: %s (%s)", r.State, r.Reason)
		}
		w.report(died)
		if r := tm.waitState(died, sandbox.Terminated); r.Reason != "exited" {
			t.Errorf("reason %q, want exited", r.Reason)
		}
		if tm.onHost(died) {
			t.Error("the exited sandbox is still on the host")
		}
		for _, id := range ids {
			if r := tm.record(id); r.State != sandbox.Running || !tm.onHost(id) {
				t.Errorf("sandbox %s is %s (%s)", id, r.State, r.Reason)
			}
		}
	})
	t.Run("stopped first", func(t *testing.T) {
		tm, w := newWatchingManager(t)
		id := tm.create("alice", sandbox.CreateRequest{}).ID
		if _, err := tm.m.Stop(context.Background(), "alice", id, 0); err != nil {
			t.Fatal(err)
		}
		w.report(id) // the stop's own kill, seen by the watcher
		tm.runReaper()
		eventually(t, "the exit is taken", func() bool { return w.pending() == 0 })
		time.Sleep(20 * time.Millisecond) // a few more passes
		if r := tm.record(id); r.State != sandbox.Stopped || !tm.onHost(id) {
			t.Errorf("the stopped sandbox is %s (%s), on host %v", r.State, r.Reason, tm.onHost(id))
		}
	})
	t.Run("alive again", func(t *testing.T) {
		tm, w := newWatchingManager(t)
		id := tm.create("alice", sandbox.CreateRequest{}).ID
		w.report(id) // a stale report: the sandbox still runs
		tm.runReaper()
		eventually(t, "the exit is taken", func() bool { return w.pending() == 0 })
		time.Sleep(20 * time.Millisecond)
		if r := tm.record(id); r.State != sandbox.Running {
			t.Errorf("a running sandbox was ended on a stale report: %s (%s)", r.State, r.Reason)
		}
	})
}
