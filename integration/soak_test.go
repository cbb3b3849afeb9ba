package integration

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

var (
	soak         = flag.Bool("paddock.soak", false, "run the chaos soak (TestSoak)")
	soakN        = flag.Int("paddock.soak.n", 8, "concurrent sandboxes in the soak")
	soakDuration = flag.Duration("paddock.soak.t", 2*time.Minute, "soak duration")
	soakKills    = flag.Int("paddock.soak.kills", 5, "SIGKILLs of the daemon during the soak")
)

// soakCounts are the figures a soak run reports.
type soakCounts struct {
	ops, okOps, clearErrors, unclearErrors, writes, lostWrites, kills, overLease atomic.Int64
}

// TestSoak holds N sandboxes busy with execs and file writes for T while
// killing the daemon with SIGKILL K times at random moments and restarting
// it. It checks that every acknowledged write survives, no sandbox outlives
// its lease, every call either succeeded or failed with a clear API or
// connection error, and that nothing is left on the host afterwards.
// Enable with -paddock.soak (and -paddock.soak.n/.t/.kills).
func TestSoak(t *testing.T) {
	requireDaemon(t)
	if !*soak {
		t.Skip("soak disabled; run with -paddock.soak")
	}
	base := crashUIDBase + 80*65536
	d, err := startDaemon(daemonOptions{extraArgs: []string{"--uid-base", strconv.Itoa(base), "--max-sandboxes", strconv.Itoa(*soakN * 2), "--max-sandboxes-per-key", "-1", "--warm-pool", "0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.shutdown()
	c := d.client(0)
	var cnt soakCounts
	ctx, cancel := context.WithTimeout(context.Background(), *soakDuration)
	defer cancel()
	var mu sync.Mutex // guards d while it restarts
	var wg sync.WaitGroup
	for w := 0; w < *soakN; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			soakWorker(ctx, t, c, w, &cnt)
		}(w)
	}
	// The chaos monkey.
	for k := 0; k < *soakKills; k++ {
		wait := time.Duration(rand.Int64N(int64(*soakDuration) / int64(*soakKills+1)))
		select {
		case <-ctx.Done():
		case <-time.After(wait):
			mu.Lock()
			d.kill9()
			cnt.kills.Add(1)
			time.Sleep(time.Duration(rand.IntN(1000)) * time.Millisecond)
			if err := d.start(); err != nil {
				mu.Unlock()
				t.Fatal(err)
			}
			mu.Unlock()
		}
	}
	wg.Wait()
	// Leases: nothing may be running past expires_at (+ reaper slack).
	cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer ccancel()
	var ids []string
	for sb, err := range c.All(cctx, client.ListOptions{State: "all"}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
		if sb.State == api.StateRunning && time.Since(sb.ExpiresAt) > 5*time.Second {
			cnt.overLease.Add(1)
		}
		c.Sandbox(sb.ID).Kill(cctx)
	}
	tr := settledTraces(d.stateDir, ids, base, base+(*soakN*4)*65536)
	report := fmt.Sprintf("soak: N=%d T=%s kills=%d ops=%d ok=%d clear-errors=%d unclear-errors=%d acknowledged-writes=%d lost=%d over-lease=%d leaks=%+v",
		*soakN, *soakDuration, cnt.kills.Load(), cnt.ops.Load(), cnt.okOps.Load(), cnt.clearErrors.Load(), cnt.unclearErrors.Load(),
		cnt.writes.Load(), cnt.lostWrites.Load(), cnt.overLease.Load(), hostTraces{Cgroups: tr.Cgroups, Mounts: tr.Mounts, Processes: tr.Processes, Loops: tr.Loops})
	t.Log(report)
	fmt.Println(report)
	if cnt.lostWrites.Load() > 0 || cnt.unclearErrors.Load() > 0 || cnt.overLease.Load() > 0 || !tr.zero() {
		t.Fatalf("soak failed: %s %v", report, tr.Details)
	}
}

// soakWorker keeps one sandbox busy: write a file, exec, read earlier
// files back; recreate the sandbox when it is gone.
func soakWorker(ctx context.Context, t *testing.T, c *client.Client, w int, cnt *soakCounts) {
	var sb *client.Sandbox
	acked := map[string]string{}
	classify := func(err error) {
		cnt.ops.Add(1)
		var ae *client.APIError
		switch {
		case err == nil:
			cnt.okOps.Add(1)
		case errors.As(err, &ae) && ae.Code != "" && ae.Message != "" && ae.StatusCode != 500:
			cnt.clearErrors.Add(1)
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
			cnt.clearErrors.Add(1)
		case !errors.As(err, &ae):
			cnt.clearErrors.Add(1) // connection refused/reset while the daemon is down
			time.Sleep(50 * time.Millisecond)
		default:
			cnt.unclearErrors.Add(1)
			t.Logf("unclear error: %v", err)
		}
	}
	for i := 0; ctx.Err() == nil; i++ {
		if sb == nil {
			s, err := c.Create(ctx, &api.CreateSandboxRequest{TimeoutSeconds: int64(20 + rand.IntN(40)), Metadata: map[string]string{"soak": strconv.Itoa(w)}})
			classify(err)
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			sb, acked = s, map[string]string{}
		}
		name := fmt.Sprintf("f%d.txt", i)
		content := fmt.Sprintf("worker %d write %d", w, i)
		_, err := sb.Files().Write(ctx, name, []byte(content), 0)
		classify(err)
		if err == nil {
			acked[name] = content
			cnt.writes.Add(1)
		}
		res, err := sb.Exec(ctx, api.ExecRequest{Command: "cat f*.txt | wc -l; python3 -c 'print(sum(range(10**5)))'", TimeoutSeconds: 10})
		classify(err)
		if err == nil && res.ExitCode == nil {
			cnt.unclearErrors.Add(1)
		}
		// Verify acknowledged writes (only while the sandbox is alive).
		for n, want := range acked {
			got, err := sb.Files().Read(ctx, n)
			if err != nil {
				if errors.Is(err, client.ErrConflict) || errors.Is(err, client.ErrNotFound) {
					sb = nil // expired: a new sandbox, new files
					break
				}
				classify(err)
				continue
			}
			if string(got) != want {
				cnt.lostWrites.Add(1)
				t.Logf("lost write %s: %q", n, got)
			}
			break // one check per round keeps the load balanced
		}
		if sb != nil {
			if err := sb.Refresh(ctx); err == nil && sb.State != api.StateRunning {
				sb = nil
			} else if err == nil && time.Since(sb.ExpiresAt) > 5*time.Second {
				cnt.overLease.Add(1)
				t.Logf("sandbox %s running %v past its lease", sb.ID, time.Since(sb.ExpiresAt))
			}
		}
	}
}
