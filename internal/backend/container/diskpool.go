package container

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"golang.org/x/sys/unix"
)

// The quota disk mode (DiskQuota). Instead of an ext4 image, loop device
// and mount per sandbox, every sandbox's writable layer lives on one
// shared file system, the disk pool:
//
//	<state>/disks.img       sparse btrfs image, made on first start
//	<state>/disks.img.loop  the loop device it was last attached to
//	<state>/disks/          where it is mounted (one loop device, direct
//	                        I/O, discard=async so deleted files punch
//	                        holes in the image)
//	<state>/disks/<id>/     one btrfs subvolume per sandbox holding its
//	                        upper/ and work/, with a quota group limit of
//	                        disk_mib (bytes referenced, data and metadata)
//
// This is the way Docker's overlay2 `size=` works on xfs project quotas.
// It is btrfs rather than ext4 project quotas because project quotas on
// ext4 need a kernel with CONFIG_QFMT_V2 (and xfs quotas CONFIG_XFS_QUOTA),
// which kernels built for VMs often leave out, while btrfs quota groups
// come with btrfs itself. The subvolume's id (given by the file system, so
// nothing has to be allocated or recorded) names its quota group; a
// deleted subvolume's quota group is removed once the kernel has freed
// its blocks. btrfs has no inode limit: every file's metadata is charged
// to the same byte limit.
//
// Root inside a sandbox cannot reach any of this: the pool is reached
// only through the sandbox's overlay, which passes no btrfs ioctls, and
// quota group changes need CAP_SYS_ADMIN in the host's user namespace.

// Disk modes (Config.DiskMode).
const (
	DiskQuota = "quota" // a subvolume with a quota on the shared disk pool (default)
	DiskLoop  = "loop"  // an ext4 image, loop device and mount per sandbox
)

// btrfsMagic is the f_type statfs reports for btrfs.
const btrfsMagic = 0x9123683E

// poolMinFreeMiB: below this much free space in the pool, creates fail
// with a clear error instead of sandboxes failing their first writes.
const poolMinFreeMiB = 256

// diskPool is the shared file system of the quota disk mode.
type diskPool struct {
	img, mnt string
	fsid     string // its uuid, naming /sys/fs/btrfs/<fsid>
	log      *slog.Logger

	mu       sync.Mutex
	stale    map[uint64]bool // quota groups of deleted subvolumes still to remove
	lastReap time.Time
}

// reapEvery spaces the attempts to remove stale quota groups: the kernel
// frees a deleted subvolume in the background (every commit interval, 30
// s by default), and until then each attempt fails, costing an ioctl
// that joins a transaction; a mass delete would otherwise pay that on
// every delete.
const reapEvery = 10 * time.Second

// openDiskPool mounts the pool at <stateDir>/disks, making its image of
// sizeMiB first if there is none. A pool still mounted (a restart) is
// used as it is, never mounted twice; a loop device left attached by a
// crash before the mount is detached first.
func openDiskPool(stateDir string, sizeMiB int64, log *slog.Logger) (*diskPool, error) {
	p := &diskPool{img: filepath.Join(stateDir, "disks.img"), mnt: filepath.Join(stateDir, "disks"),
		log: log, stale: map[uint64]bool{}}
	if err := os.MkdirAll(p.mnt, 0o711); err != nil {
		return nil, err
	}
	mounted, err := p.mounted(stateDir)
	if err != nil {
		return nil, err
	}
	if !mounted {
		if _, err := os.Stat(p.img); errors.Is(err, fs.ErrNotExist) {
			if err := makePoolImage(p.img, sizeMiB); err != nil {
				return nil, err
			}
		}
		if rec, err := os.ReadFile(p.img + ".loop"); err == nil {
			if name := strings.TrimSpace(string(rec)); loopName.MatchString(name) {
				detachLoop(stateDir, name) // attached by a crash before the mount
			}
		}
		if err := loopMountFS(p.img, p.mnt, "btrfs", "discard=async"); err != nil {
			return nil, fmt.Errorf("mount disk pool %s: %w", p.img, err)
		}
	}
	if err := os.Chmod(p.mnt, 0o711); err != nil {
		return nil, err
	}
	if p.fsid, err = btrfsFSID(p.mnt); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join("/sys/fs/btrfs", p.fsid, "qgroups")); err != nil {
		mode, err := quotaEnable(p.mnt)
		if err != nil {
			return nil, err
		}
		log.Info("disk pool: quota groups enabled", "mode", mode)
	}
	return p, nil
}

// mounted reports whether the pool's image is mounted at p.mnt already;
// something else mounted there is an error.
func (p *diskPool) mounted(stateDir string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Stat(p.mnt, &st); err != nil {
		return false, err
	}
	if err := unix.Stat(stateDir, &parent); err != nil {
		return false, err
	}
	if st.Dev == parent.Dev {
		return false, nil
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(p.mnt, &sfs); err != nil {
		return false, err
	}
	if sfs.Type == btrfsMagic {
		if fsid, err := btrfsFSID(p.mnt); err == nil {
			devs, _ := os.ReadDir(filepath.Join("/sys/fs/btrfs", fsid, "devices"))
			for _, d := range devs {
				b, err := os.ReadFile(filepath.Join("/sys/block", d.Name(), "loop", "backing_file"))
				if err == nil && strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)") == p.img {
					return true, nil
				}
			}
		}
	}
	return false, fmt.Errorf("%s is a mount point of something other than the disk pool %s; unmount it", p.mnt, p.img)
}

// makePoolImage makes a sparse btrfs image of sizeMiB at img, atomically:
// a crash leaves no half-made image under that name.
func makePoolImage(img string, sizeMiB int64) error {
	mkfs, err := exec.LookPath("mkfs.btrfs")
	if err != nil {
		return fmt.Errorf("disk mode %q needs mkfs.btrfs to make %s (install btrfs-progs, or run with --disk-mode=loop)", DiskQuota, img)
	}
	tmp := img + ".tmp"
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(sizeMiB << 20)
	f.Close()
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("disk pool image: %w", err)
	}
	// single data and metadata profiles: one device, no duplicate copies.
	out, err := exec.Command(mkfs, "-q", "-f", "-m", "single", "-d", "single", "-L", "paddock-disks", tmp).CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("mkfs.btrfs: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return os.Rename(tmp, img)
}

// dir is sandbox id's subvolume.
func (p *diskPool) dir(id string) string { return filepath.Join(p.mnt, id) }

// create makes sandbox id's subvolume with a limit of diskMiB. A
// subvolume of that name left by a crash is replaced.
func (p *diskPool) create(id string, diskMiB int64) error {
	var sfs unix.Statfs_t
	if err := unix.Statfs(p.mnt, &sfs); err == nil {
		if free := int64(sfs.Bavail) * sfs.Bsize >> 20; free < poolMinFreeMiB {
			return fmt.Errorf("%w: the sandbox disk pool %s is full (%d MiB free of %d MiB): delete sandboxes, or grow it (README, Sandbox disks)",
				sandbox.ErrNoCapacity, p.img, free, int64(sfs.Blocks)*sfs.Bsize>>20)
		}
	}
	// The image is sparse: what the pool holds must also fit in the file
	// system under it, or the pool's writes fail under every sandbox at
	// once. Refuse new disks while that file system is nearly full too.
	if err := unix.Statfs(filepath.Dir(p.img), &sfs); err == nil {
		if free := int64(sfs.Bavail) * sfs.Bsize >> 20; free < poolMinFreeMiB {
			return fmt.Errorf("%w: the file system holding the sandbox disk pool %s is full (%d MiB free): free space there, or delete sandboxes",
				sandbox.ErrNoCapacity, p.img, free)
		}
	}
	if _, err := os.Lstat(p.dir(id)); err == nil {
		if err := p.remove(id); err != nil {
			return err
		}
	}
	if err := subvolCreate(p.mnt, id); err != nil {
		return err
	}
	return p.setLimit(id, diskMiB)
}

// setLimit sets sandbox id's limit to diskMiB (0: none).
func (p *diskPool) setLimit(id string, diskMiB int64) error {
	sid, err := subvolID(p.dir(id))
	if err != nil {
		return err
	}
	return qgroupLimit(p.mnt, sid, uint64(diskMiB)<<20)
}

// usage returns the bytes sandbox id's subvolume holds.
func (p *diskPool) usage(id string) (int64, error) {
	sid, err := subvolID(p.dir(id))
	if err != nil {
		return 0, err
	}
	used, _, err := qgroupUsage(p.fsid, sid)
	return used, err
}

// remove deletes sandbox id's subvolume (the kernel frees its blocks in
// the background) and its quota group, or remembers the quota group for
// a later attempt. A missing subvolume is fine.
func (p *diskPool) remove(id string) error {
	sid, err := subvolID(p.dir(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if sid == btrfsFSTreeObjectID { // a plain directory (never made so, but be sure)
		return os.RemoveAll(p.dir(id))
	}
	if err := subvolDestroy(p.mnt, id); err != nil {
		return err
	}
	p.mu.Lock()
	p.stale[sid] = true
	reap := time.Since(p.lastReap) >= reapEvery
	if reap {
		p.lastReap = time.Now()
	}
	p.mu.Unlock()
	if reap {
		p.reapQgroups(64)
	}
	return nil
}

// reapQgroups tries to remove at most n quota groups of deleted
// subvolumes (each attempt is one ioctl; one still being freed stays).
func (p *diskPool) reapQgroups(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for sid := range p.stale {
		if n == 0 {
			return
		}
		n--
		if err := qgroupRemove(p.mnt, sid); err == nil {
			delete(p.stale, sid)
		}
	}
}

// sweep removes, after a restart, the subvolumes of sandboxes that have
// no directory (keep says which do) and remembers the quota groups no
// subvolume uses for removal.
func (p *diskPool) sweep(keep map[string]bool) {
	ents, _ := os.ReadDir(p.mnt)
	live := map[uint64]bool{}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if !validID(e.Name()) || !keep[e.Name()] {
			if err := p.remove(e.Name()); err != nil {
				p.log.Warn("disk pool: removing an orphaned sandbox disk", "name", e.Name(), "err", err)
			}
			continue
		}
		if sid, err := subvolID(p.dir(e.Name())); err == nil {
			live[sid] = true
		}
	}
	p.mu.Lock()
	for _, sid := range qgroupIDs(p.fsid) {
		if !live[sid] {
			p.stale[sid] = true
		}
	}
	p.mu.Unlock()
	p.reapQgroups(1 << 20)
}
