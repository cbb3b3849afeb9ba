package container

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

var _ sandbox.Stopper = (*Backend)(nil)

// Stop and start. A stopped sandbox is its directory holding only
// sandbox.json (its metadata: uid slot, template layers, runtime) and
// disk.img (its writable layer, an ext4 image): no process, runtime
// state, cgroup, mount or loop device, so it survives daemon restarts and
// host reboots unchanged. Its uid slot stays reserved (New re-reads every
// sandbox.json) because the files in its disk belong to that uid range.
// Start re-creates everything else from those two files.

// keptFiles are what a stopped sandbox's directory keeps.
// (loopRecord is kept too: it names no attached device once stopped, and
// spares Destroy a scan of every loop device.)
var keptFiles = map[string]bool{"sandbox.json": true, "disk.img": true, loopRecord: true}

// Stop ends every process of sandbox id and releases everything but its
// disk image and metadata. Idempotent; it also tidies a sandbox whose
// stop or start was cut short.
func (b *Backend) Stop(ctx context.Context, id string) error {
	if !validID(id) {
		return fmt.Errorf("%w: bad sandbox id %q", sandbox.ErrInvalid, id)
	}
	m, err := b.readMeta(id)
	if err != nil {
		return fmt.Errorf("%w: sandbox %s has no kept state: %v", sandbox.ErrNotFound, id, err)
	}
	if err := b.hasDisk(id, m); err != nil {
		return fmt.Errorf("%w: sandbox %s has no disk: %v", sandbox.ErrNotFound, id, err)
	}
	var errs []error
	if rt := b.runtimes[m.Runtime]; rt != nil {
		if st, err := rt.status(ctx, id); err == nil && st == "paused" {
			b.Resume(ctx, id) // frozen tasks may not die (cgroup v1)
		}
		killInit(b.cfg.CgroupParent, id, filepath.Join(b.dir(id), "init.pid"))
		defer b.exits.unwatch(id)
		if err := rt.delete(ctx, id); err != nil {
			errs = append(errs, err)
			os.RemoveAll(filepath.Join(rt.root, id))
		}
	}
	killCgroups(b.cfg.CgroupParent, id)
	dir := b.dir(id)
	if err := b.unmountSandbox(id, dir); err != nil {
		return fmt.Errorf("stop %s: %w", id, err)
	}
	detachLoops(dir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("stop %s: %w", id, err)
	}
	for _, e := range ents {
		if !keptFiles[e.Name()] {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("stop %s: %w", id, err)
			}
		}
	}
	if len(errs) > 0 {
		b.log.Warn("stop: runtime errors (cleaned up by hand)", "sandbox", id, "err", errors.Join(errs...))
	}
	return nil
}

// Start boots stopped sandbox spec.ID again from its disk image with
// spec's template, resources, env and network. When it fails the sandbox
// is stopped again, its files intact.
func (b *Backend) Start(ctx context.Context, spec sandbox.Spec) (info sandbox.Info, retErr error) {
	if err := b.Stop(ctx, spec.ID); err != nil { // leftovers of a crash, if any
		return info, err
	}
	m, err := b.readMeta(spec.ID)
	if err != nil {
		return info, err
	}
	root, err := b.rootFor(spec)
	if err != nil {
		return info, err
	}
	defer func() {
		if retErr != nil {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if err := b.Stop(sctx, spec.ID); err != nil {
				b.log.Error("start rollback failed", "sandbox", spec.ID, "err", err)
			}
		}
	}()
	m.Template, m.Runtime, m.Lower = spec.Template, root.runtime.name, root.lower()
	mb, _ := json.Marshal(m)
	dir := b.dir(spec.ID)
	if err := store.WriteFileAtomic(filepath.Join(dir, "sandbox.json"), mb, 0o600); err != nil {
		return info, err
	}
	if err := b.mountKeptDisk(ctx, spec.ID, m, spec.Resources.DiskMiB); err != nil {
		return info, err
	}
	upper, work := b.diskDirs(spec.ID, m)
	if err := os.MkdirAll(work, 0o700); err != nil {
		return info, err
	}
	if spec.Network != nil {
		if err := prepareNetwork(upper, int(m.UIDBase), spec.Network); err != nil {
			return info, fmt.Errorf("network files: %w", err)
		}
	}
	return b.boot(ctx, spec, root, *m)
}

// mountKeptDisk makes a stopped sandbox's disk usable again: a loop
// disk is checked and mounted; a disk in the pool is there already and
// gets diskMiB (if set) as its limit.
func (b *Backend) mountKeptDisk(ctx context.Context, id string, m *meta, diskMiB int64) error {
	if m.Disk == DiskQuota {
		if b.pool == nil {
			return errors.New("no disk pool")
		}
		if diskMiB > 0 {
			return b.pool.setLimit(id, diskMiB)
		}
		return nil
	}
	dir := b.dir(id)
	img, mnt := filepath.Join(dir, "disk.img"), filepath.Join(dir, "disk")
	if err := checkDisk(ctx, img); err != nil {
		return err
	}
	if err := os.MkdirAll(mnt, 0o700); err != nil {
		return err
	}
	if err := loopMount(img, mnt); err != nil {
		return fmt.Errorf("disk: %w", err)
	}
	return nil
}

// checkDisk repairs what can be repaired automatically in a disk image
// that was not unmounted cleanly (a host crash); a clean one is skipped at
// once. Without e2fsck it does nothing.
func checkDisk(ctx context.Context, img string) error {
	fsck, err := exec.LookPath("e2fsck")
	if err != nil {
		return nil
	}
	out, err := exec.CommandContext(ctx, fsck, "-p", img).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() <= 1 { // 1: errors corrected
		return nil
	}
	if err != nil {
		return fmt.Errorf("e2fsck %s: %v: %s", img, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// boot writes the OCI spec of sandbox spec.ID (its disk is ready), mounts
// its root in a mount namespace of its own, runs it there and waits for
// its agent.
func (b *Backend) boot(ctx context.Context, spec sandbox.Spec, root *sandboxRoot, m meta) (sandbox.Info, error) {
	dir := b.dir(spec.ID)
	upper, work := b.diskDirs(spec.ID, &m)
	rootfs := filepath.Join(dir, "rootfs")
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		return sandbox.Info{}, err
	}
	s, err := buildSpec(specParams{
		ID: spec.ID, CgroupParent: b.cfg.CgroupParent, Rootfs: rootfs, HostMounts: root.hostMounts, UIDBase: m.UIDBase,
		Resources: spec.Resources, Env: root.env, CgroupV1: b.cgroupV1, HasMemsw: b.hasMemsw,
		SpareIdle: b.spareIdle(spec), IdleExec: b.idleExec(root.runtime),
	})
	if err != nil {
		return sandbox.Info{}, err
	}
	if spec.Network != nil {
		joinNetwork(s, spec.Network)
	}
	rt := root.runtime
	if rt.gvisor() {
		if err := gvisorSocket(s, dir, int(m.UIDBase)); err != nil {
			return sandbox.Info{}, err
		}
	}
	s.Process.Env = dedupeEnv(s.Process.Env)
	if err := rt.prepareSpec(spec.ID, s); err != nil {
		return sandbox.Info{}, err
	}
	sb, _ := json.MarshalIndent(s, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "config.json"), sb, 0o600); err != nil {
		return sandbox.Info{}, err
	}
	var lf *os.File
	if !rt.gvisor() {
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: b.socketPath(spec.ID), Net: "unix"})
		if err != nil {
			return sandbox.Info{}, fmt.Errorf("agent socket: %w", err)
		}
		ln.SetUnlinkOnClose(false)
		lf, err = ln.File()
		ln.Close()
		if err != nil {
			return sandbox.Info{}, err
		}
		defer lf.Close()
	}
	// The root is mounted where only the runtime and the sandbox see it
	// (mountns.go).
	err = inPrivateMounts(func() error {
		if err := root.mount(b, dir, upper, work, rootfs, m.UIDBase); err != nil {
			return err
		}
		return rt.run(ctx, spec.ID, dir, lf)
	})
	if err != nil {
		return sandbox.Info{}, err
	}
	// The agent must survive the sandbox's own OOM kills; only the host can
	// lower its score (a user namespace cannot).
	if pb, err := os.ReadFile(filepath.Join(dir, "init.pid")); err == nil {
		pid := strings.TrimSpace(string(pb))
		os.WriteFile("/proc/"+pid+"/oom_score_adj", []byte("-998"), 0)
		if n, err := strconv.Atoi(pid); err == nil {
			if err := b.exits.watch(spec.ID, n); err != nil {
				b.log.Warn("exit watch", "sandbox", spec.ID, "err", err)
				go reap(n)
			}
		}
	}
	if err := b.waitReady(ctx, spec.ID); err != nil {
		return sandbox.Info{}, err
	}
	return sandbox.Info{ID: spec.ID, Runtime: root.runtime.name}, nil
}

var _ sandbox.Killer = (*Backend)(nil)

// Kill ends every process of running sandbox id at once: SIGKILL to its
// init through a pidfd (the kernel then kills the rest of its PID
// namespace), waiting until its cgroup is empty. Runtime state, mounts,
// disk and uid slot stay for Destroy. gVisor's sandbox is not killed this
// way (its processes live in its own kernel): there Kill reports
// ErrUnsupported and the caller destroys at once.
func (b *Backend) Kill(ctx context.Context, id string) error {
	if !validID(id) {
		return fmt.Errorf("%w: bad sandbox id %q", sandbox.ErrInvalid, id)
	}
	m, err := b.readMeta(id)
	if err != nil {
		return fmt.Errorf("%w: sandbox %s: %v", sandbox.ErrNotFound, id, err)
	}
	if rt := b.runtimes[m.Runtime]; rt == nil || rt.gvisor() {
		return errors.ErrUnsupported
	}
	killInit(b.cfg.CgroupParent, id, filepath.Join(b.dir(id), "init.pid"))
	alive, err := b.Alive(ctx, id)
	if err != nil {
		return err
	}
	if alive {
		return fmt.Errorf("sandbox %s: init still alive after SIGKILL", id)
	}
	return nil
}
