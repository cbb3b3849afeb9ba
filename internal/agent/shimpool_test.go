package agent_test

import (
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

// spareShims lists the spare shims of this test process: its children
// named paddock-shim that hold the control socket on fd 4 (a shim running
// a command has closed it).
func spareShims(t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if !strings.Contains(s, "(paddock-shim)") || len(f) < 2 || f[1] != self || f[0] == "Z" {
			continue
		}
		if link, err := os.Readlink("/proc/" + e.Name() + "/fd/4"); err == nil && strings.HasPrefix(link, "socket:") {
			out = append(out, pid)
		}
	}
	return out
}

// waitSpare waits for a spare shim to be ready and returns its pid.
func waitSpare(t *testing.T) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if pids := spareShims(t); len(pids) == 1 {
			return pids[0]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no single spare shim: %v", spareShims(t))
	return 0
}

// TestSpareShim checks that the agent keeps one spare shim, that an exec
// uses it and a new one replaces it, that an exec still works after the
// spare was killed, and that the spare never shows in the process list.
func TestSpareShim(t *testing.T) {
	h := newHarness(t, agent.Config{})
	first := waitSpare(t)
	if res := h.exec(api.ExecRequest{Command: "echo $PPID"}); strings.TrimSpace(res.Stdout) != strconv.Itoa(first) {
		t.Errorf("exec ran under %q, want the spare shim %d", res.Stdout, first)
	}
	second := waitSpare(t)
	if second == first {
		t.Fatalf("spare %d not replaced", first)
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
			spare := waitSpare(t)
			if err := unix.Kill(spare, sig); err != nil {
				t.Fatal(err)
			}
			if res := h.exec(api.ExecRequest{Argv: []string{"echo", "ok"}}); res.Stdout != "ok\n" || deref(res.ExitCode) != 0 {
				t.Fatalf("exec after %v to the spare: %+v", sig, res)
			}
			deadline := time.Now().Add(10 * time.Second)
			for slices.Contains(spareShims(t), spare) {
				if time.Now().After(deadline) {
					t.Fatalf("spare %d still waits after %v", spare, sig)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// waitNoSpare waits up to d for the spare shim to be gone.
func waitNoSpare(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for len(spareShims(t)) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("spare shims %v still there after %v", spareShims(t), d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSpareShimRetires checks that with SpareIdle the spare shim ends
// once it has waited that long, that the next exec still runs and brings a
// spare back, and that PUT /spare turns retirement on and off.
func TestSpareShimRetires(t *testing.T) {
	h := newHarness(t, agent.Config{SpareIdle: 300 * time.Millisecond})
	waitSpare(t)
	waitNoSpare(t, 10*time.Second)
	if res := h.exec(api.ExecRequest{Argv: []string{"echo", "ok"}}); res.Stdout != "ok\n" || deref(res.ExitCode) != 0 {
		t.Fatalf("exec after the spare retired: %+v", res)
	}
	waitSpare(t)
	waitNoSpare(t, 10*time.Second)

	// Idle 0 keeps the spare; a positive one retires it again.
	h.must(204, "PUT", "/spare", agent.SparePolicy{IdleMS: 0}, nil)
	h.exec(api.ExecRequest{Argv: []string{"true"}})
	spare := waitSpare(t)
	time.Sleep(time.Second)
	if pids := spareShims(t); !slices.Equal(pids, []int{spare}) {
		t.Fatalf("with idle 0 the spare %d changed: %v", spare, pids)
	}
	h.must(204, "PUT", "/spare", agent.SparePolicy{IdleMS: 200}, nil)
	waitNoSpare(t, 10*time.Second)

	for _, body := range []any{
		agent.SparePolicy{IdleMS: -1},
		agent.SparePolicy{IdleMS: 1 << 62},
		map[string]any{"idle": 5},
		"x",
	} {
		h.must(400, "PUT", "/spare", body, nil)
	}
}
