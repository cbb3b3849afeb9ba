package kernel

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// Starter starts path with argv and attr (which asks for a new process
// group) and returns the pid and a channel closed once the process has
// been reaped. The agent's starter goes through PID 1's reaper.
type Starter func(path string, argv []string, attr *syscall.ProcAttr) (pid int, exited <-chan struct{}, err error)

// Config configures a Manager. Zero fields take the api defaults.
type Config struct {
	// Workdir is the default working directory and the base of relative
	// cwds.
	Workdir string
	// Env returns the environment of a new interpreter: the sandbox's with
	// extra on top (it validates extra).
	Env func(extra map[string]string) ([]string, error)
	// Start starts an interpreter process.
	Start Starter
	// MaxContexts bounds the contexts (api.MaxCodeContexts).
	MaxContexts int
	// MaxOutputBytes is what a result keeps of each stream
	// (api.MaxCodeOutputBytes).
	MaxOutputBytes int
	// MaxItemBytes bounds one MIME representation (api.MaxCodeItemBytes).
	MaxItemBytes int
	// MaxResultsBytes bounds the results of one cell
	// (api.MaxCodeResultsBytes).
	MaxResultsBytes int
	// Grace is how long a context has after SIGINT before it is restarted
	// (api.CodeInterruptGraceSeconds).
	Grace time.Duration
	// NProc, if positive, is the RLIMIT_NPROC of every interpreter (the
	// bound commands run under, so a fork bomb in a cell cannot take the
	// agent's last process slots).
	NProc int
	Log   *slog.Logger
}

// Manager holds the code contexts of one sandbox.
type Manager struct {
	cfg Config

	mu       sync.Mutex
	seq      int
	contexts map[string]*Context
	order    []string
	pending  int // contexts being created
	closed   bool
}

// NewManager returns a manager for cfg.
func NewManager(cfg Config) *Manager {
	if cfg.MaxContexts <= 0 {
		cfg.MaxContexts = api.MaxCodeContexts
	}
	if cfg.MaxOutputBytes <= 0 {
		cfg.MaxOutputBytes = api.MaxCodeOutputBytes
	}
	if cfg.MaxItemBytes <= 0 {
		cfg.MaxItemBytes = api.MaxCodeItemBytes
	}
	if cfg.MaxResultsBytes <= 0 {
		cfg.MaxResultsBytes = api.MaxCodeResultsBytes
	}
	if cfg.Grace <= 0 {
		cfg.Grace = api.CodeInterruptGraceSeconds * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Workdir == "" {
		cfg.Workdir = "/workspace"
	}
	return &Manager{cfg: cfg, contexts: make(map[string]*Context)}
}

// Create starts a new context.
func (m *Manager) Create(req api.CodeContextRequest) (api.CodeContext, error) {
	c, err := m.create("", req)
	if err != nil {
		return api.CodeContext{}, err
	}
	return c.describe(), nil
}

// create starts a context with id (a new one if empty).
func (m *Manager) create(id string, req api.CodeContextRequest) (*Context, error) {
	lang, err := lookupLanguage(req.Language)
	if err != nil {
		return nil, err
	}
	dir := m.cfg.Workdir
	if req.Cwd != "" {
		if len(req.Cwd) > 4096 || hasNUL(req.Cwd) {
			return nil, badRequest("invalid cwd")
		}
		dir = req.Cwd
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(m.cfg.Workdir, dir)
		}
		dir = filepath.Clean(dir)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, badRequest("cwd %s is not an existing directory", dir)
	}
	if len(req.Env) > api.MaxExecEnv {
		return nil, badRequest("at most %d env vars", api.MaxExecEnv)
	}
	env, err := m.cfg.Env(req.Env)
	if err != nil {
		return nil, err
	}

	m.mu.Lock()
	switch {
	case m.closed:
		m.mu.Unlock()
		return nil, errorf(api.CodeConflict, "the agent is shutting down")
	case len(m.contexts)+m.pending >= m.cfg.MaxContexts:
		m.mu.Unlock()
		return nil, errorf(api.CodeLimitExceeded, "too many code contexts (at most %d); delete one first", m.cfg.MaxContexts)
	}
	if id == "" {
		m.seq++
		id = "ctx-" + strconv.Itoa(m.seq)
	}
	m.pending++
	m.mu.Unlock()

	c := &Context{m: m, id: id, lang: lang, dir: dir, env: env, created: time.Now().UTC()}
	p, err := m.start(lang, dir, env)

	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending--
	if err == nil && m.closed {
		err = errorf(api.CodeConflict, "the agent is shutting down")
	}
	if err == nil && m.contexts[id] != nil {
		err = errorf(api.CodeConflict, "context %s exists", id)
	}
	if err != nil {
		if p != nil {
			go func() { p.kill(5 * time.Second); p.drain() }()
		}
		return nil, err
	}
	c.proc = p
	m.contexts[id] = c
	m.order = append(m.order, id)
	return c, nil
}

// get returns the context id.
func (m *Manager) get(id string) (*Context, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.contexts[id]
	if !ok {
		return nil, errorf(api.CodeNotFound, "code context %s not found", id)
	}
	return c, nil
}

// defaultContext returns the default context of a language, created on
// first use.
func (m *Manager) defaultContext(language string) (*Context, error) {
	lang, err := lookupLanguage(language)
	if err != nil {
		return nil, err
	}
	id := "default-" + lang.name
	if c, err := m.get(id); err == nil {
		return c, nil
	}
	c, err := m.create(id, api.CodeContextRequest{Language: lang.name})
	if e, ok := err.(*Error); ok && e.Code == api.CodeConflict && !m.isClosed() {
		return m.get(id) // created by a concurrent call
	}
	return c, err
}

func (m *Manager) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// Get describes a context.
func (m *Manager) Get(id string) (api.CodeContext, error) {
	c, err := m.get(id)
	if err != nil {
		return api.CodeContext{}, err
	}
	return c.describe(), nil
}

// List describes every context, oldest first.
func (m *Manager) List() []api.CodeContext {
	m.mu.Lock()
	cs := make([]*Context, 0, len(m.order))
	for _, id := range m.order {
		cs = append(cs, m.contexts[id])
	}
	m.mu.Unlock()
	out := make([]api.CodeContext, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.describe())
	}
	return out
}

// Len counts the contexts.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.contexts)
}

// Delete kills a context's interpreter and forgets it.
func (m *Manager) Delete(id string) error {
	m.mu.Lock()
	c, ok := m.contexts[id]
	if ok {
		delete(m.contexts, id)
		m.order = slices.DeleteFunc(m.order, func(x string) bool { return x == id })
	}
	m.mu.Unlock()
	if !ok {
		return errorf(api.CodeNotFound, "code context %s not found", id)
	}
	c.close()
	return nil
}

// Restart replaces a context's interpreter with a fresh one.
func (m *Manager) Restart(id string) (api.CodeContext, error) {
	c, err := m.get(id)
	if err != nil {
		return api.CodeContext{}, err
	}
	if err := c.restart(); err != nil {
		return api.CodeContext{}, err
	}
	return c.describe(), nil
}

// Interrupt interrupts the cell running in a context, if any.
func (m *Manager) Interrupt(id string) (api.CodeContext, error) {
	c, err := m.get(id)
	if err != nil {
		return api.CodeContext{}, err
	}
	c.interrupt()
	return c.describe(), nil
}

// Close kills every context; later creates fail.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	cs := m.contexts
	m.contexts = map[string]*Context{}
	m.order = nil
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() { defer wg.Done(); c.close() }()
	}
	wg.Wait()
}

func hasNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}
