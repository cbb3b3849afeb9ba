package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// comm is the name of host process pid ("" once it is gone).
func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// waitHibernated waits up to d for sandbox id to hold one process, its
// PID 1 running paddock-idle, and returns its host pid.
func waitHibernated(t *testing.T, id string, d time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		pids := sandboxPIDs(t, id)
		if len(pids) == 1 && comm(pids[0]) == "paddock-idle" {
			return pids[0]
		}
		if time.Now().After(deadline) {
			var got []string
			for _, p := range pids {
				got = append(got, fmt.Sprintf("%d %s", p, comm(p)))
			}
			t.Fatalf("sandbox %s did not hibernate within %v: processes %v", id, d, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAgentHibernates: once a sandbox's spare shim retired and nothing
// runs in it, its agent (PID 1) execs paddock-idle in its place: one
// process of one task. The next call starts the agent again, as the same
// PID 1, with what it kept: the environment the pool's hand-out set, the
// spare's idle time (it hibernates again). Calls sent around the moment
// it hibernates are all answered; a daemon killed meanwhile adopts the
// sandbox. Under crun too. A sandbox with a process running, or a process
// record a client may still ask for, does not hibernate.
func TestAgentHibernates(t *testing.T) {
	const idle = time.Second
	d := startPoolDaemon(t, 3, `{"templates": {"base-crun": {"runtime": "crun"}}, "network": {"disabled": true}}`, "--spare-shim-idle", idle.String())
	ctx := ctxT(t)
	waitEvent(t, d, "pool_create", 1)

	// From the pool: its env is set by the hand-out (PUT /env), not by
	// the agent's command line, so only the saved state keeps it.
	sb := newSandboxOn(t, d, 0, &api.CreateSandboxRequest{Env: map[string]string{"GREETING": "hello from the pool"}})
	if ev := lifecycleEvents(t, d); ev["pool_hit"] != 1 {
		t.Fatalf("not from the pool: events %v", ev)
	}
	agent := sandboxPIDs(t, sb.ID)
	pid := waitHibernated(t, sb.ID, idle+15*time.Second)
	if !slices.Contains(agent, pid) {
		t.Fatalf("PID 1 changed: agent %v, idle %d", agent, pid)
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil || !strings.Contains(string(st), "Threads:\t1\n") {
		t.Fatalf("paddock-idle status: %v\n%s", err, st)
	}

	fds := openFDs(t, pid)
	for round := range 3 {
		res, err := sb.Exec(ctx, api.ExecRequest{Command: `echo "$GREETING"; cat /proc/1/comm`})
		if err != nil || res.ExitCode == nil || *res.ExitCode != 0 || res.Stdout != "hello from the pool\npaddock-agent\n" {
			t.Fatalf("round %d: exec after hibernation: %+v %v", round, res, err)
		}
		if again := waitHibernated(t, sb.ID, idle+15*time.Second); again != pid {
			t.Fatalf("round %d: PID 1 changed: %d then %d", round, pid, again)
		}
		// What the agent hands over is closed by the next one: nothing
		// piles up over hibernations.
		if n := openFDs(t, pid); n != fds {
			t.Fatalf("round %d: paddock-idle holds %d descriptors, %d the first time", round, n, fds)
		}
	}

	// Calls spaced around the idle time race the agent's decision to
	// hibernate: each must be answered, whichever side wins.
	for i := range 12 {
		time.Sleep(idle + time.Duration(rand.IntN(400)-150)*time.Millisecond)
		want := fmt.Sprintf("call %d", i)
		res, err := sb.Exec(ctx, api.ExecRequest{Argv: []string{"echo", want}})
		if err != nil || res.Stdout != want+"\n" {
			t.Fatalf("call %d: %+v %v", i, res, err)
		}
	}
	if _, err := sb.Files().Write(ctx, "kept.txt", []byte("on disk"), 0); err != nil {
		t.Fatal(err)
	}
	waitHibernated(t, sb.ID, idle+15*time.Second)
	// A daemon killed while the agent hibernates adopts the sandbox at its
	// next start; the next call wakes the agent.
	d.kill9()
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	if b, err := sb.Files().Read(ctx, "kept.txt"); err != nil || string(b) != "on disk" {
		t.Fatalf("read after hibernation and a daemon restart: %q %v", b, err)
	}
	if again := waitHibernated(t, sb.ID, idle+15*time.Second); again != pid {
		t.Fatalf("PID 1 changed over the restart: %d then %d", pid, again)
	}

	// crun: the same.
	cr := newSandboxOn(t, d, 0, &api.CreateSandboxRequest{Template: "base-crun"})
	if _, err := cr.Exec(ctx, api.ExecRequest{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	waitHibernated(t, cr.ID, idle+15*time.Second)
	if res, err := cr.Exec(ctx, api.ExecRequest{Command: "cat /proc/1/comm"}); err != nil || res.Stdout != "paddock-agent\n" {
		t.Fatalf("crun: exec after hibernation: %+v %v", res, err)
	}

	// A running process keeps the agent up, and so does its record.
	busy := newSandboxOn(t, d, 0, &api.CreateSandboxRequest{Resources: &api.Resources{PIDs: 200}})
	p, err := busy.Start(ctx, api.ExecRequest{Argv: []string{"sleep", "2"}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(idle + 4*time.Second) // past the spare's retirement and the end of sleep
	for _, pid := range sandboxPIDs(t, busy.ID) {
		if c := comm(pid); c == "paddock-idle" {
			t.Fatalf("sandbox with process record %s hibernated", p.ID)
		}
	}
	if err := p.Refresh(ctx); err != nil || p.State != api.ProcessExited {
		t.Fatalf("process record: %+v %v", p.Process, err)
	}
}

// openFDs counts the open descriptors of host process pid.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
