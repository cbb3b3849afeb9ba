package manager

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// MaxRetention is the longest an operator may let a sandbox stay paused or
// stopped (--max-pause-retention, --max-stop-retention).
const MaxRetention = 365 * 24 * time.Hour

// keepFor turns a requested retention in seconds into a duration: 0 takes
// def, anything else must be 1..max seconds.
func keepFor(name string, seconds int64, def, max time.Duration) (time.Duration, error) {
	if seconds == 0 {
		return min(def, max), nil
	}
	if seconds < 0 || seconds > int64(max/time.Second) {
		return 0, fmt.Errorf("%w: %s must be between 1 and %d seconds (the daemon's maximum)",
			sandbox.ErrInvalid, name, int64(max/time.Second))
	}
	return time.Duration(seconds) * time.Second, nil
}

// pausePlan is a validated pause retention: how long the paused sandbox is
// kept, and when (if ever) it is stopped on the way. A non-nil unless is
// checked under the sandbox's lock: the pause is skipped (ErrConflict)
// when it holds (the idle reaper's "a request has come in since").
type pausePlan struct {
	keep, thenStop time.Duration
	unless         func() bool
}

// planPause validates a pause's retention against the daemon's bounds.
func (m *Manager) planPause(ret sandbox.Retention) (pausePlan, error) {
	if ret.ThenStopAfterSeconds == 0 {
		keep, err := keepFor("keep_for_seconds", ret.KeepForSeconds, m.cfg.PauseRetention, m.cfg.MaxPauseRetention)
		return pausePlan{keep: keep}, err
	}
	if _, ok := m.backend.(sandbox.Stopper); !ok {
		return pausePlan{}, fmt.Errorf("%w: this backend cannot stop sandboxes (then_stop_after_seconds)", sandbox.ErrNotSupported)
	}
	then, err := keepFor("then_stop_after_seconds", ret.ThenStopAfterSeconds, 0, m.cfg.MaxPauseRetention)
	if err != nil {
		return pausePlan{}, err
	}
	keep, err := keepFor("keep_for_seconds", ret.KeepForSeconds, then+m.cfg.StopRetention, then+m.cfg.MaxStopRetention)
	if err != nil {
		return pausePlan{}, err
	}
	if keep <= then {
		return pausePlan{}, fmt.Errorf("%w: keep_for_seconds must be longer than then_stop_after_seconds", sandbox.ErrInvalid)
	}
	return pausePlan{keep: keep, thenStop: then}, nil
}

// Pause freezes owner's running sandbox. Its lease is replaced by the
// retention asked for (keep_for, bounded by MaxPauseRetention; default
// PauseRetention): a paused sandbox is terminated once that has passed
// unless resumed first, or stopped with its files kept after
// then_stop_after.
func (m *Manager) Pause(ctx context.Context, owner, id string, ret sandbox.Retention) (*store.Record, error) {
	if _, err := m.Get(ctx, owner, id); err != nil {
		return nil, err
	}
	plan, err := m.planPause(ret)
	if err != nil {
		return nil, err
	}
	return m.pause(ctx, id, "paused", plan)
}

func (m *Manager) pause(ctx context.Context, id, reason string, plan pausePlan) (*store.Record, error) {
	p, ok := m.backend.(sandbox.Pauser)
	if !ok {
		return nil, fmt.Errorf("%w: this backend cannot pause sandboxes", sandbox.ErrNotSupported)
	}
	unlock := m.lockID(id)
	defer unlock()
	r, err := m.store.Get(id)
	if err != nil {
		return nil, err
	}
	if r.State != sandbox.Running {
		return nil, fmt.Errorf("%w: sandbox %s is %s, not running", sandbox.ErrConflict, id, r.State)
	}
	if plan.unless != nil && plan.unless() {
		return nil, fmt.Errorf("%w: sandbox %s is in use", sandbox.ErrConflict, id)
	}
	m.finalSample(ctx, id) // bill its running time up to now
	if err := p.Pause(ctx, id); err != nil {
		return nil, fmt.Errorf("pause: %w", err)
	}
	now := time.Now().UTC()
	m.event("pause")
	return m.store.Update(id, func(r *store.Record) error {
		r.State, r.PausedAt, r.Reason = sandbox.Paused, &now, reason
		r.ExpiresAt = now.Add(plan.keep)
		r.StopAt = nil
		if plan.thenStop > 0 {
			t := now.Add(plan.thenStop)
			r.StopAt = &t
		}
		r.Usage.SampledAt = now
		r.AddEvent(now, sandbox.Paused, reason)
		return nil
	})
}

// Resume thaws owner's paused sandbox (or starts a stopped one, see
// Start) and grants it a new lease of the length it was created with.
func (m *Manager) Resume(ctx context.Context, owner, id string) (*store.Record, error) {
	r, err := m.Get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	if r.State == sandbox.Stopped && r.StoppedAt != nil {
		return m.start(ctx, id, "start")
	}
	return m.resume(ctx, id, "resume")
}

func (m *Manager) resume(ctx context.Context, id, reason string) (*store.Record, error) {
	p, ok := m.backend.(sandbox.Pauser)
	if !ok {
		return nil, fmt.Errorf("%w: this backend cannot pause sandboxes", sandbox.ErrNotSupported)
	}
	unlock := m.lockID(id)
	defer unlock()
	r, err := m.store.Get(id)
	if err != nil {
		return nil, err
	}
	if r.State != sandbox.Paused {
		return nil, fmt.Errorf("%w: sandbox %s is %s, not paused", sandbox.ErrConflict, id, r.State)
	}
	if err := p.Resume(ctx, id); err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	now := time.Now().UTC()
	m.event("resume")
	m.touch(id, now)
	return m.store.Update(id, func(r *store.Record) error {
		r.State, r.PausedAt, r.StopAt, r.Reason = sandbox.Running, nil, nil, ""
		r.ExpiresAt = now.Add(m.lease(r))
		r.Usage.SampledAt = now
		r.AddEvent(now, sandbox.Running, reason)
		return nil
	})
}

// lease is the lease a resumed or started sandbox gets.
func (m *Manager) lease(r *store.Record) time.Duration {
	if l := time.Duration(r.TimeoutSeconds) * time.Second; l > 0 {
		return l
	}
	return m.cfg.DefaultTimeout
}

// atLeaseEnd does what r's creator asked for when its lease ran out:
// pause, stop (files kept) or kill. A pause or stop that fails kills.
func (m *Manager) atLeaseEnd(ctx context.Context, r *store.Record) {
	var err error
	switch r.OnTimeout {
	case sandbox.OnTimeoutPause:
		_, err = m.pause(ctx, r.ID, "expired", pausePlan{keep: m.cfg.PauseRetention})
	case sandbox.OnTimeoutStop:
		_, err = m.stop(ctx, r.ID, "expired", min(m.cfg.StopRetention, m.cfg.MaxStopRetention), nil)
	default:
		err = errors.New("kill")
	}
	if err == nil {
		return
	}
	if r.OnTimeout != sandbox.OnTimeoutKill && r.OnTimeout != "" {
		m.log.Error("lease end: "+r.OnTimeout+" failed, killing instead", "sandbox", r.ID, "err", err)
	}
	if err := m.terminate(ctx, r.ID, sandbox.Terminated, "expired"); err != nil {
		m.log.Error("reaper: expire", "sandbox", r.ID, "err", err)
	}
}
