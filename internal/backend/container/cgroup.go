package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const cgroupRoot = "/sys/fs/cgroup"

// cgroupDirs returns every cgroup directory of sandbox id under parent
// that exists, in all v1 controllers and in the unified hierarchy (a
// hierarchy reached through a symlink, such as cpu → cpu,cpuacct, once per
// name). It looks each path up: a glob would read parent's directory,
// which holds every sandbox, in every hierarchy, and a mass delete would
// then cost the square of the sandboxes on the host.
func cgroupDirs(parent, id string) []string {
	roots := []string{cgroupRoot}
	ents, _ := os.ReadDir(cgroupRoot)
	for _, e := range ents {
		roots = append(roots, filepath.Join(cgroupRoot, e.Name()))
	}
	var out []string
	for _, r := range roots {
		if p := filepath.Join(r, parent, id); isDir(p) {
			out = append(out, p)
		}
	}
	return out
}

// isDir reports whether p is a directory (following symlinks).
func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// subCgroups returns dir and every directory below it, parents first. It
// reads directory entries only (a cgroup directory holds dozens of files,
// which a walk would stat one by one).
func subCgroups(dir string) []string {
	out := []string{dir}
	for i := 0; i < len(out); i++ {
		ents, err := os.ReadDir(out[i])
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.IsDir() {
				out = append(out, filepath.Join(out[i], e.Name()))
			}
		}
	}
	return out
}

// cgroupIDs lists sandbox ids that have a cgroup under parent.
func cgroupIDs(parent string) []string {
	seen := map[string]bool{}
	for _, pattern := range []string{
		filepath.Join(cgroupRoot, parent, "*"),
		filepath.Join(cgroupRoot, "*", parent, "*"),
	} {
		m, _ := filepath.Glob(pattern)
		for _, p := range m {
			if fi, err := os.Stat(p); err == nil && fi.IsDir() && validID(filepath.Base(p)) {
				seen[filepath.Base(p)] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	return out
}

// killCgroups SIGKILLs every process left in the sandbox's cgroups and
// removes them, deepest first. It is the backstop when the runtime's own
// state is gone.
func killCgroups(parent, id string) {
	dirs := cgroupDirs(parent, id)
	for round := 0; round < 50; round++ {
		alive := false
		for _, d := range dirs {
			for _, p := range subCgroups(d) {
				b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
				if err != nil {
					continue
				}
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
						syscall.Kill(pid, syscall.SIGKILL)
						alive = true
					}
				}
			}
		}
		if !alive {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, d := range dirs {
		sub := subCgroups(d)
		for i := len(sub) - 1; i >= 0; i-- {
			for try := 0; try < 20; try++ {
				if err := os.Remove(sub[i]); err == nil || os.IsNotExist(err) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
}

// killInit SIGKILLs the sandbox's init (the agent, PID 1 of its pid
// namespace, so the kernel kills every other process in it too) and waits
// up to a second for the sandbox's cgroup to empty. It is much faster than
// the runtime's own forced delete, which polls every 100 ms. The pid is
// checked through a pidfd against the sandbox's cgroup, so a recycled pid
// is never signalled.
func killInit(parent, id, pidFile string) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if !inCgroup(pid, parent, id) {
		return
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
		return
	}
	procs := ""
	for _, d := range cgroupDirs(parent, id) {
		if p := filepath.Join(d, "cgroup.procs"); strings.Contains(d, "/pids/") || procs == "" {
			procs = p
		}
	}
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(procs)
		if err != nil || len(strings.TrimSpace(string(b))) == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// inCgroup reports whether process pid is in sandbox id's cgroup under
// parent (or one below it), in any hierarchy. A process that has exited
// is not, in cgroup v1 (it reads as the root cgroup until reaped).
func inCgroup(pid int, parent, id string) bool {
	cg, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false
	}
	want := "/" + parent + "/" + id
	for _, line := range strings.Split(string(cg), "\n") {
		// hierarchy-ID:controllers:path
		if _, rest, ok := strings.Cut(line, ":"); ok {
			if _, path, ok := strings.Cut(rest, ":"); ok && (path == want || strings.HasPrefix(path, want+"/")) {
				return true
			}
		}
	}
	return false
}

// Close removes what the backend made on the host for itself, once no
// sandbox of it is left: its cgroup parent in every hierarchy and the
// disk pool's mount (see diskpool.go). With
// sandboxes left (they keep running across a daemon restart) it removes
// nothing. It is meant for the daemon's clean stop; the backend must not
// be used after it.
func (b *Backend) Close(ctx context.Context) error {
	ids, err := b.List(ctx)
	if err != nil {
		return err
	}
	if len(ids) > 0 {
		b.log.Info("sandboxes left running; keeping the cgroup parent", "cgroup_parent", b.cfg.CgroupParent, "sandboxes", len(ids))
		return nil
	}
	var errs []error
	if b.pool != nil {
		// No sandbox left to use it: unmount the disk pool (its loop
		// device detaches itself); the next start mounts it again.
		if err := unmount(b.pool.mnt); err != nil {
			errs = append(errs, fmt.Errorf("disk pool: %w", err))
		}
	}
	// runsc bind-mounts a network namespace file at <root>/null-netns
	// (for sandboxes without a network of their own) and never
	// unmounts it: with no sandbox left it is ours to remove.
	nulls, _ := filepath.Glob(filepath.Join(b.cfg.StateDir, "runtime", "*", "null-netns"))
	for _, p := range nulls {
		if err := unmount(p); err != nil {
			errs = append(errs, fmt.Errorf("runtime netns file: %w", err))
		}
	}
	return errors.Join(append(errs, removeCgroupParent(b.cfg.CgroupParent))...)
}

// removeCgroupParent removes the empty cgroup directory parent in the
// unified hierarchy and in every v1 controller. A parent that still has
// children is left and reported.
func removeCgroupParent(parent string) error {
	var dirs []string
	for _, pattern := range []string{
		filepath.Join(cgroupRoot, parent),
		filepath.Join(cgroupRoot, "*", parent),
	} {
		m, _ := filepath.Glob(pattern)
		dirs = append(dirs, m...)
	}
	var errs []error
	for _, d := range dirs {
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() {
			continue
		}
		if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
			errs = append(errs, fmt.Errorf("remove cgroup parent: %w", err))
		}
	}
	return errors.Join(errs...)
}
