package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// BenchmarkNoisyNeighbor measures an unrelated tenant's API latency
// (exec `true` + GET sandbox) first on a quiet daemon, then while hostile
// programs run in other sandboxes at once: a fork bomb, a CPU spin on
// every core, a memory hog, an output flood and a disk fill. It reports
// p50 and p99 of both phases and their ratio.
func BenchmarkNoisyNeighbor(b *testing.B) {
	requireDaemon(b)
	ctx := context.Background()
	other, err := shared.client(1).Create(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer other.Close()
	probe := func(n int) []time.Duration {
		var lat []time.Duration
		for i := 0; i < n; i++ {
			t0 := time.Now()
			if _, err := other.Exec(ctx, api.ExecRequest{Argv: []string{"true"}}); err != nil {
				b.Fatal(err)
			}
			if _, err := shared.client(1).Get(ctx, other.ID); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		return lat
	}
	quiet := probe(100)
	hostile := []struct {
		name string
		res  *api.Resources
		cmd  string
	}{
		{"fork bomb", &api.Resources{PIDs: 128}, "bomb() { bomb | bomb & }; bomb; sleep 100"},
		{"cpu spin", &api.Resources{VCPUs: 2}, "for i in 1 2 3 4; do (while :; do :; done) & done; wait"},
		{"memory hog", &api.Resources{MemoryMiB: 128}, "python3 -c 'b=[]\nwhile True: b.append(bytearray(8<<20))'; sleep 100"},
		{"output flood", nil, "yes 'flood flood flood flood'"},
		{"disk fill", &api.Resources{DiskMiB: 128}, "while :; do dd if=/dev/zero of=/workspace/f bs=1M count=200 2>/dev/null; rm -f /workspace/f; done"},
	}
	hctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, h := range hostile {
		sb, err := shared.client(0).Create(ctx, &api.CreateSandboxRequest{Resources: h.res})
		if err != nil {
			b.Fatal(err)
		}
		defer sb.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for hctx.Err() == nil {
				sb.Exec(hctx, api.ExecRequest{Command: h.cmd, TimeoutSeconds: 20})
			}
		}()
	}
	time.Sleep(2 * time.Second)
	b.ResetTimer()
	noisy := probe(max(b.N, 100))
	b.StopTimer()
	cancel()
	wg.Wait()
	b.ReportMetric(ms(pct(quiet, 50)), "quiet-p50-ms")
	b.ReportMetric(ms(pct(quiet, 99)), "quiet-p99-ms")
	b.ReportMetric(ms(pct(noisy, 50)), "noisy-p50-ms")
	b.ReportMetric(ms(pct(noisy, 99)), "noisy-p99-ms")
	b.ReportMetric(float64(pct(noisy, 99))/float64(pct(quiet, 99)), "p99-ratio")
	b.ReportMetric(0, "ns/op")
	fmt.Printf("\nother tenant exec+get: quiet p50 %.1f ms p99 %.1f ms; with 5 hostile sandboxes p50 %.1f ms p99 %.1f ms (p99 x%.2f)\n",
		ms(pct(quiet, 50)), ms(pct(quiet, 99)), ms(pct(noisy, 50)), ms(pct(noisy, 99)), float64(pct(noisy, 99))/float64(pct(quiet, 99)))
}
