package container_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/internal/backend/backendtest"
	"github.com/paddock-sandbox/paddock/internal/backend/container"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// TestDiskModeSwitch: a daemon switched between disk modes keeps serving
// the sandboxes of the other mode. A stopped loop-disk sandbox (as an
// older daemon leaves it) starts, keeps its files, is measured and is
// deleted by a quota-mode backend, and a stopped quota-disk sandbox does
// the same under a loop-mode backend. Nothing is left afterwards.
func TestDiskModeSwitch(t *testing.T) {
	dir := *binDir
	if dir == "" {
		dir = backendtest.DefaultBinDir()
	}
	state, err := os.MkdirTemp("", "pdm-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(state)
	if err := os.Chmod(state, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := func(mode string) container.Config {
		return container.Config{StateDir: state, AgentBinary: filepath.Join(dir, "paddock-agent"),
			Runtimes: map[string]string{"runc": filepath.Join(dir, "runc")}, DefaultRuntime: "runc",
			UIDBase: 1<<29 + 100*65536, MaxSlots: 8, DiskMode: mode, DiskPoolMiB: 1024}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	spec := func(id string) sandbox.Spec {
		return sandbox.Spec{ID: id, Template: "base", Resources: sandbox.Resources{VCPUs: 1, MemoryMiB: 256, DiskMiB: 64, PIDs: 128}}
	}
	// makeStopped creates sandbox id in backend b, writes a file into its
	// writable layer and stops it.
	makeStopped := func(b *container.Backend, id string) {
		t.Helper()
		if _, err := b.Create(ctx, spec(id)); err != nil {
			t.Fatal(err)
		}
		up, err := b.Upper(id)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(up.Dir, "workspace", "kept"), []byte(id), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := b.Stop(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	// reuse starts stopped sandbox id in b, checks its file and usage,
	// and deletes it.
	reuse := func(b *container.Backend, id, where string) {
		t.Helper()
		if _, err := b.Start(ctx, spec(id)); err != nil {
			t.Fatalf("start %s: %v", id, err)
		}
		up, err := b.Upper(id)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(up.Dir, filepath.Join(state, where)+"/") {
			t.Errorf("%s's upper dir %s, want under %s", id, up.Dir, where)
		}
		if got, err := os.ReadFile(filepath.Join(up.Dir, "workspace", "kept")); err != nil || string(got) != id {
			t.Errorf("%s's file after the switch: %q %v", id, got, err)
		}
		if st, err := b.Stats(ctx, id); err != nil || st.DiskBytes <= 0 {
			t.Errorf("%s's disk usage: %+v %v", id, st, err)
		}
		if err := b.Destroy(ctx, id); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{filepath.Join(state, "containers", id), filepath.Join(state, "disks", id)} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("%s left after delete", p)
			}
		}
	}
	loop, err := container.New(cfg(container.DiskLoop))
	if err != nil {
		t.Fatal(err)
	}
	makeStopped(loop, "oldloop")
	if _, err := os.Stat(filepath.Join(state, "disks.img")); err == nil {
		t.Errorf("a loop-mode backend made a disk pool")
	}
	quota, err := container.New(cfg(container.DiskQuota))
	if err != nil {
		t.Fatal(err)
	}
	makeStopped(quota, "newquota")
	reuse(quota, "oldloop", "containers")
	loop2, err := container.New(cfg(container.DiskLoop))
	if err != nil {
		t.Fatal(err)
	}
	reuse(loop2, "newquota", "disks")
	if err := loop2.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(b), state+"/") {
		t.Errorf("mounts left under %s after Close", state)
	}
}
