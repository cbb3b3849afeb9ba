package manager_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/internal/backend/fake"
	"github.com/paddock-sandbox/paddock/internal/manager"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// TestMain lets the test binary serve as the fake agents' command shim.
func TestMain(m *testing.M) {
	fake.HandleShim()
	os.Exit(m.Run())
}

// Limits of the test manager.
const (
	testMaxSandboxes = 6
	testMaxPerKey    = 3
)

// testManager is a real manager and store over the fake backend.
type testManager struct {
	t       *testing.T
	m       *manager.Manager
	st      *store.Store
	backend *fake.Backend
	cfg     manager.Config
	// wrap, if set, wraps the backend the manager is given.
	wrap func(*fake.Backend) sandbox.Backend
}

// newTestManager is the one place the tests build a manager (its
// constructor is about to change): the store in a temporary directory,
// the fake backend, recovery done, the reaper not running.
func newTestManager(t *testing.T) *testManager {
	t.Helper()
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	host, err := fake.NewHost(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close() })
	cfg := manager.DefaultConfig()
	cfg.MaxSandboxes, cfg.MaxPerKey = testMaxSandboxes, testMaxPerKey
	// The reaper, once started, checks leases and liveness continuously.
	cfg.ReapInterval, cfg.LivenessInterval = 5*time.Millisecond, 5*time.Millisecond
	cfg.RetainEnded = time.Hour
	tm := &testManager{t: t, st: st, backend: fake.New(host, fake.Config{}), cfg: cfg}
	tm.start()
	return tm
}

// newManager builds a manager over the store and the current backend.
func (tm *testManager) newManager() *manager.Manager {
	var b sandbox.Backend = tm.backend
	if tm.wrap != nil {
		b = tm.wrap(tm.backend)
	}
	return manager.New(tm.cfg, manager.Deps{Store: tm.st, Backend: b})
}

// start builds the manager and recovers.
func (tm *testManager) start() {
	tm.t.Helper()
	tm.m = tm.newManager()
	if err := tm.m.Recover(context.Background()); err != nil {
		tm.t.Fatalf("Recover: %v", err)
	}
}

// restart simulates a daemon restart: a new manager over the same store
// and a new backend over the same host, then recovery.
func (tm *testManager) restart() {
	tm.t.Helper()
	tm.backend = tm.backend.Restart()
	tm.start()
}

// runReaper runs the reaper until the test ends.
func (tm *testManager) runReaper() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		tm.m.Run(ctx)
		close(done)
	}()
	tm.t.Cleanup(func() {
		cancel()
		<-done
	})
}

func (tm *testManager) create(owner string, req sandbox.CreateRequest) *store.Record {
	tm.t.Helper()
	rec, err := tm.m.Create(context.Background(), owner, req)
	if err != nil {
		tm.t.Fatalf("Create: %v", err)
	}
	return rec
}

// record reads sandbox id's persisted record.
func (tm *testManager) record(id string) *store.Record {
	tm.t.Helper()
	r, err := tm.st.Get(id)
	if err != nil {
		tm.t.Fatalf("record %s: %v", id, err)
	}
	return r
}

// expire moves sandbox id's expiry into the past, as time would.
func (tm *testManager) expire(id string) {
	tm.t.Helper()
	if _, err := tm.st.Update(id, func(r *store.Record) error {
		r.ExpiresAt = time.Now().Add(-time.Second)
		return nil
	}); err != nil {
		tm.t.Fatal(err)
	}
}

// onHost reports whether the backend still has sandbox id.
func (tm *testManager) onHost(id string) bool {
	return slices.Contains(tm.backend.Host().IDs(), id)
}

// waitState polls until sandbox id's record is in state, and returns it.
func (tm *testManager) waitState(id string, state sandbox.State) *store.Record {
	tm.t.Helper()
	end := time.Now().Add(time.Minute)
	for {
		r := tm.record(id)
		if r.State == state {
			return r
		}
		if time.Now().After(end) {
			tm.t.Fatalf("sandbox %s is %s (%s), want %s", id, r.State, r.Reason, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// eventually polls cond until it holds, within a generous deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	within(t, time.Minute, what, cond)
}

// within polls cond until it holds, failing the test after d (for
// conditions that must hold before some later event would make them).
func within(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func idsOf(recs []*store.Record) []string {
	out := make([]string, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.ID)
	}
	return out
}

// equalSet reports whether a and b hold the same ids, ignoring order.
func equalSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
