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
// -paddock.idle.n idle ones. The first window is the baseline of the
// second; with -paddock.baseline.bin the baseline build's daemon runs too,
// measured over the same windows. It then deletes each daemon's sandboxes
// (4 clients each, the daemons at the same time) and reports how long the deletes took to answer and the
// host to be clean.
func BenchmarkIdle(b *testing.B) {
	requireDaemon(b)
	names, ds := benchDaemons(b, idleUIDBase, *idleN+10)
	ctx := context.Background()
	time.Sleep(5 * time.Second) // past start-up work
	cpu0 := cpuOverAll(ds, *idleWindow)
	sbs := make([][]*client.Sandbox, len(ds))
	for j, d := range ds {
		var err error
		if sbs[j], err = createIdle(ctx, d.client(0), *idleN, 3600); err != nil {
			b.Fatalf("%s: created %d of %d: %v", names[j], len(sbs[j]), *idleN, err)
		}
	}
	// Idle means settled: past the spares' idle time, and past the
	// metering passes that find the sandboxes quiet.
	time.Sleep(idleSettle)
	cpuN := cpuOverAll(ds, *idleWindow)
	// The daemons delete at the same time, so that neither deletes on a
	// quieter host than the other.
	del, clean := make([]time.Duration, len(ds)), make([]time.Duration, len(ds))
	var wg sync.WaitGroup
	for j, d := range ds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			deleteAll(ctx, sbs[j], 4)
			del[j] = time.Since(t0)
			settledDirs(d, 0)
			clean[j] = time.Since(t0)
		}()
	}
	wg.Wait()
	fmt.Println()
	for j := range ds {
		per100 := (cpuN[j] - cpu0[j]) / float64(*idleN) * 100
		b.ReportMetric(cpuN[j], "daemon-cpu%-N-idle-"+names[j])
		b.ReportMetric(per100, "daemon-cpu%-per-100-idle-"+names[j])
		b.ReportMetric(del[j].Seconds(), "delete-all-s-"+names[j])
		fmt.Printf("idle (%s): daemon CPU over %s: %.2f%% of a core with 0 sandboxes, %.2f%% with %d idle (%+.2f%% per 100 idle); deleting %d took %.1fs (%.1f/s, 4 clients), all cleaned up after %.1fs\n",
			names[j], *idleWindow, cpu0[j], cpuN[j], *idleN, per100, len(sbs[j]), del[j].Seconds(), float64(len(sbs[j]))/del[j].Seconds(), clean[j].Seconds())
	}
	b.ReportMetric(0, "ns/op")
}

// cpuOverAll is cpuOver for each daemon, over the same window.
func cpuOverAll(ds []*daemon, d time.Duration) []float64 {
	t0, c0 := time.Now(), make([]int64, len(ds))
	for j, dm := range ds {
		c0[j] = cpuTicks(dm.cmd.Process.Pid)
	}
	time.Sleep(d)
	el := time.Since(t0).Seconds()
	out := make([]float64, len(ds))
	for j, dm := range ds {
		out[j] = float64(cpuTicks(dm.cmd.Process.Pid)-c0[j]) / 100 / el * 100 // USER_HZ is 100
	}
	return out
}

// createIdle creates up to n idle sandboxes (256 MiB, 256 MiB disk, a lease
// of leaseSec) with 4 concurrent clients, until the first error.
func createIdle(ctx context.Context, c *client.Client, n, leaseSec int) ([]*client.Sandbox, error) {
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
				sb, err := c.Create(ctx, &api.CreateSandboxRequest{TimeoutSeconds: int64(leaseSec), Resources: &api.Resources{MemoryMiB: 256, DiskMiB: 256}})
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
