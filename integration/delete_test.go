package integration

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// deleteUIDBase keeps TestDeleteCrashSafe's uid ranges clear of every
// other test's.
const deleteUIDBase = crashUIDBase + 1700*65536

// settledTraces is tracesOf once the deferred cleanups of deleted
// sandboxes are done: a delete answers when the sandbox can no longer run
// anything and releases its mounts, cgroups and disk right after. It
// waits up to 30 s for no traces and returns the last count.
func settledTraces(stateDir string, ids []string, uidLo, uidHi int) hostTraces {
	var tr hostTraces
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if tr = tracesOf(stateDir, ids, uidLo, uidHi); tr.zero() || time.Now().After(end) {
			return tr
		}
	}
}

// settledDirs is sandboxDirs once it has n entries (deferred cleanups of
// deleted sandboxes remove their directories last), or after 30 s.
func settledDirs(d *daemon, n int) []string {
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if dirs := sandboxDirs(d); len(dirs) == n || time.Now().After(end) {
			return dirs
		}
	}
}

// TestDeleteCrashSafe: a delete's answer means the sandbox runs nothing
// (no process of it is left), and the cleanup that follows it survives a
// daemon SIGKILLed mid-way: the next start finishes it before it serves,
// and nothing leaks.
func TestDeleteCrashSafe(t *testing.T) {
	requireDaemon(t)
	const n = 8
	uidHi := deleteUIDBase + (n+2)*65536
	// --warm-pool 0: every process, mount and cgroup in the uid range is
	// counted as this test's; the pool's own crash safety is TestPoolRestart's.
	d, err := startDaemon(daemonOptions{extraArgs: []string{"--uid-base", strconv.Itoa(deleteUIDBase), "--max-sandboxes", strconv.Itoa(n + 2), "--max-sandboxes-per-key", "-1", "--warm-pool", "0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.shutdown()
	ctx := ctxT(t)
	c := d.client(0)
	var ids []string
	for i := 0; i < n; i++ {
		sb, err := c.Create(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sb.Start(ctx, api.ExecRequest{Argv: []string{"sleep", "1000"}}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
	}
	// The first delete, alone: once it answers nothing of it runs.
	if err := c.Sandbox(ids[0]).Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if tr := tracesOf(d.stateDir, ids[:1], deleteUIDBase, deleteUIDBase); tr.Processes != 0 {
		t.Fatalf("processes of a deleted sandbox after the answer: %v", tr.Details)
	}
	// The rest at once; SIGKILL the daemon as soon as the first answers,
	// its cleanup (and maybe others' deletes) in flight.
	answered := make(chan struct{}, n)
	var wg sync.WaitGroup
	for _, id := range ids[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if c.Sandbox(id).Kill(dctx) == nil {
				answered <- struct{}{}
			}
		}()
	}
	<-answered
	d.kill9()
	wg.Wait()
	atKill := tracesOf(d.stateDir, ids, deleteUIDBase, uidHi)
	t.Logf("traces when the daemon died: %+v", atKill)
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	// Deletes the daemon never answered may not have happened: finish
	// them. Recovery has already destroyed the deleted ones' traces.
	for sb, err := range c.All(ctx, client.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Sandbox(sb.ID).Kill(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		if got, err := c.Get(ctx, id); err != nil || got.State != api.StateTerminated {
			t.Errorf("sandbox %s after restart and delete: %+v %v", id, got, err)
		}
	}
	if tr := settledTraces(d.stateDir, ids, deleteUIDBase, uidHi); !tr.zero() {
		t.Fatalf("leaked after a crash mid-cleanup: %+v", tr)
	}
}
