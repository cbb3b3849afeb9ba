package container

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestUnmountKnown: every mount the backend makes in a sandbox directory
// (root overlay, idmapped layers, disk; one stacked twice) is gone after
// unmountKnown, a busy one included, without touching a mount elsewhere;
// a directory with none of them is no error.
func TestUnmountKnown(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := t.TempDir()
	other := t.TempDir()
	paths := []string{filepath.Join(dir, "rootfs"), filepath.Join(dir, "l", "0"), filepath.Join(dir, "l", "1"), filepath.Join(dir, "disk")}
	for _, p := range append(paths, other) {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", p, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
	}
	defer unix.Unmount(other, unix.MNT_DETACH)
	if err := unix.Mount("tmpfs", paths[3], "tmpfs", 0, "size=1m"); err != nil { // stacked
		t.Fatal(err)
	}
	busy, err := os.Open(paths[0]) // a descriptor into the root: busy
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(paths[1]); err != nil { // a working directory in a layer: busy
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	if err := unmountKnown(dir); err != nil {
		t.Fatal(err)
	}
	mounts, err := mountsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(mounts) != 0 {
		t.Errorf("left mounted: %v", mounts)
	}
	if m, _ := mountsUnder(other); len(m) != 1 {
		t.Errorf("a mount outside the sandbox directory: %v, want it kept", m)
	}
	if err := unmountKnown(t.TempDir()); err != nil {
		t.Errorf("a directory without mounts: %v", err)
	}
}

// TestDiskDirectIODetach: a sandbox disk's loop device does direct I/O
// (where the host's file system can), and unmountKnown releases it: the
// device detaches itself (autoclear), nothing is left for detachLoops.
func TestDiskDirectIODetach(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loop devices need root")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skip("no loop devices")
	}
	dir := t.TempDir()
	if err := makeDisk(filepath.Join(dir, "disk.img"), filepath.Join(dir, "disk"), 16); err != nil {
		t.Fatal(err)
	}
	rec, err := os.ReadFile(filepath.Join(dir, loopRecord))
	if err != nil {
		t.Fatal(err)
	}
	name := string(rec)
	dio, err := os.ReadFile(filepath.Join("/sys/block", name, "loop", "dio"))
	if err != nil {
		t.Fatal(err)
	}
	if string(dio) != "1\n" {
		t.Logf("%s does buffered I/O (dio=%q): the file system under %s cannot do direct I/O", name, dio, dir)
	}
	if err := unmountKnown(dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join("/sys/block", name, "loop", "backing_file")); err == nil {
		t.Errorf("%s still attached to %s after the unmount", name, b)
	}
}
