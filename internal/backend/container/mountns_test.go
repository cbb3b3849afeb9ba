package container

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestInPrivateMounts: a mount made in inPrivateMounts is seen by the
// thread that made it and by a process it starts, never by the host's
// mount namespace, and is gone once the function and that process are.
func TestInPrivateMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := filepath.Join(t.TempDir(), "rootfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	hostNS, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	var childSaw, threadSaw bool
	err = inPrivateMounts(func() error {
		if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "marker"), []byte("x"), 0o644); err != nil {
			return err
		}
		mi, err := os.ReadFile("/proc/thread-self/mountinfo")
		if err != nil {
			return err
		}
		threadSaw = strings.Contains(string(mi), " "+dir+" ")
		out, err := exec.Command("cat", filepath.Join(dir, "marker")).CombinedOutput()
		childSaw = err == nil && string(out) == "x"
		if ns, _ := os.Readlink("/proc/thread-self/ns/mnt"); ns == hostNS {
			t.Errorf("the function ran in the host's mount namespace %s", ns)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !threadSaw || !childSaw {
		t.Errorf("the private mount was not seen where made: thread %v, child process %v", threadSaw, childSaw)
	}
	if m, err := mountsUnder(filepath.Dir(dir)); err != nil || len(m) != 0 {
		t.Errorf("mounts on the host under %s: %v (%v), want none", dir, m, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "marker")); !os.IsNotExist(err) {
		t.Errorf("the host sees the private mount's file: %v", err)
	}
	if ns, _ := os.Readlink("/proc/thread-self/ns/mnt"); ns != hostNS {
		t.Errorf("the caller's thread is left in mount namespace %s, want %s", ns, hostNS)
	}
}
