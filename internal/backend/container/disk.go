package container

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"golang.org/x/sys/unix"
)

// makeDisk creates a sparse ext4 image of sizeMiB at img and mounts it at
// mnt through a loop device that detaches itself on unmount.
func makeDisk(img, mnt string, sizeMiB int64) error {
	f, err := os.OpenFile(img, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err := f.Truncate(sizeMiB << 20); err != nil {
		f.Close()
		return err
	}
	f.Close()
	out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal",
		"-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", img).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mkfs.ext4: %v: %s", err, strings.TrimSpace(string(out)))
	}
	if err := os.MkdirAll(mnt, 0o700); err != nil {
		return err
	}
	return loopMount(img, mnt)
}

// loopMount attaches img, an ext4 image, to a free loop device with
// autoclear and mounts it, naming the device in img's loopRecord first.
func loopMount(img, mnt string) error {
	return loopMountFS(img, mnt, "ext4", "discard")
}

// loopMountFS attaches img to a free loop device with autoclear and direct
// I/O and mounts it at mnt as fstype with options opts, naming the device
// in img+".loop" first (see loopRecord).
func loopMountFS(img, mnt, fstype, opts string) error {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("loop-control: %w", err)
	}
	defer ctl.Close()
	backing, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer backing.Close()
	for attempt := 0; attempt < 20; attempt++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return fmt.Errorf("loop get free: %w", err)
		}
		dev := fmt.Sprintf("/dev/loop%d", n)
		if err := os.WriteFile(img+".loop", []byte(filepath.Base(dev)), 0o600); err != nil {
			return fmt.Errorf("loop record: %w", err)
		}
		lf, err := os.OpenFile(dev, os.O_RDWR, 0)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				unix.Mknod(dev, unix.S_IFBLK|0o660, int(unix.Mkdev(7, uint32(n))))
				lf, err = os.OpenFile(dev, os.O_RDWR, 0)
			}
			if err != nil {
				return fmt.Errorf("open %s: %w", dev, err)
			}
		}
		cfg := unix.LoopConfig{Fd: uint32(backing.Fd())}
		// Direct I/O: the image's blocks are cached once, by the ext4
		// on top, not a second time in the image file's page cache
		// (the kernel falls back to buffered I/O where the backing
		// file system cannot do direct I/O).
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR | unix.LO_FLAGS_DIRECT_IO
		copy(cfg.Info.File_name[:], img)
		err = unix.IoctlLoopConfigure(int(lf.Fd()), &cfg)
		if errors.Is(err, unix.EBUSY) {
			lf.Close() // another process took it first
			continue
		}
		if err != nil {
			lf.Close()
			return fmt.Errorf("loop configure: %w", err)
		}
		err = unix.Mount(dev, mnt, fstype, unix.MS_NOSUID|unix.MS_NODEV, opts)
		if err != nil {
			unix.IoctlSetInt(int(lf.Fd()), unix.LOOP_CLR_FD, 0)
		}
		lf.Close() // autoclear detaches once unmounted
		if err != nil {
			return fmt.Errorf("mount disk: %w", err)
		}
		return nil
	}
	return errors.New("no free loop device")
}

// mountOverlay mounts the sandbox root: the template read-only below, the
// sandbox's disk above.
func mountOverlay(lower, upper, work, target string) error {
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	return overlay(target, []string{lower}, upper, work, "")
}

// overlay mounts an overlay of lowers (top first), upper and work at
// target, with extra options. The layers are named by descriptors
// (/proc/self/fd/N), which is what the sandbox then reads in its
// /proc/self/mountinfo instead of the host's state-directory paths.
func overlay(target string, lowers []string, upper, work, extra string) error {
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	name := func(p string) (string, error) {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", fmt.Errorf("overlay layer %s: %w", p, err)
		}
		fds = append(fds, fd)
		return "/proc/self/fd/" + strconv.Itoa(fd), nil
	}
	names := make([]string, 0, len(lowers))
	for _, l := range lowers {
		n, err := name(l)
		if err != nil {
			return err
		}
		names = append(names, n)
	}
	u, err := name(upper)
	if err != nil {
		return err
	}
	w, err := name(work)
	if err != nil {
		return err
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", strings.Join(names, ":"), u, w)
	if extra != "" {
		opts += "," + extra
	}
	if len(opts) >= 4000 {
		return fmt.Errorf("%w: the template has too many layers for one overlay mount (%d)", sandbox.ErrInvalid, len(lowers))
	}
	if err := unix.Mount("overlay", target, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount overlay: %w", err)
	}
	return nil
}

// unmountAll unmounts every mount point at or below dir, deepest first.
func unmountAll(dir string) error {
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	var errs []error
	for i := len(mounts) - 1; i >= 0; i-- {
		if err := unmount(mounts[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func unmount(p string) error {
	var err error
	for i := 0; i < 50; i++ {
		err = unix.Unmount(p, 0)
		if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Last resort: detach lazily so the state can still be removed.
	if err2 := unix.Unmount(p, unix.MNT_DETACH); err2 == nil {
		return nil
	}
	return fmt.Errorf("unmount %s: %w", p, err)
}

// mountsUnder lists mount points at or below dir in mount order.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dir = filepath.Clean(dir)
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out, sc.Err()
}

// unescapeMount undoes the octal escapes of /proc/self/mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// loopRecord is the file, next to a sandbox's disk.img, naming the loop
// device its disk was last attached to ("loop7"). It is written before
// the device is configured, so that after a crash detachLoops finds that
// device without scanning every loop device on the host (which costs
// more the more sandboxes there are: 15 ms with 500 devices).
const loopRecord = "disk.img.loop"

// detachLoops detaches the loop device whose backing file is under dir
// (left behind when a crash hit between attach and mount; autoclear
// detaches it on unmount otherwise). The device named by dir's
// loopRecord is checked; only without a record (a sandbox made before
// records were kept) are all devices scanned.
func detachLoops(dir string) {
	rec, err := os.ReadFile(filepath.Join(dir, loopRecord))
	if err == nil {
		if name := strings.TrimSpace(string(rec)); loopName.MatchString(name) {
			detachLoop(dir, name)
		}
		return
	}
	if _, err := os.Stat(filepath.Join(dir, "disk.img")); err != nil {
		return // no disk, no loop device
	}
	ents, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, bf := range ents {
		detachLoop(dir, filepath.Base(filepath.Dir(filepath.Dir(bf))))
	}
}

var loopName = regexp.MustCompile(`^loop[0-9]{1,7}$`)

// detachLoop detaches loop device name if its backing file is under dir.
func detachLoop(dir, name string) {
	b, err := os.ReadFile(filepath.Join("/sys/block", name, "loop", "backing_file"))
	if err != nil {
		return // not attached
	}
	p := strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)")
	if !strings.HasPrefix(p, dir+"/") {
		return // attached to another sandbox's disk since
	}
	if lf, err := os.OpenFile("/dev/"+name, os.O_RDWR, 0); err == nil {
		unix.IoctlSetInt(int(lf.Fd()), unix.LOOP_CLR_FD, 0)
		lf.Close()
	}
}
