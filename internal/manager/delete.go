package manager

import (
	"context"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// Deleting answers as soon as the sandbox can no longer run anything.
// With a backend that can kill a sandbox on its own (sandbox.Killer), a
// delete of a running sandbox kills every process of it, records it as
// terminated, and answers; its host resources (runtime state, mounts,
// disk, network) are released after, by at most Config.CleanupWorkers at
// a time. It is crash-safe without a marker of its own: an ended record
// whose sandbox still has traces on the host is an orphan to Recover,
// which destroys it before the API serves. Run waits for the cleanups in
// flight before it returns, so a clean stop leaves none behind.

// DefaultCleanupWorkers bounds the deferred cleanups running at once
// when Config.CleanupWorkers is 0. A cleanup mostly waits on the kernel
// (unmounts, loop detach, cgroup removal, unlinking the disk image), but
// on two cores 16 at once answered and cleaned 300 deletes later than 4
// did (docs/benchmarks.md, 2026-12-03 and 2026-12-04), so 4 stays.
const DefaultCleanupWorkers = 4

// maxCleanupWorkers bounds Config.CleanupWorkers.
const maxCleanupWorkers = 256

func cleanupWorkers(cfg Config) int {
	if cfg.CleanupWorkers <= 0 {
		return DefaultCleanupWorkers
	}
	return min(cfg.CleanupWorkers, maxCleanupWorkers)
}

// cleanupRetries bounds the attempts of one deferred cleanup; what still
// fails is logged and left to the next start's recovery.
const cleanupRetries = 5

// deleteRunning kills running sandbox r (whose id lock the caller holds),
// records its end and schedules its cleanup. It reports false, having done
// nothing, when the backend cannot kill it on its own; the caller then
// terminates it the synchronous way.
func (m *Manager) deleteRunning(ctx context.Context, r *store.Record, reason string) bool {
	k, ok := m.backend.(sandbox.Killer)
	if !ok || r.State != sandbox.Running {
		return false
	}
	st := m.stats(ctx, r.ID) // while its cgroup still counts
	sampled := time.Now().UTC()
	if err := k.Kill(ctx, r.ID); err != nil {
		m.log.Warn("kill; destroying at once", "sandbox", r.ID, "err", err)
		return false
	}
	m.release(r.ID)
	// The last sample and the end in one transaction (one write of the
	// database instead of two).
	now := time.Now().UTC()
	if _, err := m.store.Update(r.ID, func(r *store.Record) error {
		accrue(&r.Usage, r, st, sampled, m.cfg.Prices)
		endRecord(r, sandbox.Terminated, reason, now)
		return nil
	}); err != nil {
		m.log.Error("persist end", "sandbox", r.ID, "err", err)
	}
	m.event(endEvent(reason))
	m.log.Info("sandbox ended", "sandbox", r.ID, "state", sandbox.Terminated, "reason", reason)
	m.cleanupLater(r.ID)
	return true
}

// cleanupLater destroys killed sandbox id and tears down its network in
// the background.
func (m *Manager) cleanupLater(id string) {
	done := make(chan struct{})
	m.mu.Lock()
	m.cleaning[id] = done
	m.mu.Unlock()
	m.cleanups.Add(1)
	go func() {
		defer m.cleanups.Done()
		defer func() {
			m.mu.Lock()
			if m.cleaning[id] == done {
				delete(m.cleaning, id)
			}
			m.mu.Unlock()
			close(done)
		}()
		m.cleanupSem <- struct{}{}
		defer func() { <-m.cleanupSem }()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		delay := 100 * time.Millisecond
		for try := 1; ; try++ {
			err := m.backend.Destroy(ctx, id)
			if err == nil {
				break
			}
			if try == cleanupRetries || ctx.Err() != nil {
				m.log.Error("cleanup failed; recovery finishes it on the next start", "sandbox", id, "err", err)
				return
			}
			time.Sleep(delay)
			delay *= 2
		}
		m.teardownNetwork(ctx, id)
	}()
}

// WaitCleanups waits until the deferred cleanups in flight are done.
func (m *Manager) WaitCleanups() { m.cleanups.Wait() }

// AwaitCleanups waits until the deferred cleanups in flight when it is
// called are done, or ctx ends. It reports whether there were any and all
// of them ended (successfully or not): a caller refused because a deleted
// sandbox still held something (a template delete) may then try again.
func (m *Manager) AwaitCleanups(ctx context.Context) bool {
	m.mu.Lock()
	waits := make([]chan struct{}, 0, len(m.cleaning))
	for _, c := range m.cleaning {
		waits = append(waits, c)
	}
	m.mu.Unlock()
	for _, c := range waits {
		select {
		case <-c:
		case <-ctx.Done():
			return false
		}
	}
	return len(waits) > 0
}
