package agent_test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/agent"
	"golang.org/x/sys/unix"
)

// spareShims lists the spare shims of h's agent: children of this test
// process named paddock-shim, started since h, that hold the control
// socket on fd 4 and have no child, not even a zombie (a shim keeps the
// socket while its command runs, to take the next one after it). Shims of
// earlier tests' agents may still be ending.
func (h *harness) spareShims() []int {
	h.t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		h.t.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	var shims []int
	parents := map[string]bool{}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if len(f) < 20 {
			continue
		}
		parents[f[1]] = true // a zombie child too: its shim has yet to reap it
		if !strings.Contains(s, "(paddock-shim)") || f[1] != self || f[0] == "Z" {
			continue
		}
		if start, _ := strconv.ParseInt(f[19], 10, 64); start < h.since {
			continue
		}
		if link, err := os.Readlink("/proc/" + e.Name() + "/fd/4"); err == nil && strings.HasPrefix(link, "socket:") {
			pid, _ := strconv.Atoi(e.Name())
			shims = append(shims, pid)
		}
	}
	var out []int
	for _, pid := range shims {
		if !parents[strconv.Itoa(pid)] {
			out = append(out, pid)
		}
	}
	return out
}

// uptimeTicks is the time since boot in clock ticks (1/100 s), as the
// start times in /proc/<pid>/stat.
func uptimeTicks(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	var secs float64
	if _, err := fmt.Sscan(string(b), &secs); err != nil {
		t.Fatalf("/proc/uptime %q: %v", b, err)
	}
	return int64(secs*100) - 1
}

// waitSpare waits for h's spare shim to be ready and returns its pid.
func (h *harness) waitSpare() int {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if pids := h.spareShims(); len(pids) == 1 {
			return pids[0]
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.t.Fatalf("no single spare shim: %v", h.spareShims())
	return 0
}

// TestSpareShim checks that the agent keeps one spare shim, that an exec
// uses it and that the shim is the spare again once its command ended,
// that a command which leaves a process running gets a new spare started
// in its place (and its process lives on), that an exec still works after
// the spare was killed, and that the spare never shows in the process
// list.
func TestSpareShim(t *testing.T) {
	h := newHarness(t, agent.Config{})
	first := h.waitSpare()
	if res := h.exec(api.ExecRequest{Command: "echo $PPID"}); strings.TrimSpace(res.Stdout) != strconv.Itoa(first) {
		t.Errorf("exec ran under %q, want the spare shim %d", res.Stdout, first)
	}
	if again := h.waitSpare(); again != first {
		t.Errorf("the spare after an exec is %d, want its shim %d back", again, first)
	}
	if res := h.exec(api.ExecRequest{Command: "echo $PPID"}); strings.TrimSpace(res.Stdout) != strconv.Itoa(first) {
		t.Errorf("second exec ran under %q, want the same shim %d", res.Stdout, first)
	}
	res := h.exec(api.ExecRequest{Command: "sleep 300 >/dev/null 2>&1 & echo $!"})
	bg, err := strconv.Atoi(strings.TrimSpace(res.Stdout))
	if err != nil {
		t.Fatalf("background pid %q: %v", res.Stdout, err)
	}
	t.Cleanup(func() { _ = unix.Kill(bg, unix.SIGKILL) })
	second := h.waitSpare()
	if second == first {
		t.Fatalf("spare %d kept after its command left a process running", first)
	}
	if err := unix.Kill(bg, 0); err != nil {
		t.Errorf("the process left running is gone: %v", err)
	}
	var list api.ListProcessesResponse
	h.must(200, "GET", "/processes", nil, &list)
	for _, p := range list.Processes {
		if p.PID == second {
			t.Errorf("the spare shows in the process list: %+v", p)
		}
	}
	if err := syscallKill(second); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if res := h.exec(api.ExecRequest{Argv: []string{"echo", "ok"}}); res.Stdout != "ok\n" || deref(res.ExitCode) != 0 {
			t.Fatalf("exec after the spare was killed: %+v", res)
		}
	}
}

// TestShimReuseAfterKill checks that the shim of a command that timed out
// or was killed is never used again (it was told to stop), and that
// killing a later command does not kill what an earlier one left running.
func TestShimReuseAfterKill(t *testing.T) {
	h := newHarness(t, agent.Config{})
	res := h.exec(api.ExecRequest{Command: "sleep 300 >/dev/null 2>&1 & echo $! $PPID"})
	var bg, firstShim int
	if _, err := fmt.Sscan(res.Stdout, &bg, &firstShim); err != nil {
		t.Fatalf("output %q: %v", res.Stdout, err)
	}
	t.Cleanup(func() { _ = unix.Kill(bg, unix.SIGKILL) })
	spare := h.waitSpare()
	res = h.exec(api.ExecRequest{Command: "echo $PPID; exec sleep 30", TimeoutSeconds: 0.3})
	if !res.TimedOut || strings.TrimSpace(res.Stdout) != strconv.Itoa(spare) {
		t.Fatalf("timed exec: %+v, want a timeout under the spare %d", res, spare)
	}
	if err := unix.Kill(bg, 0); err != nil {
		t.Errorf("a later command's timeout killed what an earlier one left running: %v", err)
	}
	next := h.waitSpare()
	if next == spare || next == firstShim {
		t.Errorf("the spare after a timeout is %d: a stopped shim (%d) or one that left a process (%d) came back", next, spare, firstShim)
	}
}

// TestExecEnvHasNoAgentVars checks that commands inherit nothing of the
// agent's and shims' own settings (GOMAXPROCS, PADDOCK_*), in exec and on
// a terminal alike.
func TestExecEnvHasNoAgentVars(t *testing.T) {
	t.Setenv("PADDOCK_SECRET_TEST", "x")
	h := newHarness(t, agent.Config{})
	for _, req := range []api.ExecRequest{{Argv: []string{"env"}}, {Command: "env"}} {
		res := h.exec(req)
		if deref(res.ExitCode) != 0 || !strings.Contains(res.Stdout, "PATH=") {
			t.Fatalf("env: %+v", res)
		}
		for _, bad := range []string{"GOMAXPROCS=", "PADDOCK_"} {
			if strings.Contains(res.Stdout, bad) {
				t.Errorf("%v: command environment holds %s:\n%s", req, bad, res.Stdout)
			}
		}
	}
	res := h.exec(api.ExecRequest{Argv: []string{"env"}, Env: map[string]string{"GOMAXPROCS": "3"}})
	if !strings.Contains(res.Stdout, "GOMAXPROCS=3\n") {
		t.Errorf("a requested GOMAXPROCS is lost:\n%s", res.Stdout)
	}
}

func syscallKill(pid int) error { return unix.Kill(pid, unix.SIGKILL) }

// TestSpareShimStopSignals checks that a spare shim sent a stop signal
// (it subscribes to them while a spare) ends as the signal's default
// action would, and that an exec sent right after still runs, on a shim
// of its own.
func TestSpareShimStopSignals(t *testing.T) {
	h := newHarness(t, agent.Config{})
	for _, sig := range []unix.Signal{unix.SIGTERM, unix.SIGINT, unix.SIGHUP} {
		t.Run(unix.SignalName(sig), func(t *testing.T) {
			spare := h.waitSpare()
			if err := unix.Kill(spare, sig); err != nil {
				t.Fatal(err)
			}
			if res := h.exec(api.ExecRequest{Argv: []string{"echo", "ok"}}); res.Stdout != "ok\n" || deref(res.ExitCode) != 0 {
				t.Fatalf("exec after %v to the spare: %+v", sig, res)
			}
			deadline := time.Now().Add(10 * time.Second)
			for slices.Contains(h.spareShims(), spare) {
				if time.Now().After(deadline) {
					t.Fatalf("spare %d still waits after %v", spare, sig)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// waitNoSpare waits up to d for h's spare shim to be gone.
func (h *harness) waitNoSpare(d time.Duration) {
	h.t.Helper()
	deadline := time.Now().Add(d)
	for len(h.spareShims()) != 0 {
		if time.Now().After(deadline) {
			h.t.Fatalf("spare shims %v still there after %v", h.spareShims(), d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSpareShimRetires checks that with SpareIdle the spare shim ends
// once it has waited that long, that the next exec still runs and brings a
// spare back, and that PUT /spare turns retirement on and off.
func TestSpareShimRetires(t *testing.T) {
	h := newHarness(t, agent.Config{SpareIdle: 300 * time.Millisecond})
	h.waitSpare()
	h.waitNoSpare(10 * time.Second)
	if res := h.exec(api.ExecRequest{Argv: []string{"echo", "ok"}}); res.Stdout != "ok\n" || deref(res.ExitCode) != 0 {
		t.Fatalf("exec after the spare retired: %+v", res)
	}
	h.waitSpare()
	h.waitNoSpare(10 * time.Second)

	// Idle 0 keeps the spare; a positive one retires it again.
	h.must(204, "PUT", "/spare", agent.SparePolicy{IdleMS: 0}, nil)
	h.exec(api.ExecRequest{Argv: []string{"true"}})
	spare := h.waitSpare()
	time.Sleep(time.Second)
	if pids := h.spareShims(); !slices.Equal(pids, []int{spare}) {
		t.Fatalf("with idle 0 the spare %d changed: %v", spare, pids)
	}
	h.must(204, "PUT", "/spare", agent.SparePolicy{IdleMS: 200}, nil)
	h.waitNoSpare(10 * time.Second)

	for _, body := range []any{
		agent.SparePolicy{IdleMS: -1},
		agent.SparePolicy{IdleMS: 1 << 62},
		map[string]any{"idle": 5},
		"x",
	} {
		h.must(400, "PUT", "/spare", body, nil)
	}
}

// TestShimReuseKeepsLimits: with a process limit, each command runs
// under the RLIMIT_NPROC the agent computes for it, and a shim comes back
// as the spare while that limit does not grow (a shim cannot raise it).
func TestShimReuseKeepsLimits(t *testing.T) {
	h := newHarness(t, agent.Config{NProc: 64})
	limit := func() (lim, shimPid int) {
		t.Helper()
		res := h.exec(api.ExecRequest{Command: "grep 'Max processes' /proc/self/limits; echo $PPID"})
		var soft, hard int
		if _, err := fmt.Sscanf(res.Stdout, "Max processes %d %d processes\n%d", &soft, &hard, &shimPid); err != nil || soft != hard {
			t.Fatalf("output %q: %v", res.Stdout, err)
		}
		return soft, shimPid
	}
	h.waitSpare()
	l1, s1 := limit()
	h.waitSpare()
	l2, s2 := limit()
	if l1 < 64+16 || l2 != l1 {
		t.Errorf("limits %d then %d, want the same, at least 64 and two shims' tasks", l1, l2)
	}
	if s2 != s1 {
		t.Errorf("second exec under shim %d, want %d back", s2, s1)
	}
}
