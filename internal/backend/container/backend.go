package container

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/paddock-sandbox/paddock/internal/agent"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
	"github.com/paddock-sandbox/paddock/internal/template"
	"golang.org/x/sys/unix"
)

var (
	_ sandbox.Backend     = (*Backend)(nil)
	_ sandbox.ExitWatcher = (*Backend)(nil)
)

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

func validID(id string) bool { return idPattern.MatchString(id) }

// Template configures a named template. Runtime picks the OCI runtime for
// it. Without a source it is the embedded "base" root; with one of Image
// (a registry reference), OCILayout, Tarball (with Tag to pick an image)
// or Dir (a root directory) the daemon imports that image as a shared
// template (see images.go) and Config.Images resolves it.
type Template struct {
	Runtime   string `json:"runtime,omitempty"`
	Image     string `json:"image,omitempty"`
	OCILayout string `json:"oci_layout,omitempty"`
	Tarball   string `json:"tarball,omitempty"`
	Tag       string `json:"tag,omitempty"`
	Dir       string `json:"dir,omitempty"`
}

// Config configures the backend.
type Config struct {
	// StateDir is the daemon's state directory; the backend uses its
	// containers/, templates/ and runtime/ subdirectories.
	StateDir string
	// AgentBinary is the static paddock-agent to install in templates.
	AgentBinary string
	// ShimBinary is the static paddock-shim installed next to the agent
	// (default: paddock-shim next to AgentBinary, when there is one;
	// without it the agent runs its own binary as the shim).
	ShimBinary string
	// Runtimes maps runtime names to binaries; DefaultRuntime must be one.
	Runtimes       map[string]string
	DefaultRuntime string
	// Templates adds named templates besides "base".
	Templates map[string]Template
	// Images resolves any other template name (and config templates with
	// a source) to image layers; nil means only base templates exist.
	Images func(name string) (*template.Root, error)
	// UIDBase is the first host uid mapped to a sandbox; sandbox n maps
	// uid 0 to UIDBase + n*65536. MaxSlots bounds n.
	UIDBase  uint32
	MaxSlots int
	// CgroupParent is the cgroup under which sandboxes' cgroups are made
	// (in every hierarchy). Each daemon on a host needs its own: recovery
	// destroys every cgroup under it that is not a live sandbox. Default
	// "paddock" for the default state directory, else
	// "paddock-<hash of the state directory>".
	CgroupParent string
	// DiskMode is how sandboxes' writable layers are stored: DiskQuota
	// (default: a subvolume with a quota on one shared disk pool, see
	// diskpool.go) or DiskLoop (an ext4 image, loop device and mount per
	// sandbox).
	DiskMode string
	// DiskPoolMiB is the size of the disk pool's sparse image when it is
	// first made (default: the size of the file system holding StateDir).
	DiskPoolMiB int64
	// SpareIdle retires a guest agent's spare command shim after that long
	// without an exec (0: never); warm-pool sandboxes (Spec.Pooled) keep
	// theirs until the manager hands them out.
	SpareIdle time.Duration
	// Hibernate gives agents under runc and crun paddock-idle (IdleBinary,
	// default: next to AgentBinary, when there is one): once its spare
	// retired and nothing runs, an agent execs it in its own place.
	Hibernate  bool
	IdleBinary string
	Log        *slog.Logger
}

// DefaultCgroupParent derives the cgroup parent of a state directory.
func DefaultCgroupParent(stateDir string) string {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		abs = stateDir
	}
	if abs == "/var/lib/paddock" {
		return "paddock"
	}
	h := sha256.Sum256([]byte(abs))
	return "paddock-" + hex.EncodeToString(h[:4])
}

// Backend runs sandboxes as OCI containers. It is safe for concurrent use.
type Backend struct {
	cfg      Config
	log      *slog.Logger
	base     *baseTemplate
	runtimes map[string]*ociRuntime
	cgroupV1 bool
	hasMemsw bool
	hasIdle  bool // paddock-idle is installed next to the agent

	exits *exitWatch
	stats statsCache // stats.go

	mu        sync.Mutex
	slots     map[int]string  // uid slot → sandbox id
	inherited map[string]bool // sandbox directories found at start (destroy.go)
	img       *imageState
	pool      *diskPool // the quota mode's disk pool; nil if there is none
}

// meta is persisted per sandbox so Destroy and recovery know what it used.
type meta struct {
	ID       string `json:"id"`
	Slot     int    `json:"slot"`
	UIDBase  uint32 `json:"uid_base"`
	Template string `json:"template"`
	Runtime  string `json:"runtime"`
	Lower    string `json:"lower"`
	// Disk is the disk mode the sandbox was made in: DiskQuota, or empty
	// for a loop disk (diskmode.go).
	Disk string `json:"disk,omitempty"`
}

// New prepares the state directories and the base template.
func New(cfg Config) (*Backend, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.UIDBase == 0 {
		cfg.UIDBase = 1 << 20
	}
	if cfg.MaxSlots <= 0 {
		cfg.MaxSlots = 4096
	}
	if cfg.CgroupParent == "" {
		cfg.CgroupParent = DefaultCgroupParent(cfg.StateDir)
	}
	if !validID(cfg.CgroupParent) {
		return nil, fmt.Errorf("bad cgroup parent %q", cfg.CgroupParent)
	}
	for _, d := range []string{cfg.StateDir, filepath.Join(cfg.StateDir, "containers"), filepath.Join(cfg.StateDir, "runtime")} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return nil, err
		}
		if err := os.Chmod(d, 0o711); err != nil {
			return nil, err
		}
	}
	if err := checkSearchable(cfg.StateDir); err != nil {
		return nil, err
	}
	exits, err := newExitWatch(cfg.Log)
	if err != nil {
		return nil, fmt.Errorf("exit watch: %w", err)
	}
	b := &Backend{cfg: cfg, log: cfg.Log, runtimes: map[string]*ociRuntime{}, slots: map[int]string{}, inherited: map[string]bool{}, exits: exits}
	if err := b.openDisks(); err != nil {
		return nil, err
	}
	if b.cfg.DiskMode == DiskLoop {
		if _, err := exec.LookPath("mkfs.ext4"); err != nil {
			return nil, errors.New("mkfs.ext4 not found (install e2fsprogs)")
		}
	}
	for name, path := range cfg.Runtimes {
		root := filepath.Join(cfg.StateDir, "runtime", name)
		if err := os.MkdirAll(root, 0o700); err != nil {
			return nil, err
		}
		b.runtimes[name] = newOCIRuntime(name, path, root, cfg.Log)
	}
	if _, ok := b.runtimes[cfg.DefaultRuntime]; !ok {
		return nil, fmt.Errorf("default runtime %q not configured", cfg.DefaultRuntime)
	}
	for name, t := range cfg.Templates {
		if t.Runtime != "" && b.runtimes[t.Runtime] == nil {
			return nil, fmt.Errorf("template %q: runtime %q not configured", name, t.Runtime)
		}
	}
	_, err = os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers"))
	b.cgroupV1 = err != nil
	_, err = os.Stat(filepath.Join(cgroupRoot, "memory", "memory.memsw.limit_in_bytes"))
	b.hasMemsw = err == nil
	guest, err := guestBinariesOf(cfg)
	if err != nil {
		return nil, fmt.Errorf("base template: %w", err)
	}
	base, err := buildBase(cfg.StateDir, guest)
	if err != nil {
		return nil, fmt.Errorf("base template: %w", err)
	}
	b.base = base
	b.hasIdle = guest.idle != ""
	b.img = &imageState{userns: map[uint32]*os.File{}}
	if b.img.paddock, err = buildPaddockLayer(cfg.StateDir, guest); err != nil {
		return nil, fmt.Errorf("paddock layer: %w", err)
	}
	b.img.holder, _ = exec.LookPath("cat")
	keep := map[string]bool{base.dir: true, b.img.paddock: true}
	known := map[string]bool{}
	for _, id := range b.dirIDs() {
		b.inherited[id] = true
		if m, err := b.readMeta(id); err == nil {
			known[id] = true
			b.slots[m.Slot] = id
			for _, l := range strings.Split(m.Lower, ":") {
				keep[l] = true
			}
		}
	}
	gcTemplates(cfg.StateDir, keep)
	if b.pool != nil {
		b.pool.sweep(known) // disks of sandboxes whose directory is gone
	}
	return b, nil
}

// Templates lists the template names this backend serves.
func (b *Backend) Templates() []string {
	out := []string{"base"}
	for n := range b.cfg.Templates {
		if n != "base" {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func (b *Backend) dir(id string) string { return filepath.Join(b.cfg.StateDir, "containers", id) }

// socketPath is the agent's socket: made by the daemon in the sandbox's
// directory and handed in, or, under gVisor, made by the agent in the
// sock/ directory bound into the sandbox (see gvisorSocket).
func (b *Backend) socketPath(id string) string {
	if _, err := os.Stat(filepath.Join(b.dir(id), gvisorSockDir)); err == nil {
		return filepath.Join(b.dir(id), gvisorSockDir, "agent.sock")
	}
	return filepath.Join(b.dir(id), "agent.sock")
}

func (b *Backend) runtimeFor(template string) (*ociRuntime, error) {
	if template == "base" {
		if t, ok := b.cfg.Templates["base"]; ok && t.Runtime != "" {
			return b.runtimes[t.Runtime], nil
		}
		return b.runtimes[b.cfg.DefaultRuntime], nil
	}
	t, ok := b.cfg.Templates[template]
	if !ok {
		return nil, fmt.Errorf("%w: %q", sandbox.ErrUnknownTemplate, template)
	}
	if t.Runtime == "" {
		return b.runtimes[b.cfg.DefaultRuntime], nil
	}
	return b.runtimes[t.Runtime], nil
}

func (b *Backend) allocSlot(id string) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := 0; i < b.cfg.MaxSlots; i++ {
		if _, used := b.slots[i]; !used {
			b.slots[i] = id
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w: all %d uid ranges in use", sandbox.ErrNoCapacity, b.cfg.MaxSlots)
}

func (b *Backend) freeSlot(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s, owner := range b.slots {
		if owner == id {
			delete(b.slots, s)
		}
	}
}

// releaseSlot frees one slot.
func (b *Backend) releaseSlot(slot int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.slots, slot)
}

func (b *Backend) readMeta(id string) (*meta, error) {
	data, err := os.ReadFile(filepath.Join(b.dir(id), "sandbox.json"))
	if err != nil {
		return nil, err
	}
	m := new(meta)
	return m, json.Unmarshal(data, m)
}

// Create builds the sandbox's disk, root and spec, starts the agent and
// waits until it answers. On failure everything is rolled back.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (info sandbox.Info, retErr error) {
	if !validID(spec.ID) {
		return info, fmt.Errorf("%w: bad sandbox id %q", sandbox.ErrInvalid, spec.ID)
	}
	root, err := b.rootFor(spec)
	if err != nil {
		return info, err
	}
	rt := root.runtime
	slot, err := b.allocSlot(spec.ID)
	if err != nil {
		return info, err
	}
	dir := b.dir(spec.ID)
	if err := os.Mkdir(dir, 0o711); err != nil {
		b.releaseSlot(slot) // only this one: the id may own a live slot
		if errors.Is(err, fs.ErrExist) {
			return info, fmt.Errorf("%w: sandbox %s exists", sandbox.ErrConflict, spec.ID)
		}
		return info, fmt.Errorf("sandbox dir: %w", err)
	}
	defer func() {
		if retErr != nil {
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := b.Destroy(dctx, spec.ID); err != nil {
				b.log.Error("rollback failed", "sandbox", spec.ID, "err", err)
			}
		}
	}()
	m := meta{ID: spec.ID, Slot: slot, UIDBase: b.cfg.UIDBase + uint32(slot)*idRange,
		Template: spec.Template, Runtime: rt.name, Lower: root.lower(), Disk: b.cfg.DiskMode}
	if m.Disk == DiskLoop {
		m.Disk = "" // as sandboxes made before disk modes existed
	}
	mb, _ := json.Marshal(m)
	if err := store.WriteFileAtomic(filepath.Join(dir, "sandbox.json"), mb, 0o600); err != nil {
		return info, err
	}
	if err := b.makeSandboxDisk(spec.ID, &m, spec.Resources.DiskMiB); err != nil {
		return info, fmt.Errorf("disk: %w", err)
	}
	upper, work := b.diskDirs(spec.ID, &m)
	if err := prepareUpper(upper, int(m.UIDBase)); err != nil {
		return info, err
	}
	if spec.Network != nil {
		if err := prepareNetwork(upper, int(m.UIDBase), spec.Network); err != nil {
			return info, fmt.Errorf("network files: %w", err)
		}
	}
	if err := os.Mkdir(work, 0o700); err != nil {
		return info, err
	}
	return b.boot(ctx, spec, root, m)
}

// reap waits for a sandbox's init process once it has been reparented to
// the daemon (a child subreaper, see SetSubreaper), so that killed
// sandboxes never linger as zombies; the exit watch does so for the inits
// it watches, and this is its fallback. Inits of sandboxes adopted after
// a restart belong to the host's init instead.
func reap(pid int) {
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, 0, nil)
		if err != unix.EINTR {
			return
		}
	}
}

// SetSubreaper makes the calling process the reaper of the sandboxes it
// starts (the runtime exits after starting them). Call it once, early.
func SetSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// prepareUpper creates the writable layer's root and the directories a
// user expects to write to, owned by the sandbox's root.
func prepareUpper(upper string, uid int) error {
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{
		{"", 0o755}, {"workspace", 0o755}, {"root", 0o700}, {"tmp", os.ModeSticky | 0o777},
		{"home", 0o755}, {"home/user", 0o755}, {"run", 0o755}, {"var", 0o755},
		{"var/tmp", os.ModeSticky | 0o777}, {"opt", 0o755}, {"mnt", 0o755}, {"srv", 0o755},
		{"etc", 0o755}, {"usr", 0o755}, {"var/cache", 0o755}, {"var/lib", 0o755}, {"var/log", 0o755},
	} {
		p := filepath.Join(upper, d.path)
		if err := os.Mkdir(p, d.mode); err != nil && !os.IsExist(err) {
			return err
		}
		owner := uid
		if d.path == "home/user" {
			owner = uid + 1000
		}
		if err := os.Chown(p, owner, owner); err != nil {
			return err
		}
		if err := os.Chmod(p, d.mode); err != nil {
			return err
		}
	}
	return nil
}

// waitReady polls the agent's health endpoint until it answers.
func (b *Backend) waitReady(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ac := agent.NewClient(b.Dial)
	defer ac.CloseIdleConnections()
	var lastErr error
	for delay := time.Millisecond; ; delay = min(delay*2, 50*time.Millisecond) {
		err := ac.Health(ctx, id)
		if err == nil {
			return nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("agent did not start: %w", lastErr)
		case <-time.After(delay):
		}
	}
}

// Dial connects to the sandbox's agent socket.
func (b *Backend) Dial(ctx context.Context, id string) (net.Conn, error) {
	if !validID(id) {
		return nil, sandbox.ErrNotFound
	}
	c, err := dialSocket(ctx, b.socketPath(id))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", sandbox.ErrUnavailable, err)
	}
	return c, nil
}

// Alive reports whether the runtime still runs the sandbox. A watched
// sandbox (see exitWatch) is answered from its pidfd; any other is asked
// of the runtime, and watched from then on if it runs (a sandbox adopted
// after a restart) — if the pid the runtime reports is the sandbox's
// (in its cgroup) and has not exited. One without runtime state is not
// alive.
func (b *Backend) Alive(ctx context.Context, id string) (bool, error) {
	if known, alive := b.exits.state(id); known {
		return alive, nil
	}
	m, err := b.readMeta(id)
	if err != nil {
		return false, nil
	}
	rt := b.runtimes[m.Runtime]
	if rt == nil {
		return false, fmt.Errorf("runtime %q not configured", m.Runtime)
	}
	if !rt.gvisor() { // runc and crun keep a directory per container
		if _, err := os.Stat(filepath.Join(rt.root, id)); errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
	}
	st, pid, err := rt.state(ctx, id)
	if err != nil {
		return false, err
	}
	if st != "running" && st != "paused" {
		return false, nil
	}
	if pid <= 0 {
		return true, nil
	}
	alive, err := b.exits.adopt(id, pid, func(pid int) bool { return inCgroup(pid, b.cfg.CgroupParent, id) })
	if err != nil {
		b.log.Warn("exit watch", "sandbox", id, "err", err)
	}
	return alive, nil
}

// Exited returns, and forgets, the sandboxes whose init exited since the
// last call (sandbox.ExitWatcher).
func (b *Backend) Exited() []string { return b.exits.drain() }

// Destroy kills and removes everything the sandbox holds. Idempotent.
func (b *Backend) Destroy(ctx context.Context, id string) error {
	if !validID(id) {
		return fmt.Errorf("%w: bad sandbox id %q", sandbox.ErrInvalid, id)
	}
	var errs []error
	rts := make([]*ociRuntime, 0, len(b.runtimes))
	if m, err := b.readMeta(id); err == nil && b.runtimes[m.Runtime] != nil {
		rts = append(rts, b.runtimes[m.Runtime])
	} else {
		for _, rt := range b.runtimes {
			rts = append(rts, rt)
		}
	}
	killInit(b.cfg.CgroupParent, id, filepath.Join(b.dir(id), "init.pid"))
	defer b.exits.unwatch(id)
	if known, alive := b.exits.state(id); known && !alive && len(rts) == 1 && !rts[0].gvisor() {
		// The exit watch saw the init die, so no process is left: what
		// runc or crun would delete is its state directory and the
		// cgroups, which killCgroups removes. This saves running the
		// runtime binary once per delete. (runsc keeps more: it runs.)
		if err := os.RemoveAll(filepath.Join(rts[0].root, id)); err != nil {
			errs = append(errs, err)
		}
	} else {
		for _, rt := range rts {
			if err := rt.delete(ctx, id); err != nil {
				errs = append(errs, err)
				os.RemoveAll(filepath.Join(rt.root, id))
			}
		}
	}
	killCgroups(b.cfg.CgroupParent, id)
	b.stats.forget(id)
	dir := b.dir(id)
	if err := b.unmountSandbox(id, dir); err != nil {
		return errors.Join(append(errs, err)...)
	}
	detachLoops(dir)
	if err := b.removePoolDisk(id); err != nil {
		return errors.Join(append(errs, err)...)
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, err)
	}
	b.freeSlot(id)
	if len(errs) > 0 {
		b.log.Warn("destroy: runtime errors (cleaned up by hand)", "sandbox", id, "err", errors.Join(errs...))
	}
	return nil
}

// List returns every sandbox id with a directory, runtime state or cgroup.
func (b *Backend) List(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	for _, id := range b.dirIDs() {
		seen[id] = true
	}
	for _, rt := range b.runtimes {
		for _, id := range rt.ids() {
			seen[id] = true
		}
	}
	for _, id := range cgroupIDs(b.cfg.CgroupParent) {
		seen[id] = true
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out, nil
}

func (b *Backend) dirIDs() []string {
	ents, _ := os.ReadDir(filepath.Join(b.cfg.StateDir, "containers"))
	var out []string
	for _, e := range ents {
		if e.IsDir() && validID(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

// idleExec is the agent's --idle-exec under runtime rt: agents hibernate
// where Config.Hibernate asks for it and paddock-idle is installed, but not
// under gVisor (runsc), where the sandbox's memory is the sentry's.
func (b *Backend) idleExec(rt *ociRuntime) string {
	if !b.cfg.Hibernate || !b.hasIdle || rt.gvisor() {
		return ""
	}
	return idlePath
}

// spareIdle is the agent's --spare-idle for spec.
func (b *Backend) spareIdle(spec sandbox.Spec) time.Duration {
	if spec.Pooled {
		return 0
	}
	return b.cfg.SpareIdle
}
