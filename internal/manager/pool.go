package manager

// The warm pool.
//
// For every template named in Config.WarmPool the manager keeps idle
// sandboxes created ahead of time with the default resources and no env,
// so that Create can hand one out instead of building a sandbox while the
// caller waits. How many is the pool package's policy (between the
// template's Min and Max, following recent creates, paused on low host
// memory); every create of a pooled template counts as demand, and the
// reaper destroys idle sandboxes beyond the target.
//
// Pool sandboxes are ordinary records in the store with the owner "" (no
// API key has an empty id, so no key can see, list, exec in or delete
// them), created like any sandbox (the record is persisted as creating
// first). They hold a slot of Config.MaxSandboxes but no per-key slot. A
// create that finds the host full while an idle pool sandbox exists
// destroys that pool sandbox to make room, so the pool never turns a
// create away; refills then wait a while.
//
// Create takes an idle sandbox of the requested template, built from the
// same template version (backend reference) the caller's own create would
// use, when the request can be applied to it exactly (see poolable and
// appliesInPlace): the disk size and pids must be the defaults (the disk
// is sized at creation, and pids is also the guest agent's RLIMIT_NPROC),
// memory the default or, like it, at least 256 MiB (/dev/shm's size);
// vcpus and memory_mib are applied in place through the backend's
// sandbox.Updater; env is set in the guest
// agent (PUT /env), which adds it to every later command. The record then
// gets the caller as owner and the request's metadata, resources, env,
// lease, on_timeout and max_cost_micros, with created_at and the lease
// starting at hand-out. Anything else (a network policy, secrets, any
// request field added later) and anything that fails to apply means a
// normal (cold) create; a pool sandbox that failed half-way is destroyed.
//
// A refill starts pool.RefillDelay after a hand-out (at once when the pool
// is empty), so that it does not compete for the CPU with the caller's
// first commands; at most two creates are in flight for all
// templates together, with an exponential backoff per template after
// failures. Idle pool sandboxes carry a lease of poolLease that the reaper
// renews; the reaper recycles those that died or are older than
// poolMaxAge or whose template changed. A graceful stop destroys the idle
// sandboxes (DrainPool). Recover does not re-adopt pool sandboxes after a
// crash: it destroys them and drops their records (a daemon upgrade may
// bring a new agent or template), and the pool refills.

import (
	"context"
	"fmt"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

const (
	// poolOwner is the owner of idle pool sandboxes.
	poolOwner = ""
	// poolLease is an idle pool sandbox's lease, renewed by the reaper
	// once half of it is left.
	poolLease = 10 * time.Minute
	// poolMaxAge is how long an idle sandbox may wait before it is
	// replaced by a fresh one.
	poolMaxAge = time.Hour
	// poolOrphanAge is how old a running pool sandbox that is in no idle
	// list must be before the reaper destroys it (creates and hand-outs
	// take far less).
	poolOrphanAge = 5 * time.Minute
)

// poolCreator creates the pool's idle sandboxes (pool.Creator).
type poolCreator struct{ m *Manager }

func (c poolCreator) CreateIdle(ctx context.Context, template string) (id, ref string, err error) {
	id, ref, err = c.m.createPooled(ctx, template)
	if err == nil {
		c.m.event("pool_create")
	}
	return id, ref, err
}

// PoolStatus reports, per configured template, the idle pool sandboxes
// and those being created.
func (m *Manager) PoolStatus(ctx context.Context) map[string][2]int { return m.pool.Status() }

// createPooled creates an idle sandbox of template with the default
// resources, persisted first so that a crash mid-create is cleaned up. It
// returns its id and the backend reference of the template version used
// (the shared template of that name: pool sandboxes have no owner).
func (m *Manager) createPooled(ctx context.Context, template string) (id, ref string, err error) {
	if err := ctx.Err(); err != nil {
		return "", "", err
	}
	// The record of a default create, so that defaults applied by
	// validate are those of a cold create.
	rec, err := m.validate(sandbox.CreateRequest{Template: template, TimeoutSeconds: int64(poolLease / time.Second)})
	if err != nil {
		return "", "", err
	}
	if ref, err = m.templateRef(ctx, poolOwner, rec.Template); err != nil {
		return "", "", err
	}
	rec.ID, rec.Owner, rec.State = newID(), poolOwner, sandbox.Creating
	m.mu.Lock()
	if len(m.live) >= m.cfg.MaxSandboxes {
		m.mu.Unlock()
		return "", "", fmt.Errorf("%w: host full", sandbox.ErrNoCapacity)
	}
	m.live[rec.ID] = poolOwner
	m.mu.Unlock()
	if err := m.store.Put(rec); err != nil {
		m.release(rec.ID)
		return "", "", fmt.Errorf("persist: %w", err)
	}
	netCfg, err := m.setupNetwork(ctx, rec) // offline, so a hand-out can switch it on
	if err != nil {
		m.teardownNetwork(context.WithoutCancel(ctx), rec.ID)
		m.release(rec.ID)
		m.forget(rec.ID)
		return "", "", err
	}
	info, err := m.backend.Create(ctx, sandbox.Spec{ID: rec.ID, Template: ref, Resources: rec.Resources, Network: netCfg, Pooled: true})
	if err != nil {
		m.teardownNetwork(context.WithoutCancel(ctx), rec.ID)
		m.release(rec.ID)
		m.forget(rec.ID)
		return "", "", err
	}
	now := time.Now().UTC()
	_, err = m.store.Update(rec.ID, func(r *store.Record) error {
		r.State, r.Runtime = sandbox.Running, info.Runtime
		r.ExpiresAt = now.Add(poolLease)
		r.Usage.SampledAt = now
		return nil
	})
	if err != nil {
		m.discardPooled(context.WithoutCancel(ctx), rec.ID)
		return "", "", fmt.Errorf("persist: %w", err)
	}
	return rec.ID, ref, nil
}

// forget drops the record of a pool sandbox that holds nothing any more.
func (m *Manager) forget(id string) {
	m.store.Delete(id)
	m.mu.Lock()
	delete(m.idLocks, id)
	m.mu.Unlock()
}

// discardPooled destroys a pool sandbox the caller took out of the pool
// (or never put in) and drops its record.
func (m *Manager) discardPooled(ctx context.Context, id string) {
	unlock := m.lockID(id)
	err := m.backend.Destroy(ctx, id)
	unlock()
	if err != nil {
		// Keep the record: the reaper or the next Recover retries.
		m.log.Error("warm pool: destroy", "sandbox", id, "err", err)
		return
	}
	m.teardownNetwork(ctx, id)
	m.release(id)
	m.forget(id)
	m.event("pool_discard")
}
