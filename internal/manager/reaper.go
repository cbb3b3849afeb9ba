package manager

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// Recover reconciles the store with what the backend finds on the host
// after a (possibly unclean) stop: live, unexpired sandboxes are
// re-adopted; everything else is destroyed and recorded as ended. It runs
// before the API serves.
func (m *Manager) Recover(ctx context.Context) error {
	recs, err := m.store.All()
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	recs = m.recoverPool(ctx, recs)
	onHost, err := m.backend.List(ctx)
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	adopted := map[string]bool{} // live sandboxes and stopped ones: their traces stay
	now := time.Now()
	for _, r := range recs {
		if r.State == sandbox.Stopped && r.StoppedAt != nil {
			adopted[r.ID] = true
			m.recoverStopped(ctx, r)
			continue
		}
		if r.State == sandbox.Creating {
			m.destroy(ctx, r.ID, sandbox.Terminated, "failed: daemon stopped during create")
			continue
		}
		if !r.State.Live() {
			continue
		}
		alive, err := m.backend.Alive(ctx, r.ID)
		if err != nil || !alive {
			// Gone while the daemon was down (a host reboot): a paused
			// sandbox, or one that asked to be stopped, keeps its files.
			if m.keepsFiles(r) {
				adopted[r.ID] = true
				m.lostProcesses(ctx, r)
				continue
			}
			m.destroy(ctx, r.ID, sandbox.Terminated, "exited while the daemon was down")
			continue
		}
		m.adopt(r.ID, r.Owner)
		adopted[r.ID] = true
		switch {
		case r.State == sandbox.Running && !now.Before(r.ExpiresAt):
			m.atLeaseEnd(ctx, r)
		case r.State == sandbox.Paused && !now.Before(r.ExpiresAt):
			m.terminate(ctx, r.ID, sandbox.Terminated, "expired while paused")
		default:
			m.log.Info("re-adopted sandbox", "sandbox", r.ID, "state", r.State, "expires_at", r.ExpiresAt)
		}
	}
	for _, id := range onHost {
		if !adopted[id] {
			m.log.Warn("cleaning up orphaned sandbox", "sandbox", id)
			if err := m.backend.Destroy(ctx, id); err != nil {
				m.log.Error("cleanup", "sandbox", id, "err", err)
			}
		}
	}
	m.recoverNetwork(ctx, adopted)
	return nil
}

func (m *Manager) adopt(id, owner string) {
	m.mu.Lock()
	m.live[id] = owner
	m.mu.Unlock()
}

// destroy tears down a sandbox's host resources and records the outcome.
func (m *Manager) destroy(ctx context.Context, id string, state sandbox.State, reason string) {
	if err := m.backend.Destroy(ctx, id); err != nil {
		m.log.Error("destroy", "sandbox", id, "err", err)
		return
	}
	m.teardownNetwork(ctx, id)
	m.release(id)
	m.end(id, state, reason)
	m.log.Info("sandbox ended", "sandbox", id, "state", state, "reason", reason)
}

// Run reaps until ctx ends: expired leases are terminated, dead sandboxes
// are marked stopped and cleaned up, and old records are pruned. It works
// from the store, not from timers, so a restart loses nothing. Before it
// returns it waits for the deferred cleanups of deleted sandboxes.
func (m *Manager) Run(ctx context.Context) {
	m.pool.Start(ctx)
	tick := time.NewTicker(m.cfg.ReapInterval)
	defer tick.Stop()
	var lastLiveness time.Time
	defer m.WaitCleanups()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		checkLive := time.Since(lastLiveness) >= m.cfg.LivenessInterval
		if checkLive {
			lastLiveness = time.Now()
			m.sample(ctx)
		}
		m.reapOnce(ctx, checkLive)
		m.shrinkPool(ctx)
	}
}

// reapOnce runs one reaper pass.
func (m *Manager) reapOnce(ctx context.Context, checkLive bool) {
	recs, err := m.store.All()
	if err != nil {
		m.log.Error("reaper: read store", "err", err)
		return
	}
	// A backend that watches its sandboxes' processes says which ones
	// ended; only others are polled (every LivenessInterval).
	ew, watches := m.backend.(sandbox.ExitWatcher)
	var exited map[string]bool
	if watches {
		ids := ew.Exited()
		exited = make(map[string]bool, len(ids))
		for _, id := range ids {
			exited[id] = true
		}
	}
	now := time.Now()
	for _, r := range recs {
		if ctx.Err() != nil {
			return
		}
		if m.reapPooled(ctx, r, now, checkLive) {
			continue
		}
		switch {
		case r.State == sandbox.Stopped && r.StoppedAt != nil:
			m.reapStopped(ctx, r, now, checkLive)
		case r.State == sandbox.Running && !now.Before(r.ExpiresAt):
			m.atLeaseEnd(ctx, r)
		case r.State == sandbox.Paused && !now.Before(r.ExpiresAt):
			if err := m.terminate(ctx, r.ID, sandbox.Terminated, "expired while paused"); err != nil {
				m.log.Error("reaper: expire", "sandbox", r.ID, "err", err)
			}
		case r.State == sandbox.Paused && r.StopAt != nil && !now.Before(*r.StopAt):
			if _, err := m.stop(ctx, r.ID, "stopped after pause", r.ExpiresAt.Sub(now), nil); err != nil {
				m.log.Error("reaper: stop after pause", "sandbox", r.ID, "err", err)
			}
		case (r.State == sandbox.Running || r.State == sandbox.Paused) && (exited[r.ID] || !watches && checkLive):
			if m.reapExited(ctx, r.ID) {
				continue
			}
			m.reapIdle(ctx, r, now)
		case r.State == sandbox.Running:
			m.reapIdle(ctx, r, now)
		case !r.State.Kept() && r.EndedAt != nil && now.Sub(*r.EndedAt) > m.cfg.RetainEnded,
			r.State == sandbox.Stopped && r.StoppedAt == nil && r.EndedAt != nil && now.Sub(*r.EndedAt) > m.cfg.RetainEnded:
			m.store.Delete(r.ID)
			m.mu.Lock()
			delete(m.idLocks, r.ID)
			m.mu.Unlock()
		}
	}
}

// reapExited ends running or paused sandbox id if its processes are gone
// (stopped with its files kept, if it asked for that), and reports
// whether it did. The state is checked again under the sandbox's lock: a
// stop or delete in flight also ends the processes, and wins.
func (m *Manager) reapExited(ctx context.Context, id string) bool {
	unlock := m.lockID(id)
	r, err := m.store.Get(id)
	if err != nil || (r.State != sandbox.Running && r.State != sandbox.Paused) {
		unlock()
		return err == nil
	}
	if alive, err := m.backend.Alive(ctx, id); err != nil || alive {
		unlock()
		return false
	}
	if m.keepsFiles(r) {
		unlock()
		m.lostProcesses(ctx, r)
		return true
	}
	defer unlock()
	if err := m.terminateLocked(ctx, r, sandbox.Terminated, "exited"); err != nil {
		m.log.Error("reaper: exited", "sandbox", id, "err", err)
	}
	return true
}

// Filter selects sandboxes in List.
type Filter struct {
	// State is a state name, "all", or empty for all but terminated ones.
	State    string
	Metadata map[string]string
	Limit    int
	Cursor   string
}

// List returns owner's sandboxes matching f, oldest first, and the cursor
// of the next page ("" on the last page). A cursor names the creation
// time and id of the last sandbox returned.
func (m *Manager) List(ctx context.Context, owner string, f Filter) ([]*store.Record, string, error) {
	recs, err := m.store.All()
	if err != nil {
		return nil, "", err
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	var afterNano int64
	var afterID string
	if f.Cursor != "" {
		ns, id, ok := strings.Cut(f.Cursor, ".")
		n, err := strconv.ParseInt(ns, 10, 64)
		if !ok || err != nil {
			return nil, "", fmt.Errorf("%w: bad cursor", sandbox.ErrInvalid)
		}
		afterNano, afterID = n, id
	}
	var out []*store.Record
	for _, r := range recs {
		if f.Cursor != "" {
			n := r.CreatedAt.UnixNano()
			if n < afterNano || (n == afterNano && r.ID <= afterID) {
				continue
			}
		}
		if r.Owner != owner {
			continue
		}
		switch f.State {
		case "":
			if r.State == sandbox.Terminated {
				continue
			}
		case "all":
		default:
			if string(r.State) != f.State {
				continue
			}
		}
		match := true
		for k, v := range f.Metadata {
			if r.Metadata[k] != v {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		if len(out) == f.Limit {
			last := out[len(out)-1]
			return out, fmt.Sprintf("%d.%s", last.CreatedAt.UnixNano(), last.ID), nil
		}
		out = append(out, r)
	}
	return out, "", nil
}

// States lists the valid state filters.
func States() []string {
	return slices.Clone([]string{"creating", "running", "paused", "stopped", "terminated", "all"})
}

// CountByState counts the keys' sandboxes on record by state (the warm
// pool's idle sandboxes, which no key owns, are not counted).
func (m *Manager) CountByState(ctx context.Context) (map[string]int, error) {
	recs, err := m.store.All()
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, r := range recs {
		if r.Owner == poolOwner {
			continue
		}
		out[string(r.State)]++
	}
	return out, nil
}
