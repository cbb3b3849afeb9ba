// Package pool is the warm pool's bookkeeping: per template, the idle
// sandboxes kept ready and the creates in flight, and the loop that refills
// the pool (bounded workers, a refill delay after hand-outs, exponential
// backoff after failures, a hold after an idle sandbox was evicted to make
// room). Its size adapts (demand.go): each template keeps Min idle
// sandboxes always and up to Max while creates ask for them (the creates of
// the last minute), shrinking back to Min after IdleAfter without one;
// refills pause while the host's available memory is below a fraction of
// its total. It does not create, hand out or destroy sandboxes: the manager
// does (internal/manager/pool.go describes the policy), and creates
// through the Creator it gives New. Whoever removes an id from the idle
// lists (Take, Remove, Evict) owns that sandbox.
package pool

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

const (
	// workers bounds the pool's creates in flight.
	workers = 2
	// backoffMin and backoffMax bound the wait after a failed refill; it
	// doubles per consecutive failure.
	backoffMin = 250 * time.Millisecond
	backoffMax = time.Minute
	// RefillDelay is how long refills wait after a hand-out while the
	// pool still has idle sandboxes, so that the caller's first commands
	// do not compete with a create for the CPU.
	RefillDelay = 150 * time.Millisecond
	// yieldHold is how long refills wait after an idle sandbox was
	// evicted to make room for a create.
	yieldHold = 5 * time.Second
)

// Creator creates idle sandboxes (the manager).
type Creator interface {
	// CreateIdle creates one idle sandbox of template and returns its id
	// and the backend reference of the template version it was made
	// from.
	CreateIdle(ctx context.Context, template string) (id, ref string, err error)
}

// Pool is the warm pool. It is safe for concurrent use; a Pool with no
// sizes is disabled and every call is a no-op.
type Pool struct {
	sizes   map[string]Limits
	cfg     Config
	creator Creator
	log     *slog.Logger
	kick    chan struct{}

	mu        sync.Mutex
	started   bool
	idle      map[string][]idle // template → idle sandboxes, oldest first
	filling   map[string]int    // template → creates in flight
	failures  map[string]int    // template → consecutive failed creates
	retryAt   map[string]time.Time
	holdUntil time.Time // no refills before (after an eviction)
	lastTake  map[string]time.Time
	demand    map[string]*demand
	memPaused bool // refills paused for low host memory (logged once)
	closed    bool // drained: no more refills
	inflight  sync.WaitGroup
}

// idle is a ready sandbox and the backend template reference (the
// template's version) it was made from.
type idle struct {
	id, ref string
}

// New returns a pool configured by cfg whose sandboxes c makes.
// Templates with Max 0 are not pooled; Min is clamped to [0, Max].
func New(cfg Config, c Creator, log *slog.Logger) *Pool {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.IdleAfter <= 0 {
		cfg.IdleAfter = DefaultIdleAfter
	}
	if cfg.MemoryFloor == 0 {
		cfg.MemoryFloor = DefaultMemoryFloor
	}
	if cfg.Memory == nil {
		cfg.Memory = HostMemory
	}
	p := &Pool{sizes: map[string]Limits{}, cfg: cfg, creator: c, log: log, kick: make(chan struct{}, 1),
		idle: map[string][]idle{}, filling: map[string]int{},
		failures: map[string]int{}, retryAt: map[string]time.Time{}, lastTake: map[string]time.Time{},
		demand: map[string]*demand{}}
	for t, l := range cfg.Templates {
		if l.Max > 0 {
			p.sizes[t] = Limits{Min: max(0, min(l.Min, l.Max)), Max: l.Max}
		}
	}
	return p
}

// Enabled reports whether any template has a pool.
func (p *Pool) Enabled() bool { return len(p.sizes) > 0 }

// Size is the most idle sandboxes of template the pool keeps (0: none).
func (p *Pool) Size(template string) int { return p.sizes[template].Max }

// Wake asks the fill loop to look at the pool now.
func (p *Pool) Wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Take removes and returns the oldest idle sandbox of template made from
// ref, or "", and schedules the refill: at once when the pool is now
// empty, else once hand-outs have paused for RefillDelay.
func (p *Pool) Take(template, ref string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := p.idle[template]
	i := slices.IndexFunc(ids, func(s idle) bool { return s.ref == ref })
	if i < 0 {
		return ""
	}
	id := ids[i].id
	p.idle[template] = slices.Delete(slices.Clone(ids), i, i+1)
	p.lastTake[template] = time.Now()
	if len(ids) == 1 {
		p.Wake()
	} else {
		time.AfterFunc(RefillDelay, p.Wake)
	}
	return id
}

// Return puts back a sandbox taken but not handed out, first in line.
func (p *Pool) Return(template, id, ref string) {
	p.mu.Lock()
	p.idle[template] = append([]idle{{id: id, ref: ref}}, p.idle[template]...)
	p.mu.Unlock()
}

// Find returns the reference of idle sandbox id of template, if it is
// idle.
func (p *Pool) Find(template, id string) (ref string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.IndexFunc(p.idle[template], func(s idle) bool { return s.id == id })
	if i < 0 {
		return "", false
	}
	return p.idle[template][i].ref, true
}

// Remove removes id from the idle list and reports whether it was there.
func (p *Pool) Remove(template, id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := p.idle[template]
	i := slices.IndexFunc(ids, func(s idle) bool { return s.id == id })
	if i < 0 {
		return false
	}
	p.idle[template] = slices.Delete(slices.Clone(ids), i, i+1)
	return true
}

// Evict removes the oldest idle sandbox of the fullest pool, if any, to
// make room for a create, and holds refills for a while so the room stays
// free.
func (p *Pool) Evict() (template, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for t, ids := range p.idle {
		if len(ids) > 0 && (template == "" || len(ids) > len(p.idle[template])) {
			template = t
		}
	}
	if template != "" {
		id = p.idle[template][0].id
		p.idle[template] = p.idle[template][1:]
	}
	p.holdUntil = time.Now().Add(yieldHold)
	return template, id
}

// Status reports, per configured template, the idle sandboxes and those
// being created; nil when the pool is disabled.
func (p *Pool) Status() map[string][2]int {
	if !p.Enabled() {
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

// Start starts filling the pool (once); it stops when ctx ends.
func (p *Pool) Start(ctx context.Context) {
	if !p.Enabled() {
		return
	}
	p.mu.Lock()
	started := p.started
	p.started = true
	p.mu.Unlock()
	if started {
		return
	}
	for t, l := range p.sizes {
		p.log.Info("warm pool", "template", t, "min", l.Min, "max", l.Max,
			"idle_after", p.cfg.IdleAfter, "memory_floor", p.cfg.MemoryFloor)
	}
	go p.fillLoop(ctx)
}

// fillLoop starts refills whenever the pool is short, woken by hand-outs,
// finished creates and a ticker (for backoff and holds).
func (p *Pool) fillLoop(ctx context.Context) {
	sem := make(chan struct{}, workers)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		p.fillOnce(ctx, sem)
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-tick.C:
		}
	}
}

// fillOnce starts as many refills as the pool lacks and the workers allow.
func (p *Pool) fillOnce(ctx context.Context, sem chan struct{}) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || now.Before(p.holdUntil) {
		return
	}
	short := false
	for t := range p.sizes {
		if len(p.idle[t])+p.filling[t] < p.targetLocked(t, now) {
			short = true
		}
	}
	if !short {
		return
	}
	if low := p.memoryLow(); low != p.memPaused {
		p.memPaused = low
		if low {
			p.log.Warn("warm pool: refills paused, host memory available is below the floor", "floor", p.cfg.MemoryFloor)
		} else {
			p.log.Info("warm pool: refills resumed")
		}
	}
	if p.memPaused {
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
			(len(p.idle[t]) > 0 && now.Sub(p.lastTake[t]) < RefillDelay) {
			continue
		}
		for len(p.idle[t])+p.filling[t] < p.targetLocked(t, now) {
			select {
			case sem <- struct{}{}:
			default:
				return
			}
			p.filling[t]++
			p.inflight.Add(1)
			go func() {
				defer func() { <-sem; p.Wake(); p.inflight.Done() }()
				p.refill(ctx, t)
			}()
		}
	}
}

// refill creates one sandbox of template and adds it to the pool.
func (p *Pool) refill(ctx context.Context, template string) {
	start := time.Now()
	id, ref, err := p.creator.CreateIdle(ctx, template)
	p.mu.Lock()
	p.filling[template]--
	if err != nil {
		p.failures[template]++
		n := p.failures[template]
		backoff := min(backoffMin<<min(n-1, 16), backoffMax)
		p.retryAt[template] = time.Now().Add(backoff)
		p.mu.Unlock()
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, sandbox.ErrNoCapacity):
			p.log.Debug("warm pool: no capacity to refill", "template", template, "retry_in", backoff)
		default:
			p.log.Warn("warm pool: create failed", "template", template, "failures", n, "retry_in", backoff, "err", err)
		}
		return
	}
	p.failures[template] = 0
	p.idle[template] = append(p.idle[template], idle{id: id, ref: ref})
	p.mu.Unlock()
	p.log.Debug("warm pool: sandbox ready", "sandbox", id, "template", template, "ms", time.Since(start).Milliseconds())
}

// Drain stops refills, waits for the creates in flight (cancel their
// context first to make that quick) and removes every idle sandbox; the
// caller owns and destroys them (template → ids).
func (p *Pool) Drain() map[string][]string {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.inflight.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string][]string{}
	for t, ids := range p.idle {
		for _, s := range ids {
			out[t] = append(out[t], s.id)
		}
	}
	p.idle = map[string][]idle{}
	return out
}

// Idle returns the ids of template's idle sandboxes, oldest first.
func (p *Pool) Idle(template string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for _, s := range p.idle[template] {
		ids = append(ids, s.id)
	}
	return ids
}
