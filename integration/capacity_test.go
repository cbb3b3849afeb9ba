package integration

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

var capacityN = flag.Int("paddock.capacity.n", 200, "idle sandboxes BenchmarkCapacity creates")

// BenchmarkCapacity creates idle sandboxes on a fresh daemon until
// -paddock.capacity.n (or the first failure), reporting the daemon's
// memory per idle sandbox, the host memory per idle sandbox, sustained
// creates per second (4 concurrent clients), and the p99 latency of an
// unrelated tenant's exec while the sandboxes exist.
func BenchmarkCapacity(b *testing.B) {
	requireDaemon(b)
	base := crashUIDBase + 120*65536
	d, err := startDaemon(daemonOptions{extraArgs: []string{"--uid-base", strconv.Itoa(base), "--max-sandboxes", strconv.Itoa(*capacityN + 10), "--max-sandboxes-per-key", "-1"}})
	if err != nil {
		b.Fatal(err)
	}
	defer d.shutdown()
	ctx := context.Background()
	c := d.client(0)
	rss0, avail0 := rssKiB(d.cmd.Process.Pid), memAvailableKiB()
	start := time.Now()
	sbs, firstErr := createIdle(ctx, c, *capacityN, 1800)
	elapsed := time.Since(start)
	n := len(sbs)
	time.Sleep(2 * time.Second) // let the agents settle
	rss1, avail1 := rssKiB(d.cmd.Process.Pid), memAvailableKiB()
	other, err := d.client(1).Create(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	for i := 0; i < 50; i++ {
		t0 := time.Now()
		if _, err := other.Exec(ctx, api.ExecRequest{Argv: []string{"true"}}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.ReportMetric(float64(n), "idle-sandboxes")
	b.ReportMetric(float64(n)/elapsed.Seconds(), "creates/s")
	b.ReportMetric(float64(rss1-rss0)/float64(max(n, 1)), "daemon-KiB/sandbox")
	b.ReportMetric(float64(avail0-avail1)/1024/float64(max(n, 1)), "host-MiB/sandbox")
	b.ReportMetric(ms(pct(lat, 99)), "other-tenant-exec-p99-ms")
	b.ReportMetric(0, "ns/op")
	fmt.Printf("\ncapacity: %d idle sandboxes (first error: %v) in %.1fs = %.1f creates/s with 4 clients; daemon RSS %d→%d KiB (%.0f KiB per sandbox); host MemAvailable -%.1f MiB per sandbox; other tenant exec p50 %.1f ms p99 %.1f ms\n",
		n, firstErr, elapsed.Seconds(), float64(n)/elapsed.Seconds(), rss0, rss1, float64(rss1-rss0)/float64(max(n, 1)),
		float64(avail0-avail1)/1024/float64(max(n, 1)), ms(pct(lat, 50)), ms(pct(lat, 99)))
	t0 := time.Now()
	for _, sb := range sbs {
		sb.Kill(ctx)
	}
	other.Kill(ctx)
	fmt.Printf("deleted %d sandboxes in %.1fs\n", n+1, time.Since(t0).Seconds())
}

func rssKiB(pid int) int64 { return statusKiB(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:") }

func memAvailableKiB() int64 { return statusKiB("/proc/meminfo", "MemAvailable:") }

func statusKiB(path, key string) int64 {
	b, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == key {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}
