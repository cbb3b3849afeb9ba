// Package manager owns the lifecycle of sandboxes: it validates and admits
// create requests, drives the backend, persists every state change in the
// store before acting on it, enforces leases with a reaper that works from
// persisted state (so no sandbox outlives expires_at, even across
// restarts), and on start recovers from a crash by re-adopting live
// sandboxes and destroying everything else the backend finds.
//
// It speaks domain types (package sandbox); only internal/server converts
// the wire types of package api. It is wired by construction (New with
// Deps): the backend, the agent client, and small interfaces for what it
// needs of others (Network to attach sandboxes, Templates to resolve
// names), a nil interface meaning that feature is disabled. It gives the
// template Builder build sandboxes (catalog.Sandboxes, builds.go) and the
// warm pool (internal/pool) its idle sandboxes (pool*.go).
package manager

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/paddock-sandbox/paddock/internal/agent"
	"github.com/paddock-sandbox/paddock/internal/pool"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// Config holds the manager's defaults and limits.
type Config struct {
	Defaults sandbox.Resources
	Max      sandbox.Resources
	// DefaultTimeout and MaxTimeout bound a sandbox's lease.
	DefaultTimeout time.Duration
	MaxTimeout     time.Duration
	// MaxSandboxes bounds live sandboxes on this host (503 past it);
	// MaxPerKey bounds them per API key (429 past it).
	MaxSandboxes int
	MaxPerKey    int
	// NoNetworkReason is the message of the 501 answered to network modes
	// other than off when Deps.Network is nil (default: networking is not
	// available on this daemon).
	NoNetworkReason string
	// RetainEnded is how long records of ended sandboxes stay visible.
	RetainEnded time.Duration
	// ReapInterval is how often leases are checked; LivenessInterval how
	// often the backend is asked whether running sandboxes are alive.
	ReapInterval     time.Duration
	LivenessInterval time.Duration
	// PauseRetention is how long a sandbox may stay paused before it is
	// terminated when the pause asks for no keep_for; MaxPauseRetention
	// bounds what a pause may ask for (at most MaxRetention).
	PauseRetention    time.Duration
	MaxPauseRetention time.Duration
	// StopRetention is how long a stopped sandbox's files are kept when the
	// stop asks for no keep_for (and at a stopping lease end or idle);
	// MaxStopRetention bounds what a stop may ask for.
	StopRetention    time.Duration
	MaxStopRetention time.Duration
	// Prices is the price table for cost accounting and max_cost_micros.
	Prices Prices
	// Events, if set, is called with the name of each lifecycle event
	// ("create", "expire", "pause", ...), for metrics.
	Events func(event string)
	// WarmPool configures the idle sandboxes kept ready per template
	// (see pool.go); no templates: no pool.
	WarmPool pool.Config
	// CleanupWorkers bounds the deferred cleanups of deleted sandboxes
	// running at once (delete.go); 0 means DefaultCleanupWorkers.
	CleanupWorkers int
	// SpareShimIdle is what a warm-pool sandbox's guest agent is told when
	// the sandbox is handed out: retire its spare command shim after that
	// long without an exec (pool sandboxes keep theirs until then; the
	// backend starts every other sandbox's agent with it). 0: keep it.
	SpareShimIdle time.Duration
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Defaults:          sandbox.Resources{VCPUs: 1, MemoryMiB: 512, DiskMiB: 1024, PIDs: 256},
		Max:               sandbox.Resources{VCPUs: 8, MemoryMiB: 16384, DiskMiB: 65536, PIDs: 32768},
		DefaultTimeout:    300 * time.Second,
		MaxTimeout:        24 * time.Hour,
		MaxSandboxes:      100,
		RetainEnded:       10 * time.Minute,
		ReapInterval:      time.Second,
		LivenessInterval:  5 * time.Second,
		PauseRetention:    24 * time.Hour,
		MaxPauseRetention: 7 * 24 * time.Hour,
		StopRetention:     7 * 24 * time.Hour,
		MaxStopRetention:  30 * 24 * time.Hour,
		Prices:            DefaultPrices(),
	}
}

// Manager is the sandbox lifecycle. It is safe for concurrent use.
type Manager struct {
	cfg     Config
	store   *store.Store
	backend sandbox.Backend
	log     *slog.Logger
	agent   *agent.Client
	net     Network // nil: networking disabled
	// netClean is net, or without networking Deps.NetworkCleaner.
	netClean NetworkCleaner
	egress   *Egress
	pool     *pool.Pool
	tpl      Templates // nil: only the backend's templates

	mu      sync.Mutex
	live    map[string]string // live sandbox id → owner
	idLocks map[string]*sync.Mutex
	act     map[string]*activity // live sandbox id → its recent use (idle.go)
	hist    *history             // metrics over time (history.go)
	// meterReads is what metering last read (metering_quiet.go); the
	// reaper's goroutine alone uses it.
	meterReads meterReads

	cleanups   sync.WaitGroup // deferred cleanups of deleted sandboxes (delete.go)
	cleanupSem chan struct{}
	cleaning   map[string]chan struct{} // sandbox id → closed when its deferred cleanup ends (under mu)
}

// Deps are the manager's collaborators; cmd/paddockd wires them. Store
// and Backend are required.
type Deps struct {
	Store   *store.Store
	Backend sandbox.Backend
	// Agent reaches the sandboxes' guest agents (default:
	// agent.NewClient(Backend.Dial)).
	Agent *agent.Client
	// Network attaches sandboxes to the host network. nil means
	// networking is disabled: only network mode off is accepted.
	Network Network
	// NetworkCleaner, when Network is nil, removes network state an
	// earlier run left (see NetworkCleaner); nil: none.
	NetworkCleaner NetworkCleaner
	// Egress is the egress proxy's policy source, which also keeps the
	// policies of template build sandboxes (default: NewEgress(Store,
	// nil), for a daemon without networking).
	Egress *Egress
	// Templates resolves template names; nil: only the backend's own
	// templates exist.
	Templates Templates
	// Log defaults to discarding.
	Log *slog.Logger
}

// New returns a manager of cfg over d. Call Recover before serving and Run
// to reap. Tests build one with New(DefaultConfig(), Deps{Store: st,
// Backend: b}).
func New(cfg Config, d Deps) *Manager {
	if d.Agent == nil {
		d.Agent = agent.NewClient(d.Backend.Dial)
	}
	if d.Egress == nil {
		d.Egress = NewEgress(d.Store, nil)
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{cfg: cfg, store: d.Store, backend: d.Backend, log: d.Log, agent: d.Agent, net: d.Network,
		egress: d.Egress, tpl: d.Templates, live: map[string]string{}, idLocks: map[string]*sync.Mutex{},
		act: map[string]*activity{}, hist: newHistory(HistorySamples), cleanupSem: make(chan struct{}, cleanupWorkers(cfg)),
		cleaning: map[string]chan struct{}{}, netClean: d.NetworkCleaner}
	if d.Network != nil {
		m.netClean = d.Network
	}
	m.pool = pool.New(cfg.WarmPool, poolCreator{m}, d.Log)
	return m
}

func (m *Manager) event(name string) {
	if m.cfg.Events != nil {
		m.cfg.Events(name)
	}
}

// Agent is the client of the sandboxes' guest agents.
func (m *Manager) Agent() *agent.Client { return m.agent }

// lockID serializes lifecycle operations on one sandbox.
func (m *Manager) lockID(id string) func() {
	m.mu.Lock()
	l, ok := m.idLocks[id]
	if !ok {
		l = new(sync.Mutex)
		m.idLocks[id] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func newID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return "sb" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

// Create validates req, admits it against the limits, and creates the
// sandbox. The record is persisted as creating before the backend runs, so
// a crash mid-create is cleaned up by Recover.
func (m *Manager) Create(ctx context.Context, owner string, req sandbox.CreateRequest) (*store.Record, error) {
	rec, err := m.validate(req)
	if err != nil {
		return nil, err
	}
	if err := m.validateNetwork(owner, req, rec); err != nil {
		return nil, err
	}
	tref, err := m.templateRef(ctx, owner, rec.Template)
	if err != nil {
		return nil, err
	}
	if r, ok, err := m.fromPool(ctx, owner, req, rec, tref); ok {
		return r, err
	}
	rec.ID, rec.Owner, rec.State = newID(), owner, sandbox.Creating
	if err := m.admit(rec.ID, owner); err != nil {
		return nil, err
	}
	unlock := m.lockID(rec.ID)
	defer unlock()
	if err := m.store.Put(rec); err != nil {
		m.release(rec.ID)
		return nil, fmt.Errorf("persist: %w", err)
	}
	start := time.Now()
	netCfg, err := m.setupNetwork(ctx, rec)
	if err != nil {
		m.teardownNetwork(context.WithoutCancel(ctx), rec.ID)
		m.release(rec.ID)
		m.end(rec.ID, sandbox.Terminated, "failed: "+err.Error())
		return nil, err
	}
	info, err := m.backend.Create(ctx, sandbox.Spec{ID: rec.ID, Template: tref, Resources: rec.Resources, Env: rec.Env, Network: netCfg})
	if err != nil {
		m.teardownNetwork(context.WithoutCancel(ctx), rec.ID)
		m.release(rec.ID)
		m.end(rec.ID, sandbox.Terminated, "failed: "+err.Error())
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	now := time.Now().UTC()
	timeout := rec.ExpiresAt.Sub(rec.CreatedAt)
	rec, err = m.store.Update(rec.ID, func(r *store.Record) error {
		r.State, r.Runtime = sandbox.Running, info.Runtime
		r.ExpiresAt = now.Add(timeout)
		r.AddEvent(now, sandbox.Running, "create")
		r.Usage.SampledAt = now
		return nil
	})
	m.event("create")
	if err != nil {
		return nil, fmt.Errorf("persist: %w", err)
	}
	m.log.Info("sandbox created", "sandbox", rec.ID, "owner", owner, "template", rec.Template,
		"runtime", info.Runtime, "ms", time.Since(start).Milliseconds())
	return rec, nil
}

// admit reserves a live slot for id or reports why it cannot.
func (m *Manager) admit(id, owner string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.live) >= m.cfg.MaxSandboxes {
		return fmt.Errorf("%w: %d sandboxes running (--max-sandboxes)", sandbox.ErrNoCapacity, len(m.live))
	}
	if m.cfg.MaxPerKey > 0 {
		n := 0
		for _, o := range m.live {
			if o == owner {
				n++
			}
		}
		if n >= m.cfg.MaxPerKey {
			return fmt.Errorf("%w: this key has %d sandboxes running (--max-sandboxes-per-key)", sandbox.ErrLimit, n)
		}
	}
	m.live[id] = owner
	return nil
}

func (m *Manager) release(id string) {
	m.mu.Lock()
	delete(m.live, id)
	delete(m.act, id)
	m.mu.Unlock()
}

// end records that a sandbox stopped or was terminated.
func (m *Manager) end(id string, state sandbox.State, reason string) {
	now := time.Now().UTC()
	_, err := m.store.Update(id, func(r *store.Record) error {
		endRecord(r, state, reason, now)
		return nil
	})
	if err != nil {
		m.log.Error("persist end", "sandbox", id, "err", err)
	}
}

// endRecord marks r ended at now.
func endRecord(r *store.Record, state sandbox.State, reason string, now time.Time) {
	r.State, r.Reason, r.EndedAt = state, reason, &now
	r.PausedAt, r.StoppedAt, r.StopAt = nil, nil, nil
	r.AddEvent(now, state, reason)
}

// Get returns owner's sandbox id.
func (m *Manager) Get(ctx context.Context, owner, id string) (*store.Record, error) {
	r, err := m.store.Get(id)
	if err != nil || r.Owner != owner {
		return nil, fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	return r, nil
}

// Running returns owner's sandbox id if it is running, for exec, files,
// processes and every other call that needs its agent. It is the one
// lifecycle hook of those calls: it counts as activity, and a paused or
// stopped sandbox created with auto_resume is resumed or started first
// (idle.go).
func (m *Manager) Running(ctx context.Context, owner, id string) (*store.Record, error) {
	r, err := m.Get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return m.wake(ctx, r)
}

// mustRun returns r if it is running, else a conflict error.
func mustRun(r *store.Record) (*store.Record, error) {
	if r.State != sandbox.Running {
		return nil, fmt.Errorf("%w: sandbox %s is %s", sandbox.ErrConflict, r.ID, r.State)
	}
	return r, nil
}

// Delete terminates owner's sandbox id. Deleting an ended sandbox is a
// no-op.
func (m *Manager) Delete(ctx context.Context, owner, id string) error {
	if _, err := m.Get(ctx, owner, id); err != nil {
		return err
	}
	unlock := m.lockID(id)
	defer unlock()
	r, err := m.store.Get(id)
	if err != nil {
		return err
	}
	if m.deleteRunning(ctx, r, "deleted") {
		return nil
	}
	return m.terminateLocked(ctx, r, sandbox.Terminated, "deleted")
}

// terminate destroys a live sandbox and records the final state.
func (m *Manager) terminate(ctx context.Context, id string, state sandbox.State, reason string) error {
	unlock := m.lockID(id)
	defer unlock()
	r, err := m.store.Get(id)
	if err != nil {
		return err
	}
	return m.terminateLocked(ctx, r, state, reason)
}

// terminateLocked is terminate for a caller holding r's id lock.
func (m *Manager) terminateLocked(ctx context.Context, r *store.Record, state sandbox.State, reason string) error {
	id := r.ID
	if !r.State.Kept() || r.StoppedAt == nil && r.State == sandbox.Stopped { // ended (or a stopped record of an older daemon)
		return nil
	}
	if r.State == sandbox.Running || r.State == sandbox.Stopped {
		m.finalSample(ctx, id)
	}
	if err := m.backend.Destroy(ctx, id); err != nil {
		return fmt.Errorf("destroy %s: %w", id, err)
	}
	m.teardownNetwork(ctx, id)
	m.release(id)
	m.end(id, state, reason)
	m.event(endEvent(reason))
	m.log.Info("sandbox ended", "sandbox", id, "state", state, "reason", reason)
	return nil
}

// endEvent names the metrics event of an ending (bounded label values).
func endEvent(reason string) string {
	switch {
	case reason == "deleted":
		return "delete"
	case strings.HasPrefix(reason, "expired"):
		return "expire"
	case reason == "cost limit reached":
		return "cost_limit"
	case strings.HasPrefix(reason, "exited"):
		return "exited"
	}
	return "end_other"
}

// finalSample records a sandbox's last resource use before it is
// destroyed.
func (m *Manager) finalSample(ctx context.Context, id string) {
	st := m.stats(ctx, id)
	now := time.Now().UTC()
	m.store.Update(id, func(r *store.Record) error {
		accrue(&r.Usage, r, st, now, m.cfg.Prices)
		return nil
	})
}

// stats is the backend's resource use of sandbox id, if it meters any.
func (m *Manager) stats(ctx context.Context, id string) sandbox.Stats {
	var st sandbox.Stats
	if meter, ok := m.backend.(sandbox.Meter); ok {
		st, _ = meter.Stats(ctx, id)
	}
	return st
}

// SetTimeout moves owner's sandbox's expiry to now+d.
func (m *Manager) SetTimeout(ctx context.Context, owner, id string, seconds int64) (*store.Record, error) {
	d, err := m.timeout(seconds)
	if err != nil {
		return nil, err
	}
	if _, err := m.Running(ctx, owner, id); err != nil {
		return nil, err
	}
	unlock := m.lockID(id)
	defer unlock()
	return m.store.Update(id, func(r *store.Record) error {
		if r.State != sandbox.Running {
			return fmt.Errorf("%w: sandbox %s is %s", sandbox.ErrConflict, id, r.State)
		}
		r.ExpiresAt = time.Now().UTC().Add(d)
		return nil
	})
}
