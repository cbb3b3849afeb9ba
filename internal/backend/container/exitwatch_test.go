package container

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestExitWatch: a watched process's exit is reported once, the process
// (the test's child) is reaped, a running one reads as alive, an
// unwatched one is forgotten, and re-watching an id forgets its old exit.
func TestExitWatch(t *testing.T) {
	w, err := newExitWatch(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	start := func() *os.Process {
		t.Helper()
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill() })
		return cmd.Process
	}
	a, b, c := start(), start(), start()
	for id, p := range map[string]*os.Process{"a": a, "b": b, "c": c} {
		if err := w.watch(id, p.Pid); err != nil {
			t.Fatal(err)
		}
	}
	if known, alive := w.state("a"); !known || !alive {
		t.Fatalf("running a: known %v alive %v", known, alive)
	}
	a.Kill()
	waitFor(t, "a's exit", func() bool { return slices.Contains(w.drain(), "a") })
	if got := w.drain(); len(got) != 0 {
		t.Errorf("reported again: %v", got)
	}
	waitFor(t, "a reaped", func() bool { return !exists(a.Pid) })
	if known, alive := w.state("a"); !known || alive {
		t.Errorf("a after its exit was reported: known %v alive %v, want known dead", known, alive)
	}
	w.unwatch("b")
	b.Kill()
	c.Kill()
	waitFor(t, "c's exit", func() bool { known, alive := w.state("c"); return known && !alive })
	if err := w.watch("c", start().Pid); err != nil { // c started again
		t.Fatal(err)
	}
	if got := w.drain(); len(got) != 0 {
		t.Errorf("reported %v: b is unwatched and c runs again", got)
	}
	// A sandbox that cannot be watched is reported until it is.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if err := w.watch("d", gone.Process.Pid); err == nil {
		t.Fatal("watching a reaped process succeeded")
	}
	for range 2 {
		if got := w.drain(); !slices.Equal(got, []string{"d"}) {
			t.Fatalf("unwatchable d: drained %v", got)
		}
	}
	if err := w.watch("d", start().Pid); err != nil {
		t.Fatal(err)
	}
	if got := w.drain(); len(got) != 0 {
		t.Errorf("reported %v once d is watched", got)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// exists reports whether pid exists, zombie or not.
func exists(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(b), ") X")
}

// TestExitWatchAdopt: adopting a pid the runtime reported watches it only
// if it runs and is the sandbox's; a zombie (what runsc reports as a
// running sandbox), a reaped process and a process owned says is another's
// read as exited.
func TestExitWatchAdopt(t *testing.T) {
	w, err := newExitWatch(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	start := func(name string, args ...string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command(name, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill() })
		return cmd
	}
	yes := func(int) bool { return true }
	zombie := start("true")
	waitFor(t, "a zombie", func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", zombie.Process.Pid))
		return strings.Contains(string(b), ") Z")
	})
	reaped := exec.Command("true")
	if err := reaped.Run(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		pid   int
		owned func(int) bool
		alive bool
	}{
		{"running", start("sleep", "60").Process.Pid, yes, true},
		{"zombie", zombie.Process.Pid, yes, false},
		{"reaped", reaped.Process.Pid, yes, false},
		{"another's", start("sleep", "60").Process.Pid, func(int) bool { return false }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			alive, err := w.adopt(tc.name, tc.pid, tc.owned)
			if err != nil || alive != tc.alive {
				t.Fatalf("adopt = %v, %v; want %v, nil", alive, err, tc.alive)
			}
			if known, alive := w.state(tc.name); !known || alive != tc.alive {
				t.Errorf("state = known %v alive %v; want known, alive %v", known, alive, tc.alive)
			}
		})
	}
	waitFor(t, "the zombie reaped", func() bool { return !exists(zombie.Process.Pid) })
}
