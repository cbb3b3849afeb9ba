package integration

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

const crashUIDBase = 1 << 28

// TestCrashRecovery kills paddockd with SIGKILL while sandboxes run (and
// while one is being created), restarts it, and checks that live sandboxes
// are re-adopted with their files and processes, expired ones are reaped,
// and that after deleting everything no cgroup, mount, process or loop
// device is left on the host.
func TestCrashRecovery(t *testing.T) {
	requireDaemon(t)
	// --warm-pool 0: every process, mount and cgroup in the uid range is
	// counted as this test's; the pool's own crash safety is TestPoolRestart's.
	d, err := startDaemon(daemonOptions{extraArgs: []string{"--uid-base", strconv.Itoa(crashUIDBase), "--max-sandboxes", "10", "--warm-pool", "0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.shutdown()
	uidHi := crashUIDBase + 20*65536
	t0 := time.Now()
	phase := func(name string) { t.Logf("%6.2fs %s", time.Since(t0).Seconds(), name) }
	ctx := ctxT(t)
	if tr := tracesOf(d.stateDir, nil, crashUIDBase, uidHi); !tr.zero() {
		t.Fatalf("traces before any sandbox: %+v", tr)
	}
	c := d.client(0)
	var ids []string
	for i := 0; i < 3; i++ {
		sb, err := c.Create(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
	}
	keeper := c.Sandbox(ids[0])
	if _, err := keeper.Files().Write(ctx, "state.txt", []byte("acknowledged"), 0); err != nil {
		t.Fatal(err)
	}
	proc, err := keeper.Start(ctx, api.ExecRequest{Argv: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	short, err := c.Create(ctx, &api.CreateSandboxRequest{TimeoutSeconds: 2})
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, short.ID)

	// Kill -9 while a create is in flight.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Create(cctx, nil) // fails: the daemon dies under it
	}()
	time.Sleep(25 * time.Millisecond)
	phase("created 4 sandboxes; kill -9")
	d.kill9()
	wg.Wait()
	phase("in-flight create returned")
	running := tracesOf(d.stateDir, ids, crashUIDBase, uidHi)
	if running.Processes == 0 || running.Disks == 0 {
		t.Fatalf("sandboxes should survive the daemon: %+v", running)
	}
	// A sandbox's root is mounted only in its own mount namespace (the
	// disk pool is one mount for all), so it lives on without the daemon
	// and leaves nothing in the host's but, with a network, its pinned
	// network namespace (counted apart, and gone after the delete below).
	if running.Mounts != 0 {
		t.Errorf("running sandboxes hold %d mounts in the host's mount namespace, want none but pinned network namespaces: %v", running.Mounts, running.Details)
	}
	time.Sleep(2500 * time.Millisecond) // let the short lease lapse while down
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	phase("restarted")
	got, err := c.Get(ctx, short.ID)
	if err != nil || got.State != api.StateTerminated || got.Reason != "expired" {
		t.Fatalf("lease that lapsed while down: %+v %v", got, err)
	}
	data, err := keeper.Files().Read(ctx, "state.txt")
	if err != nil || string(data) != "acknowledged" {
		t.Fatalf("acknowledged write after restart: %q %v", data, err)
	}
	p := keeper.Process(proc.ID)
	if err := p.Refresh(ctx); err != nil || p.State != api.ProcessRunning {
		t.Fatalf("background process after restart: %+v %v", p.Process, err)
	}
	res, err := keeper.Exec(ctx, api.ExecRequest{Command: "echo alive"})
	if err != nil || res.Stdout != "alive\n" {
		t.Fatalf("exec after restart: %+v %v", res, err)
	}
	// Everything the daemon knows about goes away through the API; the
	// half-created sandbox was cleaned up by recovery.
	phase("checked re-adoption")
	ids = ids[:0]
	for sb, err := range c.All(ctx, client.ListOptions{State: "all"}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
		if err := c.Sandbox(sb.ID).Kill(ctx); err != nil {
			t.Fatal(err)
		}
	}
	phase("deleted all")
	if len(ids) != 5 {
		t.Fatalf("want 5 sandboxes on record (3 + short + half-created), got %d", len(ids))
	}
	if tr := settledTraces(d.stateDir, ids, crashUIDBase, uidHi); !tr.zero() {
		t.Fatalf("leaked after crash, restart and delete: %+v", tr)
	}
	fmt.Fprintf(testWriter{t}, "while down: %+v; after cleanup: 0 leaks\n", running)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
