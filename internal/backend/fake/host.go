// Package fake is an in-memory sandbox.Backend for tests: deterministic,
// safe for concurrent use, unprivileged, with hooks that inject failures.
//
// A Host is the simulated machine: it holds the sandboxes and outlives
// daemons. A Backend is one daemon's view of it (New); Restart closes a
// Backend and returns a new one over the same Host, the way paddockd
// restarts while its sandboxes keep running, so that recovery can be
// tested. Host.Kill makes a sandbox die behind the daemon's back (its
// traces stay until Destroy, as a crashed container's do), and
// Host.SetUnreachable makes its agent stop answering while it stays alive.
// Backend.Fail makes one operation fail with a given error until cleared;
// a failing Create fails after the sandbox started and rolls it back, so
// the rollback path runs too.
//
// Every sandbox runs the REAL guest agent (internal/agent) in-process,
// serving on its own unix socket, so exec, files and processes answer with
// the real wire types. The agent is not PID 1 here and runs commands on the
// host, as the test's user, with the sandbox's workdir (a temporary
// directory) as their cwd: use benign commands and relative paths only.
// Commands start under the agent's shim, which must be this test binary:
// call HandleShim first in TestMain, or exec answers with an error.
//
//	func TestMain(m *testing.M) {
//		fake.HandleShim()
//		os.Exit(m.Run())
//	}
//
// Spec.Env is applied with the agent's PUT /env, so commands see it as
// they would in a real sandbox; HOME is a directory of the sandbox's own.
package fake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"

	"github.com/paddock-sandbox/paddock/internal/agent"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// status is what the simulated machine knows of a sandbox.
type status int

const (
	running status = iota
	paused
	dead
	stopped // processes ended, workdir kept (Backend.Stop)
)

// box is one sandbox on the Host.
type box struct {
	spec      sandbox.Spec
	status    status
	unreach   bool
	sock      string
	workdir   string
	stats     sandbox.Stats
	resources sandbox.Resources // as last set by Create or Update
	halt      func()            // stops the agent and waits for it; idempotent
}

// Host is the simulated machine the fake backends run sandboxes on. It is
// safe for concurrent use. Close it when the test ends.
type Host struct {
	dir  string // short: unix socket paths are limited to 108 bytes
	shim string
	log  *slog.Logger

	mu    sync.Mutex
	seq   int
	boxes map[string]*box
}

// NewHost returns an empty host. log may be nil.
func NewHost(log *slog.Logger) (*Host, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir, err := os.MkdirTemp("", "paddock-fake-")
	if err != nil {
		return nil, fmt.Errorf("fake host: %w", err)
	}
	shim := os.Getenv(shimEnv)
	if shim == "" {
		shim = filepath.Join(dir, "no-shim-call-fake.HandleShim-in-TestMain")
	}
	return &Host{dir: dir, shim: shim, log: log, boxes: map[string]*box{}}, nil
}

// Close stops every sandbox's agent and removes the host's files.
func (h *Host) Close() error {
	h.mu.Lock()
	boxes := h.boxes
	h.boxes = map[string]*box{}
	h.mu.Unlock()
	for _, b := range boxes {
		stopAgent(b)
	}
	return os.RemoveAll(h.dir)
}

// start runs a new sandbox's agent and applies its environment; workdir
// is a stopped sandbox's kept one, or "" for a new one.
func (h *Host) start(spec sandbox.Spec, workdir string) (*box, error) {
	h.mu.Lock()
	h.seq++
	n := h.seq
	h.mu.Unlock()
	if workdir == "" {
		workdir = filepath.Join(h.dir, "w", strconv.Itoa(n), "workspace")
	}
	b := &box{spec: spec, resources: spec.Resources,
		sock:    filepath.Join(h.dir, strconv.Itoa(n)+".sock"),
		workdir: workdir,
		stats:   sandbox.Stats{MemoryBytes: 16 << 20, MemoryPeakBytes: 16 << 20, DiskBytes: 1 << 20, PIDs: 1}}
	home := filepath.Join(filepath.Dir(b.workdir), "home")
	for _, d := range []string{b.workdir, home} { // before any exec can come
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("workdir: %w", err)
		}
	}
	ln, err := net.Listen("unix", b.sock)
	if err != nil {
		os.RemoveAll(filepath.Dir(b.workdir))
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	srv := agent.NewServer(agent.Config{Workdir: b.workdir, ShimPath: h.shim}, h.log.With("sandbox", spec.ID))
	// Commands get a home of their own, as in a sandbox: never the host
	// user's dotfiles (a login shell, as `command` runs, reads them).
	env := map[string]string{"HOME": home}
	for k, v := range spec.Env {
		env[k] = v
	}
	if err := putEnv(srv, env); err != nil {
		ln.Close()
		os.RemoveAll(filepath.Dir(b.workdir))
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ctx, ln); err != nil {
			h.log.Warn("fake agent", "sandbox", spec.ID, "err", err)
		}
	}()
	b.halt = sync.OnceFunc(func() {
		stop()
		<-done
	})
	return b, nil
}

// putEnv sets env for every later command, as the daemon does for a warm
// sandbox, through the agent's own handler.
func putEnv(srv *agent.Server, env map[string]string) error {
	body, err := json.Marshal(env)
	if err != nil {
		return err
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPut, "/env", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	srv.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusNoContent {
		return fmt.Errorf("%w: env: agent answered %d: %s", sandbox.ErrInvalid, rec.Code, rec.Body.String())
	}
	return nil
}

// stopAgent ends a box's agent (its commands are killed) and removes its
// files. It is idempotent.
func stopAgent(b *box) {
	b.halt()
	os.Remove(b.sock)
	os.RemoveAll(filepath.Dir(b.workdir))
}

func (h *Host) get(id string) (*box, error) {
	b, ok := h.boxes[id]
	if !ok {
		return nil, fmt.Errorf("%w: sandbox %s", sandbox.ErrNotFound, id)
	}
	return b, nil
}

// Kill makes sandbox id die behind the daemon's back: its agent stops and
// its commands are killed, but it stays listed until destroyed.
func (h *Host) Kill(id string) error {
	h.mu.Lock()
	b, err := h.get(id)
	if err == nil {
		b.status = dead
	}
	h.mu.Unlock()
	if err != nil {
		return err
	}
	b.halt()
	return nil
}

// SetUnreachable makes sandbox id's agent refuse connections (true) or
// answer again (false); the sandbox stays alive either way.
func (h *Host) SetUnreachable(id string, unreachable bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, err := h.get(id)
	if err == nil {
		b.unreach = unreachable
	}
	return err
}

// SetStats sets what Stats reports for sandbox id from now on.
func (h *Host) SetStats(id string, st sandbox.Stats) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, err := h.get(id)
	if err == nil {
		b.stats = st
	}
	return err
}

// Spec returns the spec sandbox id was created with and its current
// resources (changed by Update).
func (h *Host) Spec(id string) (sandbox.Spec, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, ok := h.boxes[id]
	if !ok {
		return sandbox.Spec{}, false
	}
	s := b.spec
	s.Resources = b.resources
	return s, true
}

// Workdir returns sandbox id's workspace directory on the host.
func (h *Host) Workdir(id string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, ok := h.boxes[id]
	if !ok {
		return "", false
	}
	return b.workdir, true
}

// IDs lists the sandboxes on the host, live or dead, sorted.
func (h *Host) IDs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.boxes))
	for id := range h.boxes {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Paused reports whether sandbox id is paused.
func (h *Host) Paused(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, ok := h.boxes[id]
	return ok && b.status == paused
}

var errClosed = errors.New("fake backend: closed (the daemon restarted)")
