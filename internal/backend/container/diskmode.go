package container

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// A sandbox's disk is made in the backend's disk mode (Config.DiskMode)
// and keeps the mode it was made in, recorded in its sandbox.json (meta.Disk;
// empty for sandboxes made before modes existed, which are all loop
// disks). So a daemon switched from one mode to the other still stops,
// starts, snapshots and deletes the sandboxes of the other mode; the disk
// pool is opened whenever its image exists, whatever the mode.

// openDisks checks the disk mode's tools and opens the disk pool when the
// mode needs it or an earlier daemon made one.
func (b *Backend) openDisks() error {
	switch b.cfg.DiskMode {
	case "":
		b.cfg.DiskMode = DiskQuota
	case DiskQuota, DiskLoop:
	default:
		return fmt.Errorf("disk mode %q: want %q or %q", b.cfg.DiskMode, DiskQuota, DiskLoop)
	}
	if b.cfg.DiskMode == DiskLoop {
		if _, err := os.Stat(filepath.Join(b.cfg.StateDir, "disks.img")); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
	}
	size := b.cfg.DiskPoolMiB
	if size <= 0 {
		size = defaultPoolMiB(b.cfg.StateDir)
	}
	p, err := openDiskPool(b.cfg.StateDir, size, b.log)
	if err != nil {
		return fmt.Errorf("disk pool: %w", err)
	}
	b.pool = p
	return nil
}

// defaultPoolMiB is the size of the file system holding stateDir (the
// sparse image can never hold more), at least 1 GiB.
func defaultPoolMiB(stateDir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(stateDir, &st); err != nil {
		return 1024
	}
	return max(int64(st.Blocks)*st.Bsize>>20, 1024)
}

// diskDirs returns the overlay upper and work directories of sandbox id.
func (b *Backend) diskDirs(id string, m *meta) (upper, work string) {
	d := filepath.Join(b.dir(id), "disk")
	if m.Disk == DiskQuota {
		d = filepath.Join(b.cfg.StateDir, "disks", id)
	}
	return filepath.Join(d, "upper"), filepath.Join(d, "work")
}

// makeSandboxDisk makes the disk of a new sandbox in mode m.Disk.
func (b *Backend) makeSandboxDisk(id string, m *meta, diskMiB int64) error {
	if m.Disk != DiskQuota {
		return makeDisk(filepath.Join(b.dir(id), "disk.img"), filepath.Join(b.dir(id), "disk"), diskMiB)
	}
	if b.pool == nil {
		return errors.New("no disk pool")
	}
	return b.pool.create(id, diskMiB)
}

// hasDisk reports whether sandbox id's disk exists (a stopped sandbox
// keeps it).
func (b *Backend) hasDisk(id string, m *meta) error {
	p := filepath.Join(b.dir(id), "disk.img")
	if m.Disk == DiskQuota {
		p = filepath.Join(b.cfg.StateDir, "disks", id)
	}
	_, err := os.Stat(p)
	return err
}

// removePoolDisk deletes sandbox id's disk in the pool, if any. It runs
// before the sandbox's directory is removed: while that directory (and
// its sandbox.json) is there, recovery finds the sandbox and finishes a
// delete cut short.
func (b *Backend) removePoolDisk(id string) error {
	if b.pool == nil {
		return nil
	}
	return b.pool.remove(id)
}

// diskUsage returns the bytes sandbox id's disk holds.
func (b *Backend) diskUsage(id string, m *meta) (int64, error) {
	if m.Disk == DiskQuota {
		if b.pool == nil {
			return 0, errors.New("no disk pool")
		}
		return b.pool.usage(id)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Join(b.dir(id), "disk"), &st); err != nil {
		return 0, err
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize, nil
}
