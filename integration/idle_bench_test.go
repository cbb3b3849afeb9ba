package integration

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

var (
	idleN      = flag.Int("paddock.idle.n", 200, "idle sandboxes BenchmarkIdle holds")
	idleWindow = flag.Duration("paddock.idle.window", 60*time.Second, "how long BenchmarkIdle measures the daemon's CPU, with and without idle sandboxes")
)

// idleUIDBase keeps BenchmarkIdle's uid ranges clear of every other test's.
const idleUIDBase = crashUIDBase + 1400*65536

// BenchmarkIdle measures what idle sandboxes cost the daemon: its CPU
// time (its own and that of the processes it runs and reaps, such as
// runtime commands) over -paddock.idle.window with no sandbox, then with
// -paddock.idle.n idle ones, on one fresh daemon. The first window is the
// baseline of the second. It then deletes them all (4 clients) and
// reports how long that took.
func BenchmarkIdle(b *testing.B) {
	requireDaemon(b)
	d, err := startDaemon(daemonOptions{extraArgs: []string{"--uid-base", strconv.Itoa(idleUIDBase),
		"--max-sandboxes", strconv.Itoa(*idleN + 10), "--max-sandboxes-per-key", "-1"}})
	if err != nil {
		b.Fatal(err)
	}
	defer d.shutdown()
	ctx := context.Background()
	c := d.client(0)
	pid := d.cmd.Process.Pid
	time.Sleep(5 * time.Second) // past start-up work
	cpu0 := cpuOver(pid, *idleWindow)
	sbs, err := createIdle(ctx, c, *idleN)
	if err != nil {
		b.Fatalf("created %d of %d: %v", len(sbs), *idleN, err)
	}
	time.Sleep(5 * time.Second) // let the agents settle
	cpuN := cpuOver(pid, *idleWindow)
	t0 := time.Now()
	deleteAll(ctx, sbs, 4)
	del := time.Since(t0)
	per100 := (cpuN - cpu0) / float64(*idleN) * 100
	b.ReportMetric(cpu0, "daemon-cpu%-0-idle")
	b.ReportMetric(cpuN, "daemon-cpu%-N-idle")
	b.ReportMetric(per100, "daemon-cpu%-per-100-idle")
	b.ReportMetric(del.Seconds(), "delete-all-s")
	b.ReportMetric(0, "ns/op")
	fmt.Printf("\nidle: daemon CPU over %s: %.2f%% of a core with 0 sandboxes, %.2f%% with %d idle (%+.2f%% per 100 idle); deleting %d took %.1fs (%.1f/s, 4 clients)\n",
		*idleWindow, cpu0, cpuN, *idleN, per100, len(sbs), del.Seconds(), float64(len(sbs))/del.Seconds())
}

// createIdle creates n idle sandboxes with 4 concurrent clients.
func createIdle(ctx context.Context, c *client.Client, n int) ([]*client.Sandbox, error) {
	var mu sync.Mutex
	var sbs []*client.Sandbox
	var firstErr error
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				sb, err := c.Create(ctx, &api.CreateSandboxRequest{TimeoutSeconds: 3600, Resources: &api.Resources{MemoryMiB: 256, DiskMiB: 256}})
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					sbs = append(sbs, sb)
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n; i++ {
		mu.Lock()
		stop := firstErr != nil
		mu.Unlock()
		if stop {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return sbs, firstErr
}

// deleteAll deletes sbs with the given number of concurrent clients.
func deleteAll(ctx context.Context, sbs []*client.Sandbox, clients int) {
	next := make(chan *client.Sandbox)
	var wg sync.WaitGroup
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sb := range next {
				sb.Kill(ctx)
			}
		}()
	}
	for _, sb := range sbs {
		next <- sb
	}
	close(next)
	wg.Wait()
}

// cpuOver returns the CPU that process pid used over d, in percent of one
// core: its own user and system time plus that of the children it waited
// for.
func cpuOver(pid int, d time.Duration) float64 {
	t0, c0 := time.Now(), cpuTicks(pid)
	time.Sleep(d)
	t1, c1 := time.Now(), cpuTicks(pid)
	return float64(c1-c0) / 100 / t1.Sub(t0).Seconds() * 100 // USER_HZ is 100
}

// cpuTicks sums utime, stime, cutime and cstime of /proc/pid/stat.
func cpuTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	var sum int64
	for _, k := range []int{11, 12, 13, 14} { // fields 14-17
		if k < len(f) {
			n, _ := strconv.ParseInt(f[k], 10, 64)
			sum += n
		}
	}
	return sum
}
