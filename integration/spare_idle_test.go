package integration

import (
	"slices"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// waitPIDs waits up to d for sandbox id's cgroup to hold n processes and
// returns them, failing with what it held instead.
func waitPIDs(t testing.TB, id string, n int, d time.Duration) []int {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		pids := sandboxPIDs(t, id)
		if len(pids) == n {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s: processes %v after %v, want %d", id, pids, d, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSpareShimIdle: with --spare-shim-idle, an idle sandbox's agent
// retires its spare shim, so the sandbox holds one process (the agent);
// the next exec still runs (on a shim of its own) and brings the spare
// back, which retires again. A warm-pool sandbox keeps its spare while it
// waits in the pool (its first exec must not start a shim) and retires it
// only after it was handed out.
func TestSpareShimIdle(t *testing.T) {
	const idle = 2 * time.Second
	d := startPoolDaemon(t, 8, "", "--spare-shim-idle", idle.String())
	ctx := ctxT(t)
	waitEvent(t, d, "pool_create", 1)
	pooled := sandboxDirs(d)
	if len(pooled) != 1 {
		t.Fatalf("pool: %v", pooled)
	}

	// A cold create (pids other than the default is never pooled).
	cold := newSandboxOn(t, d, 0, &api.CreateSandboxRequest{Resources: &api.Resources{PIDs: 200}})
	if slices.Contains(pooled, cold.ID) {
		t.Fatalf("pids 200 create came from the pool")
	}
	waitPIDs(t, cold.ID, 2, 10*time.Second) // agent and spare
	agentOnly := waitPIDs(t, cold.ID, 1, idle+10*time.Second)
	for i := range 3 {
		res, err := cold.Exec(ctx, api.ExecRequest{Argv: []string{"echo", "ok"}})
		if err != nil || res.Stdout != "ok\n" || res.ExitCode == nil || *res.ExitCode != 0 {
			t.Fatalf("exec %d after the spare retired: %+v %v", i, res, err)
		}
	}
	waitPIDs(t, cold.ID, 2, 10*time.Second) // the spare is back after an exec
	if again := waitPIDs(t, cold.ID, 1, idle+10*time.Second); again[0] != agentOnly[0] {
		t.Fatalf("the agent changed: %v then %v", agentOnly, again)
	}

	// The pool's sandboxes kept their spares all this time (the first
	// one well past idle; the cold create's demand may have grown the
	// pool meanwhile).
	pooled = slices.DeleteFunc(sandboxDirs(d), func(id string) bool { return id == cold.ID })
	for _, id := range pooled {
		if pids := waitPIDs(t, id, 2, 10*time.Second); len(pids) != 2 {
			t.Fatalf("pool sandbox %s: processes %v, want the agent and its spare", id, pids)
		}
	}
	sb := newSandboxOn(t, d, 0, nil)
	if !slices.Contains(pooled, sb.ID) {
		t.Fatalf("default create %s not from the pool %v", sb.ID, pooled)
	}
	if ev := lifecycleEvents(t, d); ev["pool_hit"] != 1 {
		t.Fatalf("events %v", ev)
	}
	waitPIDs(t, sb.ID, 1, idle+10*time.Second) // handed out: it retires
	res, err := sb.Exec(ctx, api.ExecRequest{Command: "echo $((6*7))"})
	if err != nil || res.Stdout != "42\n" {
		t.Fatalf("exec: %+v %v", res, err)
	}
}
