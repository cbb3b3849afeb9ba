package integration

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/client"
)

var benchN = flag.Int("paddock.bench.n", 300, "sandboxes BenchmarkMassDelete and BenchmarkIdleMemory create per daemon")

// massDeleteBenchUIDBase keeps BenchmarkMassDelete's uid ranges clear of
// every other test's (room for two daemons of 2,000 each).
const massDeleteBenchUIDBase = crashUIDBase + 2400*65536

// massDeleteClients is how many clients delete at once.
const massDeleteClients = 16

// BenchmarkMassDelete creates -paddock.bench.n idle sandboxes on a daemon,
// deletes them all at once (massDeleteClients clients), and reports the
// time until every delete answered and until the host was clean (every
// sandbox directory gone: a deferred cleanup removes it last). With
// -paddock.baseline.bin the baseline build's daemon does the same, after
// this build's, and the ratios are printed.
func BenchmarkMassDelete(b *testing.B) {
	requireDaemon(b)
	n := *benchN
	names, ds := benchDaemons(b, massDeleteBenchUIDBase, n+2)
	ctx := context.Background()
	answered, cleaned := make([]time.Duration, len(ds)), make([]time.Duration, len(ds))
	for j, d := range ds {
		t0 := time.Now()
		cpu0 := sampleCPU(d.cmd.Process.Pid)
		sbs, err := createIdle(ctx, d.client(0), n, 3600)
		if err != nil {
			b.Fatalf("%s: created %d of %d: %v\n%s", names[j], len(sbs), n, err, d.logTail(3000))
		}
		fmt.Printf("mass delete (%s): created %d in %.1f s (%.1f/s); %s\n", names[j], n, time.Since(t0).Seconds(),
			float64(n)/time.Since(t0).Seconds(), sampleCPU(d.cmd.Process.Pid).since(cpu0))
		time.Sleep(2 * time.Second) // let the agents settle
		t0 = time.Now()
		cpu0 = sampleCPU(d.cmd.Process.Pid)
		var failed int
		answered[j], failed = deleteTimed(ctx, sbs, massDeleteClients)
		left := waitDirs(d, 0, 15*time.Minute)
		cleaned[j] = time.Since(t0)
		fmt.Printf("mass delete %d (%s, %d clients): all answered after %.2f s (%.0f/s), host clean after %.2f s (%.0f/s); %d deletes failed, %d directories left; %s\n",
			n, names[j], massDeleteClients, answered[j].Seconds(), float64(n)/answered[j].Seconds(),
			cleaned[j].Seconds(), float64(n)/cleaned[j].Seconds(), failed, left, sampleCPU(d.cmd.Process.Pid).since(cpu0))
		b.ReportMetric(answered[j].Seconds(), "answered-s-"+names[j])
		b.ReportMetric(cleaned[j].Seconds(), "clean-s-"+names[j])
	}
	if len(ds) == 2 {
		fmt.Printf("mass delete %d: this/baseline all answered %.2f×, host clean %.2f×\n", n,
			answered[0].Seconds()/answered[1].Seconds(), cleaned[0].Seconds()/cleaned[1].Seconds())
	}
	b.ReportMetric(0, "ns/op")
}

// deleteTimed deletes sbs with the given number of concurrent clients and
// returns how long until all answered and how many failed.
func deleteTimed(ctx context.Context, sbs []*client.Sandbox, clients int) (time.Duration, int) {
	var failed atomic.Int32
	next := make(chan *client.Sandbox)
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sb := range next {
				if err := sb.Kill(ctx); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	for _, sb := range sbs {
		next <- sb
	}
	close(next)
	wg.Wait()
	return time.Since(t0), int(failed.Load())
}

// waitDirs waits up to limit for the daemon's sandbox directories to
// number n and returns how many are left.
func waitDirs(d *daemon, n int, limit time.Duration) int {
	for end := time.Now().Add(limit); ; time.Sleep(20 * time.Millisecond) {
		if dirs := sandboxDirs(d); len(dirs) == n || time.Now().After(end) {
			return len(dirs)
		}
	}
}
