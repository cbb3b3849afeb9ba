package manager_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/internal/backend/fake"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// TestRecover: after a daemon restart, live sandboxes are re-adopted
// (reachable, counted against the limits), and everything else the store
// or the host holds is ended and cleaned up.
func TestRecover(t *testing.T) {
	tm := newTestManager(t)
	ctx := context.Background()
	live := tm.create("alice", sandbox.CreateRequest{})
	paused := tm.create("alice", sandbox.CreateRequest{})
	if _, err := tm.m.Pause(ctx, "alice", paused.ID, sandbox.Retention{}); err != nil {
		t.Fatal(err)
	}
	died := tm.create("bob", sandbox.CreateRequest{})
	expired := tm.create("bob", sandbox.CreateRequest{})
	pauseAtEnd := tm.create("carol", sandbox.CreateRequest{OnTimeout: sandbox.OnTimeoutPause})

	// While the daemon is down: one sandbox dies, two leases end, a
	// create was cut short (persisted as creating, started on the host)
	// and an orphan the store never heard of runs.
	if err := tm.backend.Host().Kill(died.ID); err != nil {
		t.Fatal(err)
	}
	tm.expire(expired.ID)
	tm.expire(pauseAtEnd.ID)
	now := time.Now().UTC()
	halfMade := &store.Record{ID: "sbhalfmade", Owner: "carol", Template: "base", State: sandbox.Creating,
		CreatedAt: now, ExpiresAt: now.Add(time.Hour), Resources: tm.cfg.Defaults}
	if err := tm.st.Put(halfMade); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{halfMade.ID, "sborphan"} {
		if _, err := tm.backend.Create(ctx, sandbox.Spec{ID: id, Template: "base", Resources: tm.cfg.Defaults}); err != nil {
			t.Fatal(err)
		}
	}

	tm.restart()

	for _, want := range []struct {
		id     string
		state  sandbox.State
		reason string
		onHost bool
	}{
		{live.ID, sandbox.Running, "", true},
		{paused.ID, sandbox.Paused, "paused", true},
		{died.ID, sandbox.Terminated, "exited while the daemon was down", false},
		{expired.ID, sandbox.Terminated, "expired", false},
		{pauseAtEnd.ID, sandbox.Paused, "expired", true},
		{halfMade.ID, sandbox.Terminated, "failed: daemon stopped during create", false},
	} {
		r := tm.record(want.id)
		if r.State != want.state || r.Reason != want.reason {
			t.Errorf("%s: %s %q, want %s %q", want.id, r.State, r.Reason, want.state, want.reason)
		}
		if tm.onHost(want.id) != want.onHost {
			t.Errorf("%s on the host: %v, want %v", want.id, !want.onHost, want.onHost)
		}
	}
	if tm.onHost("sborphan") {
		t.Errorf("the orphan is still on the host")
	}
	if ids := tm.backend.Host().IDs(); !slices.Equal(ids, sorted(live.ID, paused.ID, pauseAtEnd.ID)) {
		t.Errorf("host holds %v after recovery", ids)
	}

	// The re-adopted sandboxes are reachable and hold their slots.
	if _, err := tm.m.Running(context.Background(), "alice", live.ID); err != nil {
		t.Errorf("re-adopted sandbox: %v", err)
	}
	if err := tm.m.Agent().Health(ctx, live.ID); err != nil {
		t.Fatalf("the re-adopted sandbox's agent: %v", err)
	}
	if _, err := tm.m.Resume(ctx, "alice", paused.ID); err != nil {
		t.Errorf("resume after restart: %v", err)
	}
	// 3 re-adopted + 3 new fill the host.
	tm.create("alice", sandbox.CreateRequest{})
	tm.create("bob", sandbox.CreateRequest{})
	tm.create("bob", sandbox.CreateRequest{})
	if _, err := tm.m.Create(ctx, "dave", sandbox.CreateRequest{}); !errors.Is(err, sandbox.ErrNoCapacity) {
		t.Errorf("re-adopted sandboxes do not count against the host's limit: %v", err)
	}
}

// TestRecoverBackendDown: when the host cannot list its sandboxes,
// recovery fails rather than guessing, and changes no record.
func TestRecoverBackendDown(t *testing.T) {
	tm := newTestManager(t)
	rec := tm.create("alice", sandbox.CreateRequest{})
	tm.backend = tm.backend.Restart()
	tm.backend.Fail(fake.OpList, errors.New("runtime state unreadable"))
	if err := tm.newManager().Recover(context.Background()); err == nil {
		t.Errorf("Recover with a failing List succeeded")
	}
	if r := tm.record(rec.ID); r.State != sandbox.Running || !tm.onHost(rec.ID) {
		t.Errorf("a failed recovery changed the sandbox: %s %q", r.State, r.Reason)
	}
}

func sorted(ids ...string) []string {
	slices.Sort(ids)
	return ids
}
