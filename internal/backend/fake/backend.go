package fake

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"slices"
	"sort"
	"sync"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

var (
	_ sandbox.Backend = (*Backend)(nil)
	_ sandbox.Pauser  = (*Backend)(nil)
	_ sandbox.Meter   = (*Backend)(nil)
	_ sandbox.Updater = (*Backend)(nil)
	_ sandbox.Stopper = (*Backend)(nil)
)

// idPattern is the container backend's: ids are path components.
var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// Op names a Backend operation, for Fail.
type Op string

// Operations that can be made to fail.
const (
	OpCreate  Op = "create"
	OpDestroy Op = "destroy"
	OpAlive   Op = "alive"
	OpDial    Op = "dial"
	OpList    Op = "list"
	OpPause   Op = "pause"
	OpResume  Op = "resume"
	OpStats   Op = "stats"
	OpUpdate  Op = "update"
	OpStop    Op = "stop"
	OpStart   Op = "start"
)

// Config configures a Backend.
type Config struct {
	// Templates are the template names it serves (default ["base"]).
	Templates []string
	// MaxSandboxes bounds the sandboxes on the host (ErrNoCapacity past
	// it); 0 means no bound.
	MaxSandboxes int
}

// Backend is one daemon's view of a Host. It is safe for concurrent use.
type Backend struct {
	host *Host
	cfg  Config

	mu     sync.Mutex
	closed bool
	faults map[Op]error
	calls  map[Op]int
}

// New returns a backend over host, as a daemon starting on it.
func New(host *Host, cfg Config) *Backend {
	if len(cfg.Templates) == 0 {
		cfg.Templates = []string{"base"}
	}
	return &Backend{host: host, cfg: cfg, faults: map[Op]error{}, calls: map[Op]int{}}
}

// Host returns the machine the backend runs on.
func (b *Backend) Host() *Host { return b.host }

// Restart closes b (every later call fails) and returns a new backend over
// the same host: a daemon restart with the sandboxes still running.
func (b *Backend) Restart() *Backend {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return New(b.host, b.cfg)
}

// Fail makes every later call of op fail with err (nil clears it). A
// failing Create fails after the sandbox started, then rolls it back.
func (b *Backend) Fail(op Op, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil {
		delete(b.faults, op)
	} else {
		b.faults[op] = err
	}
}

// Calls returns how often op was called on this backend.
func (b *Backend) Calls(op Op) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[op]
}

// enter counts a call and returns the error it must fail with, if any
// besides an injected fault (which the caller applies where it fits).
func (b *Backend) enter(op Op) (fault, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls[op]++
	if b.closed {
		return nil, errClosed
	}
	return b.faults[op], nil
}

// Templates lists the template names this backend serves.
func (b *Backend) Templates() []string { return slices.Clone(b.cfg.Templates) }

// Create starts a sandbox whose agent answers at once.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Info, error) {
	fault, err := b.enter(OpCreate)
	if err != nil {
		return sandbox.Info{}, err
	}
	if !idPattern.MatchString(spec.ID) {
		return sandbox.Info{}, fmt.Errorf("%w: bad sandbox id %q", sandbox.ErrInvalid, spec.ID)
	}
	if !slices.Contains(b.cfg.Templates, spec.Template) {
		return sandbox.Info{}, fmt.Errorf("%w: %q", sandbox.ErrUnknownTemplate, spec.Template)
	}
	if err := ctx.Err(); err != nil {
		return sandbox.Info{}, err
	}
	h := b.host
	h.mu.Lock()
	if _, ok := h.boxes[spec.ID]; ok {
		h.mu.Unlock()
		return sandbox.Info{}, fmt.Errorf("%w: sandbox %s exists", sandbox.ErrConflict, spec.ID)
	}
	if b.cfg.MaxSandboxes > 0 && len(h.boxes) >= b.cfg.MaxSandboxes {
		h.mu.Unlock()
		return sandbox.Info{}, fmt.Errorf("%w: %d sandboxes on the host", sandbox.ErrNoCapacity, len(h.boxes))
	}
	reserved := &box{spec: spec, status: dead, halt: func() {}}
	h.boxes[spec.ID] = reserved
	h.mu.Unlock()
	bx, err := h.start(spec, "")
	if err == nil {
		err = fault
	}
	if err == nil {
		err = ctx.Err()
	}
	h.mu.Lock()
	if err == nil && h.boxes[spec.ID] != reserved {
		err = fmt.Errorf("%w: destroyed while being created", sandbox.ErrConflict)
	}
	if err == nil {
		h.boxes[spec.ID] = bx
		h.mu.Unlock()
		return sandbox.Info{ID: spec.ID, Runtime: "fake"}, nil
	}
	if h.boxes[spec.ID] == reserved { // roll back: nothing stays behind
		delete(h.boxes, spec.ID)
	}
	h.mu.Unlock()
	if bx != nil {
		stopAgent(bx)
	}
	return sandbox.Info{}, fmt.Errorf("create %s: %w", spec.ID, err)
}

// Destroy stops the sandbox's agent and forgets it. Idempotent.
func (b *Backend) Destroy(ctx context.Context, id string) error {
	fault, err := b.enter(OpDestroy)
	if err != nil {
		return err
	}
	if fault != nil {
		return fault
	}
	if !idPattern.MatchString(id) {
		return fmt.Errorf("%w: bad sandbox id %q", sandbox.ErrInvalid, id)
	}
	h := b.host
	h.mu.Lock()
	bx, ok := h.boxes[id]
	delete(h.boxes, id)
	h.mu.Unlock()
	if ok {
		stopAgent(bx)
	}
	return nil
}

// Alive reports whether the sandbox runs (or is paused).
func (b *Backend) Alive(ctx context.Context, id string) (bool, error) {
	fault, err := b.enter(OpAlive)
	if err == nil {
		err = fault
	}
	if err != nil {
		return false, err
	}
	h := b.host
	h.mu.Lock()
	defer h.mu.Unlock()
	bx, ok := h.boxes[id]
	return ok && bx.status != dead && bx.status != stopped, nil
}

// Dial connects to the sandbox's agent. A paused, dead or unreachable
// sandbox fails with ErrUnavailable, an unknown one with ErrNotFound.
func (b *Backend) Dial(ctx context.Context, id string) (net.Conn, error) {
	fault, err := b.enter(OpDial)
	if err == nil {
		err = fault
	}
	if err != nil {
		return nil, err
	}
	h := b.host
	h.mu.Lock()
	bx, ok := h.boxes[id]
	var why string
	switch {
	case !ok:
		h.mu.Unlock()
		return nil, fmt.Errorf("%w: sandbox %s", sandbox.ErrNotFound, id)
	case bx.status == dead || bx.status == stopped:
		why = "not running"
	case bx.status == paused:
		why = "paused"
	case bx.unreach:
		why = "agent unreachable"
	}
	sock := bx.sock
	h.mu.Unlock()
	if why != "" {
		return nil, fmt.Errorf("%w: sandbox %s: %s", sandbox.ErrUnavailable, id, why)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", sandbox.ErrUnavailable, err)
	}
	return c, nil
}

// List returns every sandbox on the host, live or dead, sorted.
func (b *Backend) List(ctx context.Context) ([]string, error) {
	fault, err := b.enter(OpList)
	if err == nil {
		err = fault
	}
	if err != nil {
		return nil, err
	}
	ids := b.host.IDs()
	sort.Strings(ids)
	return ids, nil
}

// Pause freezes a running sandbox: its agent stops answering.
func (b *Backend) Pause(ctx context.Context, id string) error {
	return b.setPaused(OpPause, id, running, paused)
}

// Resume thaws a paused sandbox.
func (b *Backend) Resume(ctx context.Context, id string) error {
	return b.setPaused(OpResume, id, paused, running)
}

func (b *Backend) setPaused(op Op, id string, from, to status) error {
	fault, err := b.enter(op)
	if err == nil {
		err = fault
	}
	if err != nil {
		return err
	}
	h := b.host
	h.mu.Lock()
	defer h.mu.Unlock()
	bx, err := h.get(id)
	if err != nil {
		return err
	}
	if bx.status != from {
		return fmt.Errorf("%w: sandbox %s cannot %s now", sandbox.ErrConflict, id, op)
	}
	bx.status = to
	return nil
}

// Stats reports what Host.SetStats set (by default 16 MiB of memory, one
// pid, no CPU time).
func (b *Backend) Stats(ctx context.Context, id string) (sandbox.Stats, error) {
	fault, err := b.enter(OpStats)
	if err == nil {
		err = fault
	}
	if err != nil {
		return sandbox.Stats{}, err
	}
	h := b.host
	h.mu.Lock()
	defer h.mu.Unlock()
	bx, err := h.get(id)
	if err != nil {
		return sandbox.Stats{}, err
	}
	return bx.stats, nil
}

// Update records new CPU, memory and pids limits (DiskMiB is ignored).
func (b *Backend) Update(ctx context.Context, id string, r sandbox.Resources) error {
	fault, err := b.enter(OpUpdate)
	if err == nil {
		err = fault
	}
	if err != nil {
		return err
	}
	h := b.host
	h.mu.Lock()
	defer h.mu.Unlock()
	bx, err := h.get(id)
	if err != nil {
		return err
	}
	if bx.status == dead {
		return fmt.Errorf("%w: sandbox %s is not running", sandbox.ErrConflict, id)
	}
	r.DiskMiB = bx.resources.DiskMiB
	bx.resources = r
	return nil
}
