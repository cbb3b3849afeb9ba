package container

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"golang.org/x/sys/unix"
)

// newTestPool makes a disk pool of 512 MiB in a temp dir and unmounts it
// (detaching its loop device) at the end of the test.
func newTestPool(t *testing.T) (*diskPool, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the disk pool tests need root (loop devices, mounts)")
	}
	state := t.TempDir()
	p, err := openDiskPool(state, 512, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unmountAll(p.mnt); err != nil {
			t.Error(err)
		}
	})
	return p, state
}

// writeZeros writes n MiB to path and returns the first error.
func writeZeros(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for i := 0; i < n; i++ {
		if _, err := f.Write(buf); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TestDiskPoolQuota: a sandbox's subvolume takes writes up to its limit
// and refuses more with EDQUOT (even from host root), reports its usage,
// and is gone with its quota group after remove.
func TestDiskPoolQuota(t *testing.T) {
	p, _ := newTestPool(t)
	if err := p.create("sb1", 16); err != nil {
		t.Fatal(err)
	}
	if err := p.create("sb2", 64); err != nil {
		t.Fatal(err)
	}
	if err := writeZeros(filepath.Join(p.dir("sb2"), "f"), 24); err != nil {
		t.Fatalf("24 MiB into a 64 MiB disk: %v", err)
	}
	err := writeZeros(filepath.Join(p.dir("sb1"), "f"), 32)
	if !errors.Is(err, syscall.EDQUOT) && !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("32 MiB into a 16 MiB disk: got %v, want EDQUOT", err)
	}
	used, err := p.usage("sb1")
	if err != nil {
		t.Fatal(err)
	}
	if used < 8<<20 || used > 17<<20 {
		t.Errorf("sb1 uses %d bytes, want about its 16 MiB limit", used)
	}
	used2, err := p.usage("sb2")
	if err != nil {
		t.Fatal(err)
	}
	if used2 < 24<<20 || used2 > 26<<20 {
		t.Errorf("sb2 uses %d bytes, want about 24 MiB", used2)
	}
	// Hardlinks across sandboxes fail: they are different subvolumes.
	if err := os.Link(filepath.Join(p.dir("sb2"), "f"), filepath.Join(p.dir("sb1"), "g")); !errors.Is(err, syscall.EXDEV) {
		t.Errorf("hardlink across sandboxes: %v, want EXDEV", err)
	}
	sid, err := subvolID(p.dir("sb1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.remove("sb1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.dir("sb1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sb1 still there after remove: %v", err)
	}
	if err := p.remove("sb1"); err != nil {
		t.Errorf("second remove: %v", err)
	}
	waitQgroupGone(t, p, sid)
	// A new sandbox of the same name starts empty, with its own limit.
	if err := p.create("sb1", 32); err != nil {
		t.Fatal(err)
	}
	if used, err := p.usage("sb1"); err != nil || used > 1<<20 {
		t.Errorf("recreated sb1 uses %d bytes (%v), want ~0", used, err)
	}
	if err := p.setLimit("sb1", 0); err != nil {
		t.Errorf("no limit: %v", err)
	}
}

// waitQgroupGone syncs the file system (waking its cleaner) and reaps quota groups until sid's
// is gone (the kernel frees a deleted subvolume's blocks in the
// background).
func waitQgroupGone(t *testing.T, p *diskPool, sid uint64) {
	t.Helper()
	qg := filepath.Join("/sys/fs/btrfs", p.fsid, "qgroups", "0_"+strconv.FormatUint(sid, 10))
	for i := 0; i < 200; i++ {
		if _, err := os.Stat(qg); errors.Is(err, os.ErrNotExist) {
			return
		}
		if err := btrfsSync(p.mnt); err != nil {
			t.Fatal(err)
		}
		p.reapQgroups(100)
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("quota group 0/%d of a deleted subvolume still there after 10 s", sid)
}

// TestDiskPoolReopen: opening the pool again while it is mounted (a
// daemon restart) neither mounts it twice nor loses sandboxes; after an
// unmount (a reboot) it is mounted again from its image; sweep removes
// the disks of sandboxes that no longer exist.
func TestDiskPoolReopen(t *testing.T) {
	p, state := newTestPool(t)
	for _, id := range []string{"keep", "orphan"} {
		if err := p.create(id, 16); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p.dir(id), "file"), []byte(id), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p2, err := openDiskPool(state, 512, log)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := mountsUnder(p.mnt); len(m) != 1 {
		t.Errorf("pool mounted %d times after reopening, want once: %v", len(m), m)
	}
	if err := unmountAll(p.mnt); err != nil {
		t.Fatal(err)
	}
	p3, err := openDiskPool(state, 512, log)
	if err != nil {
		t.Fatal(err)
	}
	if p3.fsid != p2.fsid {
		t.Errorf("remounted pool has fsid %s, want %s", p3.fsid, p2.fsid)
	}
	sid, err := subvolID(p3.dir("orphan"))
	if err != nil {
		t.Fatal(err)
	}
	p3.sweep(map[string]bool{"keep": true})
	if b, err := os.ReadFile(filepath.Join(p3.dir("keep"), "file")); err != nil || string(b) != "keep" {
		t.Errorf("kept sandbox's file after remount and sweep: %q, %v", b, err)
	}
	if _, err := os.Stat(p3.dir("orphan")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("orphaned disk still there after sweep: %v", err)
	}
	waitQgroupGone(t, p3, sid)
}

// TestDiskPoolFull: a pool without room refuses creates with a sentence.
func TestDiskPoolFull(t *testing.T) {
	p, _ := newTestPool(t)
	if err := p.create("big", 0); err != nil {
		t.Fatal(err)
	}
	writeZeros(filepath.Join(p.dir("big"), "f"), 600) // fills the 512 MiB pool
	err := p.create("next", 16)
	if err == nil || !strings.Contains(err.Error(), "disk pool") {
		t.Errorf("create in a full pool: %v, want a disk pool is full error", err)
	}
}

// TestDiskPoolHostFull: the pool's sparse image is larger than the file
// system under it; once that file system is nearly full, creates are
// refused (the pool's own free space says nothing of it), so the pool's
// writes never fail under every sandbox at once.
func TestDiskPoolHostFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the disk pool tests need root (loop devices, mounts)")
	}
	host := t.TempDir()
	if err := unix.Mount("tmpfs", host, "tmpfs", 0, "size=400m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unmount(host) })
	state := filepath.Join(host, "state")
	if err := os.Mkdir(state, 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := openDiskPool(state, 1024, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unmountAll(p.mnt); err != nil {
			t.Error(err)
		}
	})
	if err := p.create("first", 64); err != nil {
		t.Fatalf("create with room: %v", err)
	}
	if err := writeZeros(filepath.Join(host, "filler"), 200); err != nil {
		t.Fatal(err)
	}
	err = p.create("next", 64)
	if !errors.Is(err, sandbox.ErrNoCapacity) || !strings.Contains(err.Error(), "file system holding the sandbox disk pool") {
		t.Errorf("create with the host file system nearly full: %v, want no_capacity naming it", err)
	}
}

// BenchmarkSandboxDisk times making and deleting one sandbox's disk in
// each mode: loop (sparse ext4 image, mkfs.ext4, loop device, mount;
// unmount and remove) and quota (a subvolume with a quota group limit in
// the shared pool; delete it). go test -run '^$' -bench SandboxDisk.
func BenchmarkSandboxDisk(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Fatal("needs root")
	}
	b.Run("loop", func(b *testing.B) {
		dir := b.TempDir()
		var mk, rm time.Duration
		for i := 0; i < b.N; i++ {
			d := filepath.Join(dir, strconv.Itoa(i))
			os.Mkdir(d, 0o700)
			t0 := time.Now()
			if err := makeDisk(filepath.Join(d, "disk.img"), filepath.Join(d, "disk"), 256); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := unmountKnown(d); err != nil {
				b.Fatal(err)
			}
			if err := os.RemoveAll(d); err != nil {
				b.Fatal(err)
			}
			mk, rm = mk+t1.Sub(t0), rm+time.Since(t1)
		}
		b.ReportMetric(float64(mk.Microseconds())/float64(b.N)/1000, "create-ms")
		b.ReportMetric(float64(rm.Microseconds())/float64(b.N)/1000, "delete-ms")
	})
	b.Run("quota", func(b *testing.B) {
		state := b.TempDir()
		p, err := openDiskPool(state, 4096, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			b.Fatal(err)
		}
		defer unmountAll(p.mnt)
		var mk, rm time.Duration
		for i := 0; i < b.N; i++ {
			id := "s" + strconv.Itoa(i)
			t0 := time.Now()
			if err := p.create(id, 256); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := p.remove(id); err != nil {
				b.Fatal(err)
			}
			mk, rm = mk+t1.Sub(t0), rm+time.Since(t1)
		}
		b.ReportMetric(float64(mk.Microseconds())/float64(b.N)/1000, "create-ms")
		b.ReportMetric(float64(rm.Microseconds())/float64(b.N)/1000, "delete-ms")
	})
}
