package manager

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// Idle sandboxes and transparent resume. Activity is tracked in memory per
// live sandbox: the time of the last API call or port request on it and
// the number of such requests in flight (a long exec is activity for as
// long as it runs). The server reports it through one hook, Active,
// wrapped around every authenticated route with a sandbox id and the port
// proxy; Running and RunningAny, which every agent-bound call goes
// through, count too and wake an auto_resume sandbox. After a restart the
// clock starts again at recovery (activity is not persisted: at worst a
// sandbox idles out one idle timeout later).

// activity is one live sandbox's recent use.
type activity struct {
	last     time.Time
	inflight int
}

// Active records the start of a request on owner's sandbox id and returns
// the function that records its end. Calls on sandboxes that are not live
// or not owner's are not recorded (the map stays bounded by live
// sandboxes).
func (m *Manager) Active(owner, id string) (done func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o, ok := m.live[id]; !ok || (owner != "" && o != owner) {
		return func() {}
	}
	a := m.actLocked(id, time.Now())
	a.inflight++
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if a := m.act[id]; a != nil {
			a.inflight = max(0, a.inflight-1)
			a.last = time.Now()
		}
	}
}

// actLocked returns id's activity, creating it as of now; m.mu is held.
func (m *Manager) actLocked(id string, now time.Time) *activity {
	a := m.act[id]
	if a == nil {
		a = &activity{last: now}
		m.act[id] = a
	}
	return a
}

// touch records activity on a live sandbox at now.
func (m *Manager) touch(id string, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.live[id]; ok {
		a := m.actLocked(id, now)
		a.last = now
	}
}

// idleSince returns when sandbox id was last used and whether a request
// on it is in flight; a sandbox never seen counts as used now.
func (m *Manager) idleSince(id string, now time.Time) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.actLocked(id, now)
	return a.last, a.inflight > 0
}

// wake returns r running for a call that needs its agent: a paused or
// stopped sandbox created with auto_resume is resumed or started first
// (reason "auto_resume" in its history); any other state but running is a
// conflict. It counts as activity.
func (m *Manager) wake(ctx context.Context, r *store.Record) (*store.Record, error) {
	if r.State == sandbox.Running && r.Idle.TimeoutSeconds > 0 {
		// The idle reaper may be pausing it right now: look again once it
		// is done, so that the call never reaches a sandbox frozen under it.
		unlock := m.lockID(r.ID)
		cur, err := m.store.Get(r.ID)
		unlock()
		if err != nil {
			return nil, err
		}
		r = cur
	}
	if r.State == sandbox.Running {
		m.touch(r.ID, time.Now())
		return r, nil
	}
	stopped := r.State == sandbox.Stopped && r.StoppedAt != nil
	if !r.Idle.AutoResume || (r.State != sandbox.Paused && !stopped) {
		return nil, fmt.Errorf("%w: sandbox %s is %s", sandbox.ErrConflict, r.ID, r.State)
	}
	var err error
	if stopped {
		_, err = m.start(ctx, r.ID, "auto_resume")
	} else {
		_, err = m.resume(ctx, r.ID, "auto_resume")
	}
	if err != nil && !errors.Is(err, sandbox.ErrConflict) {
		return nil, fmt.Errorf("auto-resume: %w", err)
	}
	// A conflict means another call woke it first: look again.
	cur, gerr := m.store.Get(r.ID)
	if gerr != nil {
		return nil, gerr
	}
	if cur.State != sandbox.Running {
		if err != nil {
			return nil, fmt.Errorf("auto-resume: %w", err)
		}
		return nil, fmt.Errorf("%w: sandbox %s is %s", sandbox.ErrConflict, r.ID, cur.State)
	}
	return cur, nil
}

// reapIdle pauses or stops running sandbox r if it has been idle for its
// idle timeout; it reports whether it acted.
func (m *Manager) reapIdle(ctx context.Context, r *store.Record, now time.Time) bool {
	if r.Idle.TimeoutSeconds <= 0 || r.State != sandbox.Running {
		return false
	}
	last, busy := m.idleSince(r.ID, now)
	if busy || now.Sub(last) < time.Duration(r.Idle.TimeoutSeconds)*time.Second {
		return false
	}
	if r.Idle.CountProcesses && m.hasProcesses(ctx, r.ID) {
		m.touch(r.ID, now)
		return false
	}
	// A request that came in since is checked again under the lock.
	inUse := func() bool {
		l, busy := m.idleSince(r.ID, time.Now())
		return busy || l.After(last)
	}
	var err error
	if r.Idle.OnIdle == sandbox.OnTimeoutStop {
		_, err = m.stop(ctx, r.ID, "idle", min(m.cfg.StopRetention, m.cfg.MaxStopRetention), inUse)
	} else {
		_, err = m.pause(ctx, r.ID, "idle", pausePlan{keep: min(m.cfg.PauseRetention, m.cfg.MaxPauseRetention), unless: inUse})
	}
	if errors.Is(err, sandbox.ErrConflict) {
		return false // in use after all, or changed state meanwhile
	}
	if err != nil {
		m.log.Error("reaper: idle", "sandbox", r.ID, "on_idle", r.Idle.OnIdle, "err", err)
		m.touch(r.ID, now) // try again one idle timeout later
		return false
	}
	m.event("idle")
	return true
}

// hasProcesses reports whether a process started through the API still
// runs in sandbox id (an unreachable agent counts as busy).
func (m *Manager) hasProcesses(ctx context.Context, id string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ps, err := m.agent.ListProcesses(ctx, id)
	if err != nil {
		return true
	}
	for _, p := range ps.Processes {
		if p.State == "running" {
			return true
		}
	}
	return false
}

// validateIdle checks an idle policy.
func validateIdle(p sandbox.IdlePolicy, maxLease time.Duration) (store.IdlePolicy, error) {
	if p.TimeoutSeconds < 0 || time.Duration(p.TimeoutSeconds)*time.Second > maxLease {
		return store.IdlePolicy{}, fmt.Errorf("%w: idle_timeout_seconds must be between 0 and %d",
			sandbox.ErrInvalid, int64(maxLease/time.Second))
	}
	switch p.OnIdle {
	case "":
		p.OnIdle = sandbox.OnTimeoutPause
	case sandbox.OnTimeoutPause, sandbox.OnTimeoutStop:
	default:
		return store.IdlePolicy{}, fmt.Errorf("%w: on_idle must be %q or %q", sandbox.ErrInvalid, sandbox.OnTimeoutPause, sandbox.OnTimeoutStop)
	}
	return store.IdlePolicy{TimeoutSeconds: p.TimeoutSeconds, OnIdle: p.OnIdle, AutoResume: p.AutoResume,
		CountProcesses: p.CountProcesses}, nil
}
