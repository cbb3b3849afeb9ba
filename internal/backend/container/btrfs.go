package container

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The btrfs ioctls the quota disk mode uses (linux/btrfs.h). x/sys has no
// wrappers for them, so the numbers and argument structs are spelled out
// here: ioctl numbers are _IOC(dir, 0x94, nr, size), dir 1 = write, 2 =
// read, 3 = both.
const (
	btrfsIocSync         = 0x00009408 // _IO(0x94, 8)
	btrfsIocSubvolCreate = 0x5000940E // _IOW(0x94, 14, btrfsVolArgs)
	btrfsIocSnapDestroy  = 0x5000940F // _IOW(0x94, 15, btrfsVolArgs)
	btrfsIocInoLookup    = 0xD0009412 // _IOWR(0x94, 18, btrfsInoLookupArgs)
	btrfsIocFSInfo       = 0x8400941F // _IOR(0x94, 31, [1024]byte)
	btrfsIocQuotaCtl     = 0xC0109428 // _IOWR(0x94, 40, btrfsQuotaCtlArgs)
	btrfsIocQgroupCreate = 0x4010942A // _IOW(0x94, 42, btrfsQgroupCreateArgs)
	btrfsIocQgroupLimit  = 0x8030942B // _IOR(0x94, 43, btrfsQgroupLimitArgs)

	btrfsQuotaCtlEnable       = 1 // full qgroup accounting (backref walks)
	btrfsQuotaCtlEnableSimple = 4 // simple quotas (kernel 6.7+): charge the allocating subvolume
	btrfsQgroupLimitMaxRfer   = 1 // btrfsQgroupLimit.MaxRfer is set
	btrfsFirstFreeObjectID    = 256
	btrfsFSTreeObjectID       = 5 // the top-level subvolume
)

// btrfsVolArgs is struct btrfs_ioctl_vol_args (4096 bytes).
type btrfsVolArgs struct {
	Fd   int64
	Name [4088]byte
}

// btrfsInoLookupArgs is struct btrfs_ioctl_ino_lookup_args (4096 bytes).
type btrfsInoLookupArgs struct {
	TreeID   uint64
	ObjectID uint64
	Name     [4080]byte
}

// btrfsQuotaCtlArgs is struct btrfs_ioctl_quota_ctl_args.
type btrfsQuotaCtlArgs struct {
	Cmd    uint64
	Status uint64
}

// btrfsQgroupCreateArgs is struct btrfs_ioctl_qgroup_create_args.
type btrfsQgroupCreateArgs struct {
	Create   uint64 // 1 create, 0 remove
	QgroupID uint64
}

// btrfsQgroupLimitArgs is struct btrfs_ioctl_qgroup_limit_args.
type btrfsQgroupLimitArgs struct {
	QgroupID uint64
	Flags    uint64
	MaxRfer  uint64 // bytes referenced by the subvolume, data and metadata
	MaxExcl  uint64
	RsvRfer  uint64
	RsvExcl  uint64
}

func ioctlPtr(fd int, req uintptr, arg unsafe.Pointer) error {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg))
	if e != 0 {
		return e
	}
	return nil
}

func volArgs(name string) (*btrfsVolArgs, error) {
	if name == "" || strings.Contains(name, "/") || len(name) >= 4088 {
		return nil, fmt.Errorf("bad subvolume name %q", name)
	}
	a := new(btrfsVolArgs)
	copy(a.Name[:], name)
	return a, nil
}

// subvolCreate creates subvolume name in directory parent.
func subvolCreate(parent, name string) error {
	return subvolIoctl(parent, name, btrfsIocSubvolCreate, "create", nil)
}

// subvolIoctl runs the volume ioctl req (create, destroy) naming
// subvolume name on the directory parent. An ioctl error is reported as
// failing to <what> the subvolume, unless it is ok (nil: none is).
func subvolIoctl(parent, name string, req uintptr, what string, ok error) error {
	a, err := volArgs(name)
	if err != nil {
		return err
	}
	fd, err := unix.Open(parent, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := ioctlPtr(fd, req, unsafe.Pointer(a)); err != nil && (ok == nil || !errors.Is(err, ok)) {
		return fmt.Errorf("%s subvolume %s: %w", what, filepath.Join(parent, name), err)
	}
	return nil
}

// subvolDestroy deletes subvolume name in parent with everything in it.
// The call returns at once; the kernel frees the blocks in the
// background. A missing subvolume is fine.
func subvolDestroy(parent, name string) error {
	return subvolIoctl(parent, name, btrfsIocSnapDestroy, "delete", unix.ENOENT)
}

// btrfsSync commits the file system at mnt and wakes its cleaner, which
// frees deleted subvolumes (otherwise it runs every commit interval, 30 s).
func btrfsSync(mnt string) error {
	fd, err := unix.Open(mnt, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return ioctlPtr(fd, btrfsIocSync, nil)
}

// subvolID returns the id of the subvolume holding path.
func subvolID(path string) (uint64, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	a := &btrfsInoLookupArgs{ObjectID: btrfsFirstFreeObjectID}
	if err := ioctlPtr(fd, btrfsIocInoLookup, unsafe.Pointer(a)); err != nil {
		return 0, fmt.Errorf("subvolume id of %s: %w", path, err)
	}
	return a.TreeID, nil
}

// btrfsFSID returns the file system's uuid as sysfs names it
// (/sys/fs/btrfs/<uuid>).
func btrfsFSID(mnt string) (string, error) {
	fd, err := unix.Open(mnt, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	var buf [1024]byte // struct btrfs_ioctl_fs_info_args; fsid at offset 16
	if err := ioctlPtr(fd, btrfsIocFSInfo, unsafe.Pointer(&buf)); err != nil {
		return "", fmt.Errorf("btrfs fs info %s: %w", mnt, err)
	}
	u := buf[16:32]
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
}

// quotaEnable turns on quota groups on the file system at mnt: simple
// quotas where the kernel has them (cheap: each extent is charged to the
// subvolume that allocated it), else full qgroup accounting. It reports
// the mode the kernel took.
func quotaEnable(mnt string) (string, error) {
	fd, err := unix.Open(mnt, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	a := &btrfsQuotaCtlArgs{Cmd: btrfsQuotaCtlEnableSimple}
	if err := ioctlPtr(fd, btrfsIocQuotaCtl, unsafe.Pointer(a)); err == nil {
		return "simple", nil
	}
	a = &btrfsQuotaCtlArgs{Cmd: btrfsQuotaCtlEnable}
	if err := ioctlPtr(fd, btrfsIocQuotaCtl, unsafe.Pointer(a)); err != nil {
		return "", fmt.Errorf("enable btrfs quota on %s: %w", mnt, err)
	}
	return "full", nil
}

// qgroupLimit sets the referenced-bytes limit of subvolume id's level-0
// qgroup (0 = no limit). mnt is any path on the file system.
func qgroupLimit(mnt string, id uint64, maxBytes uint64) error {
	fd, err := unix.Open(mnt, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	a := &btrfsQgroupLimitArgs{QgroupID: id, Flags: btrfsQgroupLimitMaxRfer, MaxRfer: maxBytes}
	if maxBytes == 0 {
		a.MaxRfer = ^uint64(0) // the kernel's "no limit"
	}
	if err := ioctlPtr(fd, btrfsIocQgroupLimit, unsafe.Pointer(a)); err != nil {
		return fmt.Errorf("qgroup limit 0/%d: %w", id, err)
	}
	return nil
}

// qgroupRemove removes subvolume id's level-0 qgroup, which the kernel
// keeps (as "stale") after the subvolume is deleted. It fails (EBUSY)
// while the deleted subvolume's blocks are still being freed; a missing
// qgroup is fine.
func qgroupRemove(mnt string, id uint64) error {
	fd, err := unix.Open(mnt, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	a := &btrfsQgroupCreateArgs{Create: 0, QgroupID: id}
	if err := ioctlPtr(fd, btrfsIocQgroupCreate, unsafe.Pointer(a)); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove qgroup 0/%d: %w", id, err)
	}
	return nil
}

// qgroupUsage reads subvolume id's bytes in use (referenced plus what is
// reserved for writes not yet committed) and limit from sysfs
// (/sys/fs/btrfs/<fsid>/qgroups/0_<id>, kernel 5.9+); limit 0 = none.
func qgroupUsage(fsid string, id uint64) (used, limit int64, err error) {
	dir := filepath.Join("/sys/fs/btrfs", fsid, "qgroups", "0_"+strconv.FormatUint(id, 10))
	read := func(name string) (int64, error) {
		b, err := readSmall(filepath.Join(dir, name))
		if err != nil {
			return 0, err
		}
		b = bytes.TrimSpace(b)
		if string(b) == "none" {
			return 0, nil
		}
		n, err := strconv.ParseUint(string(b), 10, 64)
		if err != nil || n > 1<<62 {
			return 0, err
		}
		return int64(n), nil
	}
	if used, err = read("referenced"); err != nil {
		return 0, 0, err
	}
	// referenced moves only when a transaction commits (up to 30 s
	// later); what was written since is reserved, and the quota is
	// enforced on both. Usage is their sum, so a file just written shows.
	for _, rsv := range []string{"rsv_data", "rsv_meta_pertrans", "rsv_meta_prealloc"} {
		if n, err := read(rsv); err == nil {
			used += n
		}
	}
	limit, _ = read("max_referenced")
	return used, limit, nil
}

// qgroupIDs lists the level-0 qgroups of the file system (sysfs), the
// top-level subvolume's excluded.
func qgroupIDs(fsid string) []uint64 {
	ents, _ := os.ReadDir(filepath.Join("/sys/fs/btrfs", fsid, "qgroups"))
	var out []uint64
	for _, e := range ents {
		lvl, id, ok := strings.Cut(e.Name(), "_")
		if !ok || lvl != "0" {
			continue
		}
		if n, err := strconv.ParseUint(id, 10, 64); err == nil && n != btrfsFSTreeObjectID {
			out = append(out, n)
		}
	}
	return out
}
