package integration

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// massDeleteUIDBase keeps TestMassDeleteLeavesNothing's uid ranges clear
// of every other test's.
const massDeleteUIDBase = crashUIDBase + 2200*65536

// TestMassDeleteLeavesNothing: deleting many sandboxes at once (more
// than the cleanup workers) leaves nothing on the host once the deferred
// cleanups are done — no process, mount, loop device, cgroup or sandbox
// directory — and neither does a daemon SIGKILLed in the middle of a mass
// delete, once it has restarted (recovery finishes the cleanups, finding
// the mounts of the sandboxes it inherited by scanning).
func TestMassDeleteLeavesNothing(t *testing.T) {
	requireDaemon(t)
	const n = 40
	uidHi := massDeleteUIDBase + 2*(n+2)*65536
	// --warm-pool 0: every process, mount and cgroup in the uid range must
	// be gone after the deletes; a warm pool would keep idle sandboxes.
	d, err := startDaemon(daemonOptions{extraArgs: []string{"--uid-base", strconv.Itoa(massDeleteUIDBase),
		"--max-sandboxes", strconv.Itoa(n + 2), "--max-sandboxes-per-key", "-1", "--warm-pool", "0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.shutdown()
	ctx := ctxT(t)
	c := d.client(0)
	create := func() []string {
		sbs, err := createIdle(ctx, c, n, 600)
		if err != nil {
			t.Fatalf("created %d of %d: %v", len(sbs), n, err)
		}
		var ids []string
		for i, sb := range sbs {
			if i%4 == 0 { // some with a command running, some with files written
				if _, err := sb.Start(ctx, api.ExecRequest{Argv: []string{"sleep", "1000"}}); err != nil {
					t.Fatal(err)
				}
			} else if i%4 == 1 {
				if _, err := sb.Exec(ctx, api.ExecRequest{Argv: []string{"sh", "-c", "head -c 1048576 /dev/zero > /workspace/f"}}); err != nil {
					t.Fatal(err)
				}
			}
			ids = append(ids, sb.ID)
		}
		return ids
	}
	// deleteAllOf deletes ids with 8 clients, calling answered after each
	// answered delete.
	deleteAllOf := func(ids []string, answered func()) {
		next := make(chan string)
		var wg sync.WaitGroup
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for id := range next {
					dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
					if c.Sandbox(id).Kill(dctx) == nil {
						answered()
					}
					cancel()
				}
			}()
		}
		for _, id := range ids {
			next <- id
		}
		close(next)
		wg.Wait()
	}
	clean := func(what string, ids []string) {
		t.Helper()
		if tr := settledTraces(d.stateDir, ids, massDeleteUIDBase, uidHi); !tr.zero() {
			t.Fatalf("%s: left on the host: %+v", what, tr)
		}
		if dirs := settledDirs(d, 0); len(dirs) != 0 {
			t.Fatalf("%s: sandbox directories left: %v", what, dirs)
		}
	}

	ids := create()
	deleteAllOf(ids, func() {})
	clean("mass delete", ids)

	// Again, SIGKILLing the daemon once a quarter of the deletes answered.
	ids = create()
	var count atomic.Int32
	killed := make(chan struct{})
	var once sync.Once
	deleted := make(chan struct{})
	go func() {
		defer close(deleted)
		deleteAllOf(ids, func() {
			if count.Add(1) == n/4 {
				once.Do(func() { close(killed) })
			}
		})
	}()
	select {
	case <-killed:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	d.kill9()
	<-deleted // the rest fail fast: no daemon
	t.Logf("traces when the daemon died: %+v", tracesOf(d.stateDir, ids, massDeleteUIDBase, uidHi))
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
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
	clean("mass delete with a SIGKILL", ids)
}
