package manager

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// The warm pool's hand-out to a create (see pool.go).

// fromPool is Create's hook: it hands an idle pool sandbox to owner when
// req (validated into want, its template resolved for owner to the
// backend reference ref) can be applied to one. ok reports whether the
// request was answered (with a sandbox or an error); when it is false the
// caller creates a sandbox itself.
func (m *Manager) fromPool(ctx context.Context, owner string, req sandbox.CreateRequest, want *store.Record, ref string) (rec *store.Record, ok bool, err error) {
	p := m.pool
	if !p.Enabled() {
		return nil, false, nil
	}
	if p.Size(want.Template) == 0 {
		m.yieldForCreate(ctx, owner)
		return nil, false, nil
	}
	p.Demand(want.Template, time.Now())
	if !poolable(req) || !m.appliesInPlace(want.Resources) {
		m.event("pool_miss")
		m.yieldForCreate(ctx, owner)
		return nil, false, nil
	}
	id := p.Take(want.Template, ref)
	if id == "" {
		m.event("pool_miss")
		m.yieldForCreate(ctx, owner)
		return nil, false, nil
	}
	// The sandbox's host slot passes to owner; it needs a per-key slot.
	m.mu.Lock()
	if m.cfg.MaxPerKey > 0 {
		if n := m.ownedLocked(owner); n >= m.cfg.MaxPerKey {
			m.mu.Unlock()
			p.Return(want.Template, id, ref)
			return nil, true, fmt.Errorf("%w: this key has %d sandboxes running (--max-sandboxes-per-key)", sandbox.ErrLimit, n)
		}
	}
	m.live[id] = owner
	m.mu.Unlock()
	start := time.Now()
	rec, err = m.handOut(ctx, id, owner, want)
	if err != nil {
		m.log.Warn("warm pool: hand-out failed; creating a new sandbox", "sandbox", id, "err", err)
		m.mu.Lock()
		m.live[id] = poolOwner
		m.mu.Unlock()
		m.discardPooled(context.WithoutCancel(ctx), id)
		m.event("pool_miss")
		return nil, false, nil
	}
	m.event("pool_hit")
	m.event("create")
	m.startSpareIdle(ctx, rec.ID)
	m.log.Info("sandbox created", "sandbox", rec.ID, "owner", owner, "template", rec.Template,
		"runtime", rec.Runtime, "warm_pool", true, "ms", time.Since(start).Milliseconds())
	return rec, true, nil
}

// appliesInPlace reports whether a pool sandbox made with the default
// resources gets exactly r by an in-place update. The disk is sized at
// creation; the pids limit is also the RLIMIT_NPROC the guest agent was
// started with; /dev/shm is sized at creation as a quarter of the memory,
// capped at 64 MiB (container.shmSize), so memory can change in place only
// where both sizes are at that cap. Everything else differing from the
// defaults needs a backend that updates running sandboxes.
func (m *Manager) appliesInPlace(r sandbox.Resources) bool {
	def := m.cfg.Defaults
	if r == def {
		return true
	}
	const shmCapMiB = 256 // memory from which /dev/shm is 64 MiB
	_, canUpdate := m.backend.(sandbox.Updater)
	return canUpdate && r.DiskMiB == def.DiskMiB && r.PIDs == def.PIDs &&
		(r.MemoryMiB == def.MemoryMiB || (r.MemoryMiB >= shmCapMiB && def.MemoryMiB >= shmCapMiB))
}

// poolable reports whether req asks only for what can be applied to a
// warm sandbox: template, lease, env, metadata, resources (the disk size is
// checked by the caller), on_timeout and max_cost_micros. Any other field
// set (network policy, secrets, and fields added later) means a cold
// create.
func poolable(req sandbox.CreateRequest) bool {
	req.Template, req.TimeoutSeconds, req.Env, req.Metadata, req.Resources = "", 0, nil, nil, sandbox.Resources{}
	req.OnTimeout, req.MaxCostMicros, req.Idle = "", 0, sandbox.IdlePolicy{}
	return reflect.ValueOf(req).IsZero()
}

// handOut applies want to the idle pool sandbox id and gives it to owner.
func (m *Manager) handOut(ctx context.Context, id, owner string, want *store.Record) (*store.Record, error) {
	unlock := m.lockID(id)
	defer unlock()
	if want.Resources != m.cfg.Defaults {
		if err := m.backend.(sandbox.Updater).Update(ctx, id, want.Resources); err != nil {
			return nil, fmt.Errorf("update resources: %w", err)
		}
	}
	if len(want.Env) > 0 {
		if err := m.agent.SetEnv(ctx, id, want.Env); err != nil {
			return nil, fmt.Errorf("set env: %w", err)
		}
	}
	now := time.Now().UTC()
	lease := want.ExpiresAt.Sub(want.CreatedAt)
	return m.store.Update(id, func(r *store.Record) error {
		if r.Owner != poolOwner || r.State != sandbox.Running {
			return fmt.Errorf("%w: pool sandbox %s is %s", sandbox.ErrConflict, id, r.State)
		}
		r.Owner, r.Metadata, r.Resources, r.Env = owner, want.Metadata, want.Resources, want.Env
		r.TimeoutSeconds, r.OnTimeout, r.MaxCostMicros = want.TimeoutSeconds, want.OnTimeout, want.MaxCostMicros
		r.Idle = want.Idle
		r.History = nil
		r.AddEvent(now, sandbox.Running, "create")
		r.CreatedAt, r.ExpiresAt = now, now.Add(lease)
		r.Usage = store.Usage{SampledAt: now}
		return nil
	})
}

// startSpareIdle tells the guest agent of a sandbox just handed out to
// retire its spare command shim once idle, as in every sandbox not made
// for the pool. It runs in the background: the create is answered at once,
// and an agent that misses it only keeps its spare.
func (m *Manager) startSpareIdle(ctx context.Context, id string) {
	if m.cfg.SpareShimIdle <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	go func() {
		defer cancel()
		if err := m.agent.SetSpareIdle(ctx, id, m.cfg.SpareShimIdle); err != nil {
			m.log.Debug("warm pool: set the spare shim's idle time", "sandbox", id, "err", err)
		}
	}()
}

// ownedLocked counts owner's live sandboxes; m.mu is held.
func (m *Manager) ownedLocked(owner string) int {
	n := 0
	for _, o := range m.live {
		if o == owner {
			n++
		}
	}
	return n
}

// yieldForCreate makes room for owner's create that is about to be
// admitted on a full host by destroying an idle pool sandbox (of the
// fullest pool), and holds refills for a while so the room stays free.
// Nothing is destroyed for a create the per-key limit refuses anyway.
func (m *Manager) yieldForCreate(ctx context.Context, owner string) {
	m.mu.Lock()
	full := len(m.live) >= m.cfg.MaxSandboxes
	atLimit := m.cfg.MaxPerKey > 0 && m.ownedLocked(owner) >= m.cfg.MaxPerKey
	m.mu.Unlock()
	if !full || atLimit {
		return
	}
	best, id := m.pool.Evict()
	if id == "" {
		return
	}
	m.log.Info("warm pool: making room for a create on a full host", "sandbox", id, "template", best)
	m.discardPooled(context.WithoutCancel(ctx), id)
}
