package network

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// The sandboxes' network namespaces are pinned (kept alive while no
// process is in them, and found again after a restart) by bind mounts,
// as `ip netns` does. Those mounts are not made in the host's mount
// namespace: every mount there is one more entry that each new mount
// namespace copies (the runtime makes at least two per create: 4.98 ms
// for `unshare -m` at 23 mounts, 12.85 ms at 5,023) and that every reader
// of the host's mountinfo parses on each change.
//
// They are made in a mount namespace of the daemon's own, the pin
// namespace: a tmpfs as its root, holding /netns/<id> (the pins) and
// /proc, and nothing of the host's. One thread of the daemon lives in it
// (pins.serve) and makes and removes the pins; everyone else, the OCI
// runtime included, reaches a pin through that thread's root:
// /proc/<pid>/task/<tid>/root/netns/<id>. The namespace itself is pinned
// on the host by one bind mount, <state>/netns.mnt, so that the pins
// outlive a crash of the daemon and a restart joins them.

const (
	pinsFile  = "netns.mnt" // under the state dir: the host's pin of the pin namespace
	pinsDir   = "netns"     // under the state dir: where the tmpfs root was mounted, before the pivot
	nsfsMagic = 0x6e736673  // statfs f_type of nsfs
)

// pins is the pin namespace and the thread that works in it.
type pins struct {
	dir, file string // <state>/netns, <state>/netns.mnt
	pid, tid  int    // the thread in the pin namespace

	mu      sync.Mutex
	closed  bool
	reqs    chan pinReq
	stopped chan struct{}
}

type pinReq struct {
	fn   func() error
	done chan error
}

// openPins joins the pin namespace of stateDir, or makes one.
func openPins(stateDir string) (*pins, error) {
	p := &pins{
		dir: filepath.Join(stateDir, pinsDir), file: filepath.Join(stateDir, pinsFile),
		reqs: make(chan pinReq), stopped: make(chan struct{}),
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return nil, err
	}
	existing, err := openPinNS(p.file)
	if err != nil && !errors.Is(err, errNoPinNS) {
		return nil, err
	}
	ready := make(chan error, 1)
	onOwnThread(func() { p.serve(existing, ready) })
	if err := <-ready; err != nil {
		return nil, fmt.Errorf("pin namespace: %w", err)
	}
	if existing != nil {
		existing.Close()
		return p, nil
	}
	// A new namespace: pin it on the host (from this thread, which is in
	// the host's mount namespace).
	f, err := os.OpenFile(p.file, os.O_RDONLY|os.O_CREATE, 0o444)
	if err == nil {
		f.Close()
		err = unix.Mount(p.task()+"/ns/mnt", p.file, "", unix.MS_BIND, "")
	}
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("pin namespace: pin %s: %w", p.file, err)
	}
	return p, nil
}

var errNoPinNS = errors.New("no pin namespace")

// isNSFS reports whether path is a namespace file (a bind mount of one).
func isNSFS(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == nsfsMagic
}

// openPinNS opens the mount namespace pinned at file, or errNoPinNS if
// nothing is pinned there.
func openPinNS(file string) (*os.File, error) {
	if !isNSFS(file) {
		return nil, errNoPinNS
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	typ, err := unix.IoctlRetInt(int(f.Fd()), unix.NS_GET_NSTYPE)
	if err != nil || typ != unix.CLONE_NEWNS {
		f.Close()
		return nil, fmt.Errorf("%s is not a mount namespace", file)
	}
	return f, nil
}

// serve runs on a thread of its own (onOwnThread) for the daemon's life:
// it joins existing (or makes a new pin namespace), reports on ready, then
// runs requests in the namespace until stop.
func (p *pins) serve(existing *os.File, ready chan<- error) {
	var err error
	if existing != nil {
		err = joinPinNS(existing)
	} else {
		err = makePinNS(p.dir)
	}
	p.pid, p.tid = unix.Getpid(), unix.Gettid()
	ready <- err
	if err != nil {
		close(p.stopped)
		return
	}
	for r := range p.reqs {
		r.done <- r.fn()
	}
	close(p.stopped)
}

// joinPinNS moves the calling thread (one of its own: onOwnThread) into
// the pin namespace f, whose root becomes its root and cwd.
func joinPinNS(f *os.File) error {
	if err := unix.Unshare(unix.CLONE_FS); err != nil { // root and cwd of this thread alone
		return fmt.Errorf("join: %w", err)
	}
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("join: %w", err)
	}
	for _, d := range []string{"/netns", "/proc/self"} {
		if _, err := os.Stat(d); err != nil {
			return fmt.Errorf("join: not a pin namespace: %w", err)
		}
	}
	return nil
}

// makePinNS moves the calling thread (one of its own: onOwnThread) into a
// new mount namespace whose root is a tmpfs mounted on dir, holding
// /netns and /proc, and from which every mount of the host is gone.
func makePinNS(dir string) error {
	steps := []struct {
		what string
		do   func() error
	}{
		// CLONE_FS: the root and cwd to pivot are this thread's alone.
		{"unshare", func() error { return unix.Unshare(unix.CLONE_FS | unix.CLONE_NEWNS) }},
		// Nothing done here may reach the host.
		{"make / private", func() error { return unix.Mount("", "/", "", unix.MS_PRIVATE|unix.MS_REC, "") }},
		{"mount tmpfs", func() error {
			return unix.Mount("paddock-pins", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=755,size=64k")
		}},
		{"mkdir", func() error {
			return errors.Join(os.Mkdir(dir+"/netns", 0o755), os.Mkdir(dir+"/proc", 0o555))
		}},
		// /proc/self/fd/N is how a pin is made from a namespace's
		// descriptor (pin).
		{"mount proc", func() error {
			return unix.Mount("proc", dir+"/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
		}},
		{"chdir", func() error { return unix.Chdir(dir) }},
		// The tmpfs becomes the root; the host's mounts, stacked under
		// it, are detached: none of them is held by this namespace.
		{"pivot_root", func() error { return unix.PivotRoot(".", ".") }},
		{"detach the host's mounts", func() error { return unix.Unmount(".", unix.MNT_DETACH) }},
		{"chdir /", func() error { return unix.Chdir("/") }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			return fmt.Errorf("make: %s: %w", s.what, err)
		}
	}
	return nil
}

// do runs fn on the thread in the pin namespace.
func (p *pins) do(fn func() error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("pin namespace closed")
	}
	r := pinReq{fn: fn, done: make(chan error, 1)}
	p.reqs <- r
	return <-r.done
}

// stop ends the thread in the pin namespace.
func (p *pins) stop() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.reqs)
	}
	p.mu.Unlock()
	<-p.stopped
}

// close stops the thread and, when no namespace is pinned any more,
// unpins the pin namespace from the host too (it then ends). It returns
// how many pins are left.
func (p *pins) close() (int, error) {
	ids, err := p.list()
	p.stop()
	if err != nil || len(ids) > 0 {
		return len(ids), err
	}
	return 0, unpinHost(p.file)
}

// unpinHost removes the host's pin of a pin namespace.
func unpinHost(file string) error {
	if err := unix.Unmount(file, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", file, err)
	}
	if err := os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// task is the /proc directory of the thread in the pin namespace.
func (p *pins) task() string {
	return "/proc/" + strconv.Itoa(p.pid) + "/task/" + strconv.Itoa(p.tid)
}

// root is the pin namespace's root as any thread of any process sees it.
func (p *pins) root() string { return p.task() + "/root" }

// path is the pin of sandbox id's namespace, as the runtime must name it.
func (p *pins) path(id string) string { return p.root() + "/netns/" + id }

// list returns the ids with a pin, or a pin's file (a pin being made or
// removed when the daemon stopped).
func (p *pins) list() ([]string, error) {
	ents, err := os.ReadDir(p.root() + "/netns")
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		ids = append(ids, e.Name())
	}
	return ids, nil
}

// pin bind-mounts the network namespace open at nsFD onto /netns/<id>
// (which must not exist).
func (p *pins) pin(id string, nsFD int) error {
	return p.do(func() error {
		f, err := os.OpenFile("/netns/"+id, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
		if err != nil {
			return err
		}
		f.Close()
		if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(nsFD), "/netns/"+id, "", unix.MS_BIND, ""); err != nil {
			os.Remove("/netns/" + id)
			return fmt.Errorf("bind-mount netns: %w", err)
		}
		return nil
	})
}

// unpin removes sandbox id's pin. A missing pin is not an error. The
// namespace lives on while a process (a running sandbox) is in it.
func (p *pins) unpin(id string) error {
	return p.do(func() error { return removePin("/netns/" + id) })
}

// removePin unmounts and removes a pin file.
func removePin(path string) error {
	err := unix.Unmount(path, unix.MNT_DETACH)
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// pinned reports whether /netns/<id> is a mount in the pin namespace.
func (p *pins) pinned(id string) (bool, error) {
	b, err := os.ReadFile(p.task() + "/mountinfo")
	if err != nil {
		return false, err
	}
	return mountedAt(b, "/netns/"+id), nil
}

// mountedAt reports whether mountinfo lists a mount at target.
func mountedAt(mountinfo []byte, target string) bool {
	for _, line := range strings.Split(string(mountinfo), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == target {
			return true
		}
	}
	return false
}

// migrateHostPins moves namespaces pinned on the host, under <state>/netns
// (where daemons before the pin namespace pinned them), into the pin
// namespace, and removes the host's pins and that directory's mount.
func (m *Manager) migrateHostPins() error {
	ents, err := os.ReadDir(m.pins.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		host := filepath.Join(m.pins.dir, e.Name())
		if validID(e.Name()) && isNSFS(host) {
			if err := m.pinFrom(e.Name(), host); err != nil {
				errs = append(errs, err)
				continue
			}
			m.log.Info("network: moved a pinned namespace off the host", "id", e.Name())
		}
		errs = append(errs, removePin(host))
	}
	if err := unix.Unmount(m.pins.dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		errs = append(errs, fmt.Errorf("unmount %s: %w", m.pins.dir, err))
	}
	return errors.Join(errs...)
}

// pinFrom pins the namespace pinned at host path as id.
func (m *Manager) pinFrom(id, host string) error {
	fd, err := unix.Open(host, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := m.pins.pin(id, fd); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("move pin %s: %w", id, err)
	}
	return nil
}

// Close stops the manager's thread in the pin namespace and returns how
// many sandbox namespaces are still pinned. When none is, the pin
// namespace ends too; otherwise the next manager on this state directory
// joins it.
func (m *Manager) Close() (pinned int, err error) { return m.pins.close() }
