package manager_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/paddock-sandbox/paddock/internal/backend/fake"
	"github.com/paddock-sandbox/paddock/internal/manager"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// TestLifecycle: create → running on the host → delete → terminated and
// gone; a second delete is a no-op; other owners see nothing.
func TestLifecycle(t *testing.T) {
	tm := newTestManager(t)
	ctx := context.Background()
	rec := tm.create("alice", sandbox.CreateRequest{Env: map[string]string{"A": "1"}, Metadata: map[string]string{"k": "v"}})
	if rec.State != sandbox.Running || rec.Runtime != "fake" || rec.Owner != "alice" {
		t.Fatalf("created %+v", rec)
	}
	if !rec.ExpiresAt.After(rec.CreatedAt) {
		t.Errorf("expires %v, not after created %v", rec.ExpiresAt, rec.CreatedAt)
	}
	spec, ok := tm.backend.Host().Spec(rec.ID)
	if !ok || spec.Template != "base" || spec.Env["A"] != "1" || spec.Resources != tm.cfg.Defaults {
		t.Errorf("backend got %+v (on host: %v), want base, env and default resources", spec, ok)
	}
	if _, err := tm.m.Get(context.Background(), "bob", rec.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Get by another owner: %v, want ErrNotFound", err)
	}
	if err := tm.m.Delete(ctx, "bob", rec.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Delete by another owner: %v, want ErrNotFound", err)
	}
	if err := tm.m.Delete(ctx, "alice", rec.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	r := tm.record(rec.ID)
	if r.State != sandbox.Terminated || r.Reason != "deleted" || r.EndedAt == nil {
		t.Errorf("after delete: %s %q ended %v", r.State, r.Reason, r.EndedAt)
	}
	if tm.onHost(rec.ID) {
		t.Errorf("sandbox still on the host after delete")
	}
	if err := tm.m.Delete(ctx, "alice", rec.ID); err != nil {
		t.Errorf("second Delete: %v, want nil", err)
	}
	if _, err := tm.m.Running(context.Background(), "alice", rec.ID); !errors.Is(err, sandbox.ErrConflict) {
		t.Errorf("Running of a terminated sandbox: %v, want ErrConflict", err)
	}
}

// TestAdmission: the per-key and host limits refuse creates with their
// error classes; ended sandboxes free their slots.
func TestAdmission(t *testing.T) {
	tm := newTestManager(t)
	ctx := context.Background()
	var alice []string
	for range testMaxPerKey {
		alice = append(alice, tm.create("alice", sandbox.CreateRequest{}).ID)
	}
	if _, err := tm.m.Create(ctx, "alice", sandbox.CreateRequest{}); !errors.Is(err, sandbox.ErrLimit) {
		t.Errorf("create past the per-key limit: %v, want ErrLimit", err)
	}
	for range testMaxSandboxes - testMaxPerKey {
		tm.create("bob", sandbox.CreateRequest{})
	}
	if _, err := tm.m.Create(ctx, "carol", sandbox.CreateRequest{}); !errors.Is(err, sandbox.ErrNoCapacity) {
		t.Errorf("create past the host limit: %v, want ErrNoCapacity", err)
	}
	if err := tm.m.Delete(ctx, "alice", alice[0]); err != nil {
		t.Fatal(err)
	}
	tm.create("carol", sandbox.CreateRequest{})
	if n := len(tm.backend.Host().IDs()); n != testMaxSandboxes {
		t.Errorf("%d sandboxes on the host, want %d", n, testMaxSandboxes)
	}
}

// TestCreateFailure: a backend failure ends the record as failed, leaves
// nothing on the host and frees the admission slot.
func TestCreateFailure(t *testing.T) {
	tm := newTestManager(t)
	boom := errors.New("boom")
	tm.backend.Fail(fake.OpCreate, boom)
	for range testMaxPerKey + 1 {
		if _, err := tm.m.Create(context.Background(), "alice", sandbox.CreateRequest{}); !errors.Is(err, boom) {
			t.Fatalf("Create: %v, want the backend's error", err)
		}
	}
	if ids := tm.backend.Host().IDs(); len(ids) != 0 {
		t.Errorf("host has %v after failed creates", ids)
	}
	recs, _, err := tm.m.List(context.Background(), "alice", manager.Filter{State: "all"})
	if err != nil || len(recs) != testMaxPerKey+1 {
		t.Fatalf("List: %d records, %v", len(recs), err)
	}
	for _, r := range recs {
		if r.State != sandbox.Terminated || !strings.HasPrefix(r.Reason, "failed: ") || !strings.Contains(r.Reason, "boom") || r.EndedAt == nil {
			t.Errorf("failed create recorded as %s %q", r.State, r.Reason)
		}
	}
	tm.backend.Fail(fake.OpCreate, nil)
	tm.create("alice", sandbox.CreateRequest{})
}

// TestPauseResume: pausing stops billing and replaces the lease with the
// pause retention; resuming grants a new lease of the original length.
func TestPauseResume(t *testing.T) {
	tm := newTestManager(t)
	ctx := context.Background()
	rec := tm.create("alice", sandbox.CreateRequest{TimeoutSeconds: 600})
	if _, err := tm.m.Resume(ctx, "alice", rec.ID); !errors.Is(err, sandbox.ErrConflict) {
		t.Errorf("Resume of a running sandbox: %v, want ErrConflict", err)
	}
	tm.backend.Fail(fake.OpPause, errors.New("freezer stuck"))
	if _, err := tm.m.Pause(ctx, "alice", rec.ID, sandbox.Retention{}); err == nil {
		t.Fatalf("Pause with a failing backend succeeded")
	}
	if r := tm.record(rec.ID); r.State != sandbox.Running {
		t.Fatalf("a failed pause left the sandbox %s", r.State)
	}
	tm.backend.Fail(fake.OpPause, nil)

	p, err := tm.m.Pause(ctx, "alice", rec.ID, sandbox.Retention{})
	if err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if p.State != sandbox.Paused || p.PausedAt == nil || !p.ExpiresAt.Equal(p.PausedAt.Add(tm.cfg.PauseRetention)) {
		t.Errorf("paused record: %s paused_at %v expires %v", p.State, p.PausedAt, p.ExpiresAt)
	}
	if !tm.backend.Host().Paused(rec.ID) {
		t.Errorf("the backend did not pause the sandbox")
	}
	if _, err := tm.m.Pause(ctx, "alice", rec.ID, sandbox.Retention{}); !errors.Is(err, sandbox.ErrConflict) {
		t.Errorf("Pause of a paused sandbox: %v, want ErrConflict", err)
	}
	if _, err := tm.m.Running(context.Background(), "alice", rec.ID); !errors.Is(err, sandbox.ErrConflict) {
		t.Errorf("exec target while paused: %v, want ErrConflict", err)
	}
	// No running time accrues while paused, however often it is sampled.
	m1, err := tm.m.Metrics(ctx, "alice", rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	m2, _ := tm.m.Metrics(ctx, "alice", rec.ID)
	if m2.RunningSeconds != m1.RunningSeconds || m2.CostMicros != m1.CostMicros || m1.State != "paused" {
		t.Errorf("paused sandbox billed: %+v then %+v", m1, m2)
	}

	r, err := tm.m.Resume(ctx, "alice", rec.ID)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if r.State != sandbox.Running || r.PausedAt != nil || r.ExpiresAt.Sub(r.Usage.SampledAt) != 600e9 {
		t.Errorf("resumed record: %s paused_at %v, lease %v (want 10m)", r.State, r.PausedAt, r.ExpiresAt.Sub(r.Usage.SampledAt))
	}
	// Running again: billing resumes.
	eventually(t, "running time does not accrue after resume", func() bool {
		m3, err := tm.m.Metrics(ctx, "alice", rec.ID)
		return err == nil && m3.RunningSeconds > m2.RunningSeconds
	})
}
