package manager

import (
	"context"
	"fmt"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// Stop and start. A stopped sandbox has no process, no network namespace
// and no live slot: only its disk (the writable layer) and its record are
// kept, until its retention (ExpiresAt) ends and the reaper deletes it.
// The record is persisted as stopped before the backend acts, so a crash
// mid-stop leaves a stopped record whose leftovers Recover tidies with the
// backend's idempotent Stop. Start persists its intent (reason
// "starting") and moves to running only once the backend booted the
// sandbox; a crash mid-start leaves it stopped with its files.

// Stop ends every process of owner's running or paused sandbox and keeps
// its files for keepSeconds (0: StopRetention; at most MaxStopRetention).
func (m *Manager) Stop(ctx context.Context, owner, id string, keepSeconds int64) (*store.Record, error) {
	if _, err := m.Get(ctx, owner, id); err != nil {
		return nil, err
	}
	keep, err := keepFor("keep_for_seconds", keepSeconds, m.cfg.StopRetention, m.cfg.MaxStopRetention)
	if err != nil {
		return nil, err
	}
	return m.stop(ctx, id, "stopped", keep, nil)
}

// stop moves sandbox id to stopped for keep; a non-nil unless is checked
// under the sandbox's lock and skips the stop (ErrConflict) when it holds.
func (m *Manager) stop(ctx context.Context, id, reason string, keep time.Duration, unless func() bool) (*store.Record, error) {
	st, ok := m.backend.(sandbox.Stopper)
	if !ok {
		return nil, fmt.Errorf("%w: this backend cannot stop sandboxes", sandbox.ErrNotSupported)
	}
	unlock := m.lockID(id)
	defer unlock()
	r, err := m.store.Get(id)
	if err != nil {
		return nil, err
	}
	if r.State != sandbox.Running && r.State != sandbox.Paused {
		return nil, fmt.Errorf("%w: sandbox %s is %s, not running or paused", sandbox.ErrConflict, id, r.State)
	}
	if unless != nil && unless() {
		return nil, fmt.Errorf("%w: sandbox %s is in use", sandbox.ErrConflict, id)
	}
	if r.State == sandbox.Running {
		m.finalSample(ctx, id) // bill its running time up to now
	}
	now := time.Now().UTC()
	rec, err := m.store.Update(id, func(r *store.Record) error {
		r.State, r.StoppedAt, r.Reason = sandbox.Stopped, &now, reason
		r.PausedAt, r.StopAt = nil, nil
		r.ExpiresAt = now.Add(keep)
		r.Usage.SampledAt = now
		r.AddEvent(now, sandbox.Stopped, reason)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("persist: %w", err)
	}
	m.release(id)
	if err := st.Stop(ctx, id); err != nil {
		// The record says stopped: the reaper and Recover finish the job.
		return nil, fmt.Errorf("stop: %w", err)
	}
	m.teardownNetwork(ctx, id)
	m.event("stop")
	m.log.Info("sandbox stopped", "sandbox", id, "reason", reason, "keep_until", rec.ExpiresAt)
	return rec, nil
}

// Start boots owner's stopped sandbox again from its files (or resumes a
// paused one): fresh processes, the same id, network policy and
// resources, and a new lease of the length it was created with.
func (m *Manager) Start(ctx context.Context, owner, id string) (*store.Record, error) {
	r, err := m.Get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	if r.State == sandbox.Paused {
		return m.resume(ctx, id, "resume")
	}
	return m.start(ctx, id, "start")
}

func (m *Manager) start(ctx context.Context, id, reason string) (rec *store.Record, retErr error) {
	st, ok := m.backend.(sandbox.Stopper)
	if !ok {
		return nil, fmt.Errorf("%w: this backend cannot stop sandboxes", sandbox.ErrNotSupported)
	}
	unlock := m.lockID(id)
	defer unlock()
	r, err := m.store.Get(id)
	if err != nil {
		return nil, err
	}
	if r.State != sandbox.Stopped || r.StoppedAt == nil {
		return nil, fmt.Errorf("%w: sandbox %s is %s, not stopped", sandbox.ErrConflict, id, r.State)
	}
	tref, err := m.templateRef(ctx, r.Owner, r.Template)
	if err != nil {
		return nil, err
	}
	if err := m.admit(id, r.Owner); err != nil {
		return nil, err
	}
	prevReason := r.Reason
	if _, err := m.store.Update(id, func(r *store.Record) error { r.Reason = "starting"; return nil }); err != nil {
		m.release(id)
		return nil, fmt.Errorf("persist: %w", err)
	}
	defer func() {
		if retErr != nil {
			dctx := context.WithoutCancel(ctx)
			m.teardownNetwork(dctx, id)
			m.release(id)
			m.store.Update(id, func(r *store.Record) error { r.Reason = prevReason; return nil })
		}
	}()
	start := time.Now()
	netCfg, err := m.setupNetwork(ctx, r)
	if err != nil {
		return nil, err
	}
	info, err := st.Start(ctx, sandbox.Spec{ID: id, Template: tref, Resources: r.Resources, Env: r.Env, Network: netCfg})
	if err != nil {
		return nil, fmt.Errorf("start sandbox: %w", err)
	}
	now := time.Now().UTC()
	m.touch(id, now)
	rec, err = m.store.Update(id, func(r *store.Record) error {
		m.accrueStored(r, now)
		r.State, r.StoppedAt, r.Reason, r.Runtime = sandbox.Running, nil, "", info.Runtime
		r.ExpiresAt = now.Add(m.lease(r))
		r.AddEvent(now, sandbox.Running, reason)
		return nil
	})
	if err != nil {
		m.destroyAfterFailedStart(ctx, id)
		return nil, fmt.Errorf("persist: %w", err)
	}
	m.event("start")
	m.log.Info("sandbox started", "sandbox", id, "reason", reason, "ms", time.Since(start).Milliseconds())
	return rec, nil
}

// destroyAfterFailedStart stops a sandbox the backend booted but whose
// record could not say so, keeping its files.
func (m *Manager) destroyAfterFailedStart(ctx context.Context, id string) {
	if st, ok := m.backend.(sandbox.Stopper); ok {
		if err := st.Stop(context.WithoutCancel(ctx), id); err != nil {
			m.log.Error("stop after failed start", "sandbox", id, "err", err)
		}
	}
}

// accrueStored bills the storage of a stopped sandbox up to now.
func (m *Manager) accrueStored(r *store.Record, now time.Time) {
	accrue(&r.Usage, r, sandbox.Stats{}, now, m.cfg.Prices)
}

// reapStopped handles one stopped sandbox in a reaper pass: past its
// retention it is deleted with its files; one whose backend stop failed
// (processes still alive) is stopped again.
func (m *Manager) reapStopped(ctx context.Context, r *store.Record, now time.Time, checkLive bool) {
	if !now.Before(r.ExpiresAt) {
		if err := m.terminate(ctx, r.ID, sandbox.Terminated, "expired while stopped"); err != nil {
			m.log.Error("reaper: expire stopped", "sandbox", r.ID, "err", err)
		}
		return
	}
	if checkLive && r.Reason != "starting" {
		if alive, err := m.backend.Alive(ctx, r.ID); err == nil && alive {
			m.tidyStopped(ctx, r.ID)
		}
	}
}

// tidyStopped makes sure a stopped sandbox holds nothing but its files.
func (m *Manager) tidyStopped(ctx context.Context, id string) {
	unlock := m.lockID(id)
	defer unlock()
	if r, err := m.store.Get(id); err != nil || r.State != sandbox.Stopped {
		return
	}
	if st, ok := m.backend.(sandbox.Stopper); ok {
		if err := st.Stop(ctx, id); err != nil {
			m.log.Error("stop", "sandbox", id, "err", err)
			return
		}
	}
	m.teardownNetwork(ctx, id)
}

// recoverStopped tidies a stopped sandbox at daemon start: after a crash
// mid-stop or mid-start, or a host reboot, whatever it still holds beyond
// its files is released; it stays stopped.
func (m *Manager) recoverStopped(ctx context.Context, r *store.Record) {
	m.tidyStopped(ctx, r.ID)
	if r.Reason == "starting" {
		m.store.Update(r.ID, func(r *store.Record) error { r.Reason = "start interrupted"; return nil })
	}
	m.log.Info("stopped sandbox kept", "sandbox", r.ID, "keep_until", r.ExpiresAt)
}

// reasonLost is the reason of a sandbox stopped because its processes
// were gone.
const reasonLost = "processes lost"

// keepsFiles reports whether a sandbox that lost its processes behind the
// daemon's back (a host reboot) becomes stopped rather than terminated: a
// paused one, or one that asked to be stopped at lease end or idle.
func (m *Manager) keepsFiles(r *store.Record) bool {
	if _, ok := m.backend.(sandbox.Stopper); !ok {
		return false
	}
	return r.State == sandbox.Paused || r.OnTimeout == sandbox.OnTimeoutStop || r.Idle.OnIdle == sandbox.OnTimeoutStop && r.Idle.TimeoutSeconds > 0
}

// lostProcesses records that sandbox r lost its processes behind the
// daemon's back (while it was down, or killed on the host) and keeps its
// files: it becomes stopped, kept until its pause retention ends (a
// running one gets StopRetention).
func (m *Manager) lostProcesses(ctx context.Context, r *store.Record) {
	unlock := m.lockID(r.ID)
	defer unlock()
	if cur, err := m.store.Get(r.ID); err != nil || !cur.State.Live() {
		return
	}
	m.release(r.ID)
	st := m.backend.(sandbox.Stopper)
	if err := st.Stop(ctx, r.ID); err != nil {
		m.log.Error("recover: stop", "sandbox", r.ID, "err", err)
	}
	m.teardownNetwork(ctx, r.ID)
	now := time.Now().UTC()
	m.store.Update(r.ID, func(r *store.Record) error {
		if r.State == sandbox.Running {
			r.ExpiresAt = now.Add(min(m.cfg.StopRetention, m.cfg.MaxStopRetention))
		}
		r.State, r.StoppedAt, r.PausedAt, r.StopAt = sandbox.Stopped, &now, nil, nil
		r.Reason = reasonLost
		r.Usage.SampledAt = now
		r.AddEvent(now, sandbox.Stopped, r.Reason)
		return nil
	})
	m.log.Warn("sandbox lost its processes; stopped with its files kept", "sandbox", r.ID)
}
