package manager_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/backend/fake"
	"github.com/paddock-sandbox/paddock/internal/manager"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// writeFile and readFile go through the sandbox's real agent.
func (tm *testManager) writeFile(id, path, content string) {
	tm.t.Helper()
	if _, err := tm.m.Agent().WriteFile(context.Background(), id, path, "", strings.NewReader(content), int64(len(content))); err != nil {
		tm.t.Fatalf("write %s: %v", path, err)
	}
}

func (tm *testManager) readFile(id, path string) string {
	tm.t.Helper()
	f, err := tm.m.Agent().ReadFile(context.Background(), id, path, 1<<20)
	if err != nil {
		tm.t.Fatalf("read %s: %v", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		tm.t.Fatal(err)
	}
	return string(b)
}

// reasons lists a record's history as "state/reason" entries.
func reasons(r *store.Record) string {
	var out []string
	for _, e := range r.History {
		out = append(out, string(e.State)+"/"+e.Reason)
	}
	return strings.Join(out, " ")
}

// TestStopStart: a stopped sandbox keeps its files and record, holds no
// live slot, bills only storage, survives a daemon restart, and starts
// again with its files, the same id and its resources.
func TestStopStart(t *testing.T) {
	tm := newTestManager(t)
	ctx := context.Background()
	res := sandbox.Resources{VCPUs: 2, MemoryMiB: 256, DiskMiB: 2048, PIDs: 100}
	rec := tm.create("alice", sandbox.CreateRequest{TimeoutSeconds: 600, Resources: res})
	tm.writeFile(rec.ID, "kept.txt", "still here")
	if _, err := tm.m.Start(ctx, "alice", rec.ID); !errors.Is(err, sandbox.ErrConflict) {
		t.Errorf("Start of a running sandbox: %v, want ErrConflict", err)
	}
	if _, err := tm.m.Stop(ctx, "alice", rec.ID, int64(tm.cfg.MaxStopRetention/time.Second)+1); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("Stop with keep_for over the maximum: %v, want ErrInvalid", err)
	}
	if _, err := tm.m.Stop(ctx, "bob", rec.ID, 0); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Stop of another key's sandbox: %v, want ErrNotFound", err)
	}
	st, err := tm.m.Stop(ctx, "alice", rec.ID, 3600)
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if st.State != sandbox.Stopped || st.StoppedAt == nil || st.EndedAt != nil || st.ExpiresAt.Sub(*st.StoppedAt) != time.Hour {
		t.Errorf("stopped record: %s stopped_at %v ended_at %v expires %v", st.State, st.StoppedAt, st.EndedAt, st.ExpiresAt)
	}
	if alive, _ := tm.backend.Alive(ctx, rec.ID); alive || !tm.onHost(rec.ID) {
		t.Errorf("stopped sandbox: alive %v, on host %v; want dead but kept", alive, tm.onHost(rec.ID))
	}
	if _, err := tm.m.Running(ctx, "alice", rec.ID); !errors.Is(err, sandbox.ErrConflict) {
		t.Errorf("exec target while stopped: %v, want ErrConflict", err)
	}
	// It holds no live slot: the host's limit counts only live sandboxes.
	for range testMaxPerKey {
		tm.create("bob", sandbox.CreateRequest{})
	}
	for range testMaxSandboxes - testMaxPerKey {
		tm.create("carol", sandbox.CreateRequest{})
	}
	// Storage accrues, running time does not.
	m1, _ := tm.m.Metrics(ctx, "alice", rec.ID)
	time.Sleep(20 * time.Millisecond)
	m2, _ := tm.m.Metrics(ctx, "alice", rec.ID)
	if m2.RunningSeconds != m1.RunningSeconds || m1.State != sandbox.Stopped {
		t.Errorf("stopped sandbox billed for running: %+v then %+v", m1, m2)
	}

	tm.restart()
	if r := tm.record(rec.ID); r.State != sandbox.Stopped || !tm.onHost(rec.ID) {
		t.Fatalf("after a restart the stopped sandbox is %s (%s), on host %v", r.State, r.Reason, tm.onHost(rec.ID))
	}
	// The host is full: starting needs a live slot and fails cleanly.
	if _, err := tm.m.Start(ctx, "alice", rec.ID); !errors.Is(err, sandbox.ErrNoCapacity) {
		t.Errorf("Start on a full host: %v, want ErrNoCapacity", err)
	}
	if r := tm.record(rec.ID); r.State != sandbox.Stopped || r.Reason != "stopped" {
		t.Errorf("a refused start left %s %q", r.State, r.Reason)
	}
	bobs, _, _ := tm.m.List(ctx, "bob", manager.Filter{})
	if err := tm.m.Delete(ctx, "bob", bobs[0].ID); err != nil {
		t.Fatal(err)
	}
	tm.backend.Fail(fake.OpStart, errors.New("runtime broke"))
	if _, err := tm.m.Start(ctx, "alice", rec.ID); err == nil {
		t.Fatal("Start with a failing backend succeeded")
	}
	tm.backend.Fail(fake.OpStart, nil)
	if r := tm.record(rec.ID); r.State != sandbox.Stopped || r.Reason != "stopped" {
		t.Errorf("a failed start left %s %q", r.State, r.Reason)
	}
	r, err := tm.m.Start(ctx, "alice", rec.ID)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if r.State != sandbox.Running || r.StoppedAt != nil || r.ExpiresAt.Sub(r.Usage.SampledAt) != 10*time.Minute {
		t.Errorf("started record: %s stopped_at %v lease %v", r.State, r.StoppedAt, r.ExpiresAt.Sub(r.Usage.SampledAt))
	}
	if r.Usage.StoredGiBSeconds <= 0 || r.Usage.CostMicros < m1.CostMicros {
		t.Errorf("no storage billed while stopped: %+v", r.Usage)
	}
	if got := tm.readFile(rec.ID, "kept.txt"); got != "still here" {
		t.Errorf("file after stop, restart, start: %q", got)
	}
	if spec, _ := tm.backend.Host().Spec(rec.ID); spec.Resources != res {
		t.Errorf("started with resources %+v, want %+v", spec.Resources, res)
	}
	if h := reasons(r); h != "running/create stopped/stopped running/start" {
		t.Errorf("history %q", h)
	}
}

func execReq(command string) *api.ExecRequest { return &api.ExecRequest{Command: command} }

// TestPauseRetention: keep_for sets the retention within the operator's
// bounds, and then_stop_after needs a longer keep_for.
func TestPauseRetention(t *testing.T) {
	tm := newTestManager(t)
	ctx := context.Background()
	maxS := int64(tm.cfg.MaxPauseRetention / time.Second)
	for _, tc := range []struct {
		name string
		ret  sandbox.Retention
		keep time.Duration // 0: refused
		stop time.Duration
	}{
		{"default", sandbox.Retention{}, tm.cfg.PauseRetention, 0},
		{"keep_for", sandbox.Retention{KeepForSeconds: 90}, 90 * time.Second, 0},
		{"the maximum", sandbox.Retention{KeepForSeconds: maxS}, tm.cfg.MaxPauseRetention, 0},
		{"over the maximum", sandbox.Retention{KeepForSeconds: maxS + 1}, 0, 0},
		{"negative", sandbox.Retention{KeepForSeconds: -1}, 0, 0},
		{"then stop", sandbox.Retention{KeepForSeconds: 7200, ThenStopAfterSeconds: 60}, 2 * time.Hour, time.Minute},
		{"then stop, default keep", sandbox.Retention{ThenStopAfterSeconds: 60}, time.Minute + tm.cfg.StopRetention, time.Minute},
		{"then stop after keep", sandbox.Retention{KeepForSeconds: 60, ThenStopAfterSeconds: 60}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tm.create("alice", sandbox.CreateRequest{})
			defer tm.m.Delete(ctx, "alice", rec.ID)
			p, err := tm.m.Pause(ctx, "alice", rec.ID, tc.ret)
			if tc.keep == 0 {
				if !errors.Is(err, sandbox.ErrInvalid) {
					t.Errorf("Pause(%+v): %v, want ErrInvalid", tc.ret, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := p.ExpiresAt.Sub(*p.PausedAt); got != tc.keep {
				t.Errorf("kept for %v, want %v", got, tc.keep)
			}
			if tc.stop > 0 && (p.StopAt == nil || p.StopAt.Sub(*p.PausedAt) != tc.stop) {
				t.Errorf("stop_at %v, want paused_at + %v", p.StopAt, tc.stop)
			}
		})
	}
}

// TestAutoResume: with auto_resume, a call that needs the agent resumes a
// paused (or starts a stopped) sandbox before it is served, and the
// history says so; without it the call is a conflict.
func TestAutoResume(t *testing.T) {
	tm := newTestManager(t)
	ctx := context.Background()
	auto := tm.create("alice", sandbox.CreateRequest{Idle: sandbox.IdlePolicy{TimeoutSeconds: 1, AutoResume: true}})
	tm.writeFile(auto.ID, "f", "x")
	tm.runReaper()
	tm.waitState(auto.ID, sandbox.Paused)
	r, err := tm.m.Running(ctx, "alice", auto.ID)
	if err != nil || r.State != sandbox.Running {
		t.Fatalf("Running on an idle-paused auto_resume sandbox: %v", err)
	}
	if got := tm.readFile(auto.ID, "f"); got != "x" {
		t.Errorf("file after auto-resume: %q", got)
	}
	if _, err := tm.m.Stop(ctx, "alice", auto.ID, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.m.Running(ctx, "alice", auto.ID); err != nil {
		t.Fatalf("Running on a stopped auto_resume sandbox: %v", err)
	}
	if got := tm.readFile(auto.ID, "f"); got != "x" {
		t.Errorf("file after auto-start: %q", got)
	}
	h := reasons(tm.record(auto.ID))
	if !strings.HasPrefix(h, "running/create paused/idle running/auto_resume stopped/stopped running/auto_resume") {
		t.Errorf("history %q", h)
	}

	plain := tm.create("alice", sandbox.CreateRequest{})
	if _, err := tm.m.Pause(ctx, "alice", plain.ID, sandbox.Retention{}); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.m.Running(ctx, "alice", plain.ID); !errors.Is(err, sandbox.ErrConflict) {
		t.Errorf("Running on a paused sandbox without auto_resume: %v, want ErrConflict", err)
	}
}

// TestIdleActivity: a request in flight and recent calls keep a sandbox
// from idling out; processes count only with idle_counts_processes.
func TestIdleActivity(t *testing.T) {
	tm := newTestManager(t)
	ctx := context.Background()
	busy := tm.create("alice", sandbox.CreateRequest{Idle: sandbox.IdlePolicy{TimeoutSeconds: 1}})
	withProc := tm.create("alice", sandbox.CreateRequest{Idle: sandbox.IdlePolicy{TimeoutSeconds: 1, CountProcesses: true}})
	idle := tm.create("alice", sandbox.CreateRequest{Idle: sandbox.IdlePolicy{TimeoutSeconds: 1}})
	if _, err := tm.m.Agent().StartProcess(ctx, withProc.ID, execReq("sleep 30")); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.m.Agent().StartProcess(ctx, idle.ID, execReq("sleep 30")); err != nil {
		t.Fatal(err)
	}
	done := tm.m.Active("alice", busy.ID) // a long exec in flight
	tm.runReaper()
	tm.waitState(idle.ID, sandbox.Paused)
	time.Sleep(1500 * time.Millisecond) // past the idle timeout of the others
	for _, id := range []string{busy.ID, withProc.ID} {
		if r := tm.record(id); r.State != sandbox.Running {
			t.Errorf("%s idled out while in use: %s %q", id, r.State, r.Reason)
		}
	}
	done()
	tm.waitState(busy.ID, sandbox.Paused)
	if got := tm.m.Active("bob", withProc.ID); got == nil {
		t.Fatal("Active returned nil")
	}
}

// TestRecoverHostReboot: a host reboot ends every process. A paused
// sandbox, a stopped one and one that asked to be stopped at lease end
// keep their files (stopped); others are terminated.
func TestRecoverHostReboot(t *testing.T) {
	tm := newTestManager(t)
	ctx := context.Background()
	paused := tm.create("alice", sandbox.CreateRequest{})
	stopped := tm.create("alice", sandbox.CreateRequest{})
	stopAtEnd := tm.create("alice", sandbox.CreateRequest{OnTimeout: sandbox.OnTimeoutStop})
	plain := tm.create("bob", sandbox.CreateRequest{})
	tm.writeFile(paused.ID, "p.txt", "paused")
	p, err := tm.m.Pause(ctx, "alice", paused.ID, sandbox.Retention{KeepForSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tm.m.Stop(ctx, "alice", stopped.ID, 0); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{paused.ID, stopAtEnd.ID, plain.ID} {
		if err := tm.backend.Host().Kill(id); err != nil {
			t.Fatal(err)
		}
	}
	tm.restart()
	for _, want := range []struct {
		id     string
		state  sandbox.State
		reason string
	}{
		{paused.ID, sandbox.Stopped, "processes lost"},
		{stopped.ID, sandbox.Stopped, "stopped"},
		{stopAtEnd.ID, sandbox.Stopped, "processes lost"},
		{plain.ID, sandbox.Terminated, "exited while the daemon was down"},
	} {
		if r := tm.record(want.id); r.State != want.state || r.Reason != want.reason {
			t.Errorf("%s: %s %q, want %s %q", want.id, r.State, r.Reason, want.state, want.reason)
		}
	}
	if r := tm.record(paused.ID); !r.ExpiresAt.Equal(p.ExpiresAt) {
		t.Errorf("the paused sandbox's retention moved: %v, want %v", r.ExpiresAt, p.ExpiresAt)
	}
	if _, err := tm.m.Start(ctx, "alice", paused.ID); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if got := tm.readFile(paused.ID, "p.txt"); got != "paused" {
		t.Errorf("file after reboot and start: %q", got)
	}
}
