package manager

// The warm pool.
//
// For every template named in Config.WarmPool the manager keeps that many
// idle sandboxes created ahead of time with the default resources and no
// env, so that Create can hand one out instead of building a sandbox while
// the caller waits.
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
// use, when the request can be applied to it (see poolable): the disk size must be the default
// (a disk is sized at creation); other vcpus/memory_mib/pids are applied
// in place through the backend's sandbox.Updater; env is set in the guest
// agent (PUT /env), which adds it to every later command. The record then
// gets the caller as owner and the request's metadata, resources, env,
// lease, on_timeout and max_cost_micros, with created_at and the lease
// starting at hand-out. Anything else (a network policy, secrets, any
// request field added later) and anything that fails to apply means a
// normal (cold) create; a pool sandbox that failed half-way is destroyed.
//
// A refill starts poolRefillDelay after a hand-out (at once when the pool
// is empty), so that it does not compete for the CPU with the caller's
// first commands; at most poolWorkers creates are in flight for all
// templates together, with an exponential backoff per template after
// failures. Idle pool sandboxes carry a lease of poolLease that the reaper
// renews; the reaper recycles those that died or are older than
// poolMaxAge or whose template changed. Recover does not re-adopt pool
// sandboxes after a restart: it destroys them and drops their records (a
// daemon upgrade may bring a new agent or template), and the pool refills.
// Shutdown leaves them running for that.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

const (
	// poolOwner is the owner of idle pool sandboxes.
	poolOwner = ""
	// poolWorkers bounds the pool's creates in flight.
	poolWorkers = 2
	// poolLease is an idle pool sandbox's lease, renewed by the reaper
	// once half of it is left.
	poolLease = 10 * time.Minute
	// poolMaxAge is how long an idle sandbox may wait before it is
	// replaced by a fresh one.
	poolMaxAge = time.Hour
	// poolBackoffMin and poolBackoffMax bound the wait after a failed
	// refill; it doubles per consecutive failure.
	poolBackoffMin = 250 * time.Millisecond
	poolBackoffMax = time.Minute
	// poolRefillDelay is how long refills wait after a hand-out while the
	// pool still has idle sandboxes, so that the caller's first commands
	// do not compete with a create for the CPU.
	poolRefillDelay = 150 * time.Millisecond
	// poolOrphanAge is how old a running pool sandbox that is in no idle
	// list must be before the reaper destroys it (creates and hand-outs
	// take far less).
	poolOrphanAge = 5 * time.Minute
	// poolYieldHold is how long refills wait after an idle pool sandbox
	// was destroyed to make room for a create.
	poolYieldHold = 5 * time.Second
)

// pool is the warm pool's bookkeeping. Whoever removes an id from idle
// owns that sandbox: a hand-out, a recycle, or an eviction.
type pool struct {
	sizes map[string]int
	kick  chan struct{}

	mu        sync.Mutex
	started   bool
	idle      map[string][]idleSandbox // template → idle sandboxes, oldest first
	filling   map[string]int           // template → creates in flight
	failures  map[string]int           // template → consecutive failed creates
	retryAt   map[string]time.Time
	holdUntil time.Time // no refills before (after a yield)
	lastTake  map[string]time.Time
}

// idleSandbox is a ready pool sandbox and the backend template reference
// (the template's version) it was made from.
type idleSandbox struct {
	id, ref string
}

func newPool(sizes map[string]int) *pool {
	p := &pool{sizes: map[string]int{}, kick: make(chan struct{}, 1),
		idle: map[string][]idleSandbox{}, filling: map[string]int{},
		failures: map[string]int{}, retryAt: map[string]time.Time{}, lastTake: map[string]time.Time{}}
	for t, n := range sizes {
		if n > 0 {
			p.sizes[t] = n
		}
	}
	return p
}

func (p *pool) enabled() bool { return p != nil && len(p.sizes) > 0 }

// wake asks the fill loop to look at the pool now.
func (p *pool) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// take removes and returns the oldest idle sandbox of template made from
// ref, or "", and schedules the refill: at once when the pool is now
// empty, else once hand-outs have paused for poolRefillDelay.
func (p *pool) take(template, ref string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	idle := p.idle[template]
	i := slices.IndexFunc(idle, func(s idleSandbox) bool { return s.ref == ref })
	if i < 0 {
		return ""
	}
	id := idle[i].id
	p.idle[template] = slices.Delete(slices.Clone(idle), i, i+1)
	p.lastTake[template] = time.Now()
	if len(idle) == 1 {
		p.wake()
	} else {
		time.AfterFunc(poolRefillDelay, p.wake)
	}
	return id
}

// find returns the idle sandbox id of template, if it is idle.
func (p *pool) find(template, id string) (idleSandbox, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.IndexFunc(p.idle[template], func(s idleSandbox) bool { return s.id == id })
	if i < 0 {
		return idleSandbox{}, false
	}
	return p.idle[template][i], true
}

// remove removes id from the idle list and reports whether it was there.
func (p *pool) remove(template, id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	idle := p.idle[template]
	i := slices.IndexFunc(idle, func(s idleSandbox) bool { return s.id == id })
	if i < 0 {
		return false
	}
	p.idle[template] = slices.Delete(slices.Clone(idle), i, i+1)
	return true
}

// PoolStatus reports, per configured template, the idle pool sandboxes
// and those being created.
func (m *Manager) PoolStatus(ctx context.Context) map[string][2]int {
	p := m.pool
	if !p.enabled() {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string][2]int{}
	for t := range p.sizes {
		out[t] = [2]int{len(p.idle[t]), p.filling[t]}
	}
	return out
}

// startPool starts filling the pool; it stops when ctx ends. Called from
// Run.
func (m *Manager) startPool(ctx context.Context) {
	p := m.pool
	if !p.enabled() {
		return
	}
	p.mu.Lock()
	started := p.started
	p.started = true
	p.mu.Unlock()
	if started {
		return
	}
	for t, n := range p.sizes {
		m.log.Info("warm pool", "template", t, "size", n)
	}
	go m.fillLoop(ctx)
}

// fillLoop starts refills whenever the pool is short, woken by hand-outs,
// finished creates and a ticker (for backoff and holds).
func (m *Manager) fillLoop(ctx context.Context) {
	p := m.pool
	sem := make(chan struct{}, poolWorkers)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		m.fillOnce(ctx, sem)
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-tick.C:
		}
	}
}

// fillOnce starts as many refills as the pool lacks and the workers allow.
func (m *Manager) fillOnce(ctx context.Context, sem chan struct{}) {
	p := m.pool
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Before(p.holdUntil) {
		return
	}
	templates := make([]string, 0, len(p.sizes))
	for t := range p.sizes {
		templates = append(templates, t)
	}
	// The emptiest pool first.
	slices.SortFunc(templates, func(a, b string) int {
		return (len(p.idle[a]) + p.filling[a]) - (len(p.idle[b]) + p.filling[b])
	})
	for _, t := range templates {
		if now.Before(p.retryAt[t]) ||
			(len(p.idle[t]) > 0 && now.Sub(p.lastTake[t]) < poolRefillDelay) {
			continue
		}
		for len(p.idle[t])+p.filling[t] < p.sizes[t] {
			select {
			case sem <- struct{}{}:
			default:
				return
			}
			p.filling[t]++
			go func() {
				defer func() { <-sem; p.wake() }()
				m.refill(ctx, t)
			}()
		}
	}
}

// refill creates one pool sandbox of template and adds it to the pool.
func (m *Manager) refill(ctx context.Context, template string) {
	p := m.pool
	start := time.Now()
	id, ref, err := m.createPooled(ctx, template)
	p.mu.Lock()
	p.filling[template]--
	if err != nil {
		p.failures[template]++
		n := p.failures[template]
		backoff := min(poolBackoffMin<<min(n-1, 16), poolBackoffMax)
		p.retryAt[template] = time.Now().Add(backoff)
		p.mu.Unlock()
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, sandbox.ErrNoCapacity):
			m.log.Debug("warm pool: no capacity to refill", "template", template, "retry_in", backoff)
		default:
			m.log.Warn("warm pool: create failed", "template", template, "failures", n, "retry_in", backoff, "err", err)
		}
		return
	}
	p.failures[template] = 0
	p.idle[template] = append(p.idle[template], idleSandbox{id: id, ref: ref})
	p.mu.Unlock()
	m.event("pool_create")
	m.log.Debug("warm pool: sandbox ready", "sandbox", id, "template", template, "ms", time.Since(start).Milliseconds())
}

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
	info, err := m.backend.Create(ctx, sandbox.Spec{ID: rec.ID, Template: ref, Resources: rec.Resources})
	if err != nil {
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
	m.release(id)
	m.forget(id)
	m.event("pool_discard")
}
