package container

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// The mounts a sandbox's directory can hold on the host are always the
// same few, made by this package: the disk image at disk (loop disk
// mode), and, from daemons older than the private mount namespace
// (mountns.go), the root overlay at rootfs and the idmapped image layers
// at l/<n>, which new sandboxes have only inside their own mount
// namespace (a path that is no mount point costs one lookup). Destroy of a sandbox
// this process mounted unmounts exactly those (unmountKnown) instead of
// reading every mount of the host (/proc/self/mountinfo grows with every
// sandbox: 13 ms a read at 2,000 sandboxes, and a mass delete reads it
// once per sandbox). A sandbox whose directory was there when the backend
// started (left by an earlier daemon, perhaps one that crashed halfway
// through a mount) is unmounted by scanning, once (unmountAll).

// unmountKnown unmounts the mounts the backend makes in sandbox directory
// dir, the upper ones first; a path that is not (or no longer) a mount
// point is skipped. A busy mount is detached (MNT_DETACH) rather than
// waited for: the sandbox's processes are dead by then, and what still
// holds a mount (a host process with a descriptor into it) keeps only its
// own view.
func unmountKnown(dir string) error {
	paths := []string{filepath.Join(dir, "rootfs")}
	if ents, err := os.ReadDir(filepath.Join(dir, "l")); err == nil {
		for _, e := range ents {
			if _, err := strconv.Atoi(e.Name()); err == nil {
				paths = append(paths, filepath.Join(dir, "l", e.Name()))
			}
		}
	}
	paths = append(paths, filepath.Join(dir, "disk"))
	var errs []error
	for _, p := range paths {
		// A mount may be stacked twice (a racing retry): unmount until
		// the path is no mount point.
		for i := 0; i < 4; i++ {
			err := unix.Unmount(p, unix.UMOUNT_NOFOLLOW)
			if errors.Is(err, unix.EBUSY) {
				err = unix.Unmount(p, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
			}
			if err == nil {
				continue
			}
			if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
			}
			break
		}
	}
	return errors.Join(errs...)
}

// inheritedDir reports, and forgets, whether sandbox id's directory was
// there when the backend started: its mounts are then found by scanning.
func (b *Backend) inheritedDir(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.inherited[id] {
		return false
	}
	delete(b.inherited, id)
	return true
}

// unmountSandbox unmounts everything in sandbox id's directory dir.
func (b *Backend) unmountSandbox(id, dir string) error {
	if b.inheritedDir(id) {
		if err := unmountAll(dir); err != nil {
			b.mu.Lock()
			b.inherited[id] = true // scan again on the next attempt
			b.mu.Unlock()
			return err
		}
		return nil
	}
	return unmountKnown(dir)
}
