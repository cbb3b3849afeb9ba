package manager_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/paddock-sandbox/paddock/internal/backend/fake"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// killingBackend is the fake backend as a sandbox.Killer whose Destroy
// can be held back, as a slow or interrupted cleanup.
type killingBackend struct {
	*fake.Backend
	hold    chan struct{} // closed: Destroy proceeds
	once    sync.Once
	killErr error
}

func (k *killingBackend) Kill(ctx context.Context, id string) error {
	if k.killErr != nil {
		return k.killErr
	}
	return k.Host().Kill(id)
}

func (k *killingBackend) Destroy(ctx context.Context, id string) error {
	select {
	case <-k.hold:
	case <-ctx.Done():
		return ctx.Err()
	}
	return k.Backend.Destroy(ctx, id)
}

func (k *killingBackend) release() { k.once.Do(func() { close(k.hold) }) }

func newKillingManager(t *testing.T) (*testManager, *killingBackend) {
	tm := newTestManager(t)
	k := &killingBackend{Backend: tm.backend, hold: make(chan struct{})}
	tm.wrap = func(b *fake.Backend) sandbox.Backend { k.Backend = b; return k }
	tm.start()
	t.Cleanup(k.release)
	return tm, k
}

// TestDeleteDefersCleanup: a delete answers once the sandbox's processes
// are gone; it is terminated on record at once and its host resources go
// after. A cleanup cut short by a crash is finished by recovery; a kill
// that fails falls back to the synchronous destroy.
func TestDeleteDefersCleanup(t *testing.T) {
	ctx := context.Background()
	t.Run("answers before cleanup", func(t *testing.T) {
		tm, k := newKillingManager(t)
		id := tm.create("alice", sandbox.CreateRequest{}).ID
		if err := tm.m.Delete(ctx, "alice", id); err != nil { // Destroy is held
			t.Fatal(err)
		}
		if r := tm.record(id); r.State != sandbox.Terminated || r.Reason != "deleted" {
			t.Fatalf("after delete: %s (%s)", r.State, r.Reason)
		}
		if alive, _ := tm.backend.Alive(ctx, id); alive {
			t.Fatal("the deleted sandbox still runs")
		}
		if !tm.onHost(id) {
			t.Fatal("cleaned up before it was let")
		}
		// Its slot of the host's capacity is free at once.
		for range testMaxPerKey {
			tm.create("alice", sandbox.CreateRequest{})
		}
		// AwaitCleanups waits for it, or until its context ends.
		short, cancel := context.WithCancel(ctx)
		cancel()
		if tm.m.AwaitCleanups(short) {
			t.Error("AwaitCleanups with an ended context says the cleanups ended")
		}
		go k.release()
		if !tm.m.AwaitCleanups(ctx) {
			t.Error("AwaitCleanups says there was no cleanup to wait for")
		}
		if tm.onHost(id) {
			t.Error("still on the host after the cleanup")
		}
		if tm.m.AwaitCleanups(ctx) {
			t.Error("AwaitCleanups says a cleanup was in flight after all ended")
		}
	})
	t.Run("crash mid-cleanup", func(t *testing.T) {
		tm, _ := newKillingManager(t)
		id := tm.create("alice", sandbox.CreateRequest{}).ID
		if err := tm.m.Delete(ctx, "alice", id); err != nil {
			t.Fatal(err)
		}
		// The daemon dies with the cleanup held: a new one over the same
		// host (whose Destroy is not held) recovers.
		tm.wrap = nil
		tm.restart()
		if tm.onHost(id) {
			t.Error("recovery left the deleted sandbox's traces")
		}
		if r := tm.record(id); r.State != sandbox.Terminated || r.Reason != "deleted" {
			t.Errorf("after recovery: %s (%s)", r.State, r.Reason)
		}
	})
	t.Run("kill fails", func(t *testing.T) {
		tm, k := newKillingManager(t)
		k.killErr = errors.New("cannot confirm")
		k.release()
		id := tm.create("alice", sandbox.CreateRequest{}).ID
		if err := tm.m.Delete(ctx, "alice", id); err != nil {
			t.Fatal(err)
		}
		if r := tm.record(id); r.State != sandbox.Terminated || tm.onHost(id) {
			t.Errorf("after a synchronous delete: %s, on host %v", r.State, tm.onHost(id))
		}
	})
}
