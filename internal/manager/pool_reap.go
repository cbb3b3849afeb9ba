package manager

import (
	"context"
	"sync"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// The warm pool's part of the reaper and of recovery (see pool.go).

// reapPooled is the reaper's hook for a pool record (owner ""): it renews
// the lease of idle sandboxes, recycles the dead, the old and those whose
// template changed, and destroys orphans. It reports whether r was a pool
// record.
func (m *Manager) reapPooled(ctx context.Context, r *store.Record, now time.Time, checkLive bool) bool {
	if r.Owner != poolOwner {
		return false
	}
	p := m.pool
	switch {
	case !r.State.Live():
		m.forget(r.ID)
		return true
	case r.State != sandbox.Running:
		return true // being created
	}
	idleRef, isIdle := p.Find(r.Template, r.ID)
	if !isIdle {
		// Being created or handed out, or (after a failed destroy) in no
		// pool at all: the latter is destroyed once it is clearly not
		// in flight.
		if now.Sub(r.CreatedAt) > poolOrphanAge {
			m.discardOrphan(ctx, r.ID)
		}
		return true
	}
	reason := ""
	switch {
	case now.Sub(r.CreatedAt) > poolMaxAge:
		reason = "old"
	case checkLive:
		if ref, err := m.templateRef(ctx, poolOwner, r.Template); err != nil || ref != idleRef {
			reason = "template changed"
		} else if alive, err := m.backend.Alive(ctx, r.ID); err == nil && !alive {
			reason = "exited"
		}
	}
	if reason != "" {
		if p.Remove(r.Template, r.ID) {
			m.log.Info("warm pool: recycling", "sandbox", r.ID, "template", r.Template, "reason", reason)
			m.discardPooled(ctx, r.ID)
			p.Wake()
		}
		return true
	}
	if r.ExpiresAt.Sub(now) < poolLease/2 {
		_, err := m.store.Update(r.ID, func(r *store.Record) error {
			if r.Owner == poolOwner && r.State == sandbox.Running {
				r.ExpiresAt = time.Now().UTC().Add(poolLease)
			}
			return nil
		})
		if err != nil {
			m.log.Error("warm pool: renew lease", "sandbox", r.ID, "err", err)
		}
	}
	return true
}

// shrinkPool destroys the idle pool sandboxes beyond each template's
// target (the reaper's hook: the target falls back to its minimum after a
// while without creates).
func (m *Manager) shrinkPool(ctx context.Context) {
	if n := m.discardAll(ctx, m.pool.Shrink(time.Now())); n > 0 {
		m.log.Info("warm pool: shrank without demand", "destroyed", n)
	}
}

// DrainPool destroys every idle pool sandbox, once the reaper has stopped
// (a graceful stop): a stopped daemon holds no idle sandbox. Sandboxes
// left by a crash are destroyed by the next Recover.
func (m *Manager) DrainPool(ctx context.Context) {
	if !m.pool.Enabled() {
		return
	}
	if n := m.discardAll(ctx, m.pool.Drain()); n > 0 {
		m.log.Info("warm pool: destroyed the idle sandboxes", "count", n)
	}
}

// discardAll destroys the pool sandboxes the caller took out of the pool,
// a few at a time, and returns how many there were.
func (m *Manager) discardAll(ctx context.Context, ids map[string][]string) int {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	n := 0
	for _, list := range ids {
		for _, id := range list {
			n++
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				m.discardPooled(ctx, id)
			}()
		}
	}
	wg.Wait()
	return n
}

// discardOrphan destroys a running pool sandbox that is in no idle list,
// unless it was handed out or put in the pool meanwhile (checked under
// the sandbox's lock, which a hand-out holds until the owner is stored).
func (m *Manager) discardOrphan(ctx context.Context, id string) {
	unlock := m.lockID(id)
	r, err := m.store.Get(id)
	p := m.pool
	orphan := err == nil && r.Owner == poolOwner
	if orphan {
		_, idle := p.Find(r.Template, id)
		orphan = !idle
	}
	unlock()
	if orphan {
		m.log.Warn("warm pool: destroying a pool sandbox that is in no pool", "sandbox", id)
		m.discardPooled(ctx, id)
	}
}

// recoverPool is Recover's hook: pool sandboxes are not re-adopted after a
// restart. It destroys them, drops their records, and returns the other
// records.
func (m *Manager) recoverPool(ctx context.Context, recs []*store.Record) []*store.Record {
	out := recs[:0:0]
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	n := 0
	for _, r := range recs {
		if r.Owner != poolOwner {
			out = append(out, r)
			continue
		}
		if !r.State.Live() {
			m.store.Delete(r.ID)
			continue
		}
		n++
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := m.backend.Destroy(ctx, r.ID); err != nil {
				// The record stays; the orphan sweep below and the next
				// start retry.
				m.log.Error("recover: destroy pool sandbox", "sandbox", r.ID, "err", err)
				return
			}
			m.store.Delete(r.ID)
		}()
	}
	wg.Wait()
	if n > 0 {
		m.log.Info("recover: destroyed idle warm pool sandboxes (not re-adopted)", "count", n)
	}
	return out
}
