package integration

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// ctxSwitches sums the voluntary and involuntary context switches of every
// thread of pid: each time one of them woke up.
func ctxSwitches(t testing.TB, pid int) int64 {
	t.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, task.Name()))
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if ok && (k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches") {
				c, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += c
			}
		}
	}
	return n
}

// sandboxPIDs are the host pids of every process in sandbox id's cgroup.
func sandboxPIDs(t testing.TB, id string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cg, err := os.ReadFile("/proc/" + e.Name() + "/cgroup"); err == nil && strings.Contains(string(cg), id) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestIdleAgentSleeps: an idle sandbox costs no CPU. Its agent (PID 1)
// and its spare shim have no timer of their own, so none of their threads
// wakes while nothing is asked of them (it used to reap on a 1 s ticker: 6 wakeups in this window
// at least). The Go runtime may wake a thread once in a while (its forced
// GC every 2 min), hence the small allowance.
func TestIdleAgentSleeps(t *testing.T) {
	sb := newSandbox(t, &api.CreateSandboxRequest{})
	if res, err := sb.Exec(ctxT(t), api.ExecRequest{Command: "true"}); err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("exec: %+v %v", res, err)
	}
	agentPID(t, sb.ID)          // fails if the agent is not found by its cmdline
	time.Sleep(2 * time.Second) // the exec's connection and goroutines settle
	pids := sandboxPIDs(t, sb.ID)
	if len(pids) < 2 {
		t.Fatalf("sandbox %s: processes %v; want the agent and its spare shim", sb.ID, pids)
	}
	count := func() (n int64) {
		for _, pid := range pids {
			n += ctxSwitches(t, pid)
		}
		return n
	}
	before := count()
	time.Sleep(6 * time.Second)
	woke := count() - before
	t.Logf("sandbox processes %v: %d wakeups in 6 s idle", pids, woke)
	if woke > 2 {
		t.Fatalf("idle agent woke %d times in 6 s; want it asleep (a timer or poll in PID 1?)", woke)
	}
}
