package network

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// hostMountsUnder lists the host's mount points under dir.
func hostMountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

// TestPinsOffTheHost: the namespaces are pinned in the pin namespace, and
// the host's mount table holds one entry for all of them (the pin
// namespace's own pin), however many sandboxes there are. A manager that
// starts on the same state joins them.
func TestPinsOffTheHost(t *testing.T) {
	tm := newTestManager(t, "10.250.19.0/24")
	ids := []string{"pin1", "pin2", "pin3"}
	for _, id := range ids {
		att := mustSetup(t, tm, id, Policy{Mode: ModeOff})
		h, err := netns.GetFromPath(att.NetnsPath)
		if err != nil {
			t.Fatalf("%s: the runtime's path %s: %v", id, att.NetnsPath, err)
		}
		h.Close()
	}
	if got, want := hostMountsUnder(t, tm.cfg.StateDir), []string{filepath.Join(tm.cfg.StateDir, pinsFile)}; !slices.Equal(got, want) {
		t.Errorf("host mounts under the state dir: %v, want %v", got, want)
	}
	if got, err := PinnedIDs(tm.cfg.StateDir); err != nil || !slices.Equal(got, ids) {
		t.Errorf("PinnedIDs = %v, %v; want %v", got, err, ids)
	}
	m2, err := New(tm.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.pins.stop()
	if got, _ := m2.List(t.Context()); !slices.Equal(got, ids) {
		t.Errorf("List after a restart = %v, want %v", got, ids)
	}
	if err := m2.Teardown(t.Context(), "pin1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := PinnedIDs(tm.cfg.StateDir); !slices.Equal(got, ids[1:]) {
		t.Errorf("PinnedIDs after a teardown = %v, want %v", got, ids[1:])
	}
	if pinned(t, tm.Manager, "pin1") || !pinned(t, tm.Manager, "pin2") {
		t.Error("the first manager's view of the pins differs")
	}
}

// TestPinsMigrateFromHost: a namespace pinned on the host under
// <state>/netns, as daemons before the pin namespace did, is moved into
// it at start, and nothing of it stays on the host.
func TestPinsMigrateFromHost(t *testing.T) {
	state := t.TempDir()
	dir := filepath.Join(state, pinsDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The old layout: the directory a shared bind mount of itself, and a
	// namespace bind-mounted on a file in it.
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	h, err := newNetns()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	old := filepath.Join(dir, "old1")
	if err := os.WriteFile(old, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(int(h)), old, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	tm := newTestManagerAt(t, "10.250.20.0/24", state)
	if got := hostMountsUnder(t, state); !slices.Equal(got, []string{filepath.Join(state, pinsFile)}) {
		t.Errorf("host mounts under the state dir after the move: %v", got)
	}
	if _, err := os.Lstat(old); !os.IsNotExist(err) {
		t.Errorf("the host's pin file is left: %v", err)
	}
	if !pinned(t, tm.Manager, "old1") {
		t.Fatal("old1 is not pinned in the pin namespace")
	}
	moved, err := netns.GetFromPath(tm.netnsPath("old1"))
	if err != nil {
		t.Fatal(err)
	}
	defer moved.Close()
	if !moved.Equal(h) {
		t.Error("the moved pin is another namespace")
	}
	if ids, _ := tm.List(t.Context()); !slices.Contains(ids, "old1") {
		t.Errorf("List = %v, want old1 in it", ids)
	}
	// The test manager's cleanup tears it down like any leftover.
}

// TestRemovePins: RemovePins empties a pin namespace whose daemon is gone
// and unpins it from the host.
func TestRemovePins(t *testing.T) {
	tm := newTestManager(t, "10.250.21.0/24")
	mustSetup(t, tm, "rm1", Policy{Mode: ModeOff})
	if err := RemovePins(tm.cfg.StateDir); err != nil {
		t.Fatal(err)
	}
	if got := hostMountsUnder(t, tm.cfg.StateDir); len(got) != 0 {
		t.Errorf("host mounts under the state dir: %v", got)
	}
	if got, err := PinnedIDs(tm.cfg.StateDir); err != nil || len(got) != 0 {
		t.Errorf("PinnedIDs = %v, %v; want none", got, err)
	}
	if pinned(t, tm.Manager, "rm1") {
		t.Error("rm1 is still pinned")
	}
}
