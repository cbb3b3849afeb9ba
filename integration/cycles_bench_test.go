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
)

var (
	cyclesSeconds = flag.Duration("paddock.cycles.time", 20*time.Second, "how long BenchmarkCycles runs each daemon (in two rounds)")
	cyclesClients = flag.Int("paddock.cycles.clients", 8, "concurrent clients of BenchmarkCycles")
)

// cyclesBenchUIDBase keeps BenchmarkCycles' uid ranges clear of every
// other test's.
const cyclesBenchUIDBase = crashUIDBase + 2100*65536

// BenchmarkCycles runs full cycles (create, exec `python3 -c 'print(1)'`,
// delete) from -paddock.cycles.clients clients for -paddock.cycles.time
// per daemon: one daemon with the warm pool off, one with its default
// pool, in alternating rounds. It prints cycles/s, p50/p99 cycle latency,
// and the daemon's own CPU per cycle and its waited-for children's (the
// runtime invocations) from /proc/<pid>/stat.
func BenchmarkCycles(b *testing.B) {
	requireDaemon(b)
	names := []string{"pool-off", "pool-default"}
	var ds []*daemon
	for i, args := range [][]string{{"--warm-pool", "0"}, nil} {
		d, err := startDaemon(daemonOptions{extraArgs: append([]string{"--uid-base", strconv.Itoa(cyclesBenchUIDBase + i*40*65536),
			"--max-sandboxes", "32", "--max-sandboxes-per-key", "-1", "--log-level", "warn"}, args...)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(d.shutdown)
		ds = append(ds, d)
	}
	time.Sleep(2 * time.Second) // the default pool fills its minimum
	type result struct {
		lat            []time.Duration
		wall           time.Duration
		self, children int64 // clock ticks
		errs           int
	}
	res := make([]result, len(ds))
	const rounds = 2
	for range rounds {
		for j, d := range ds {
			self0, child0 := procTicks(d.cmd.Process.Pid)
			t0 := time.Now()
			lat, errs := runCycles(d, *cyclesClients, *cyclesSeconds/rounds)
			res[j].wall += time.Since(t0)
			self1, child1 := procTicks(d.cmd.Process.Pid)
			res[j].lat = append(res[j].lat, lat...)
			res[j].errs += errs
			res[j].self += self1 - self0
			res[j].children += child1 - child0
		}
	}
	fmt.Println()
	const tick = 10 * time.Millisecond // USER_HZ 100
	for j, name := range names {
		r := res[j]
		n := len(r.lat)
		if n == 0 {
			b.Fatalf("%s: no cycle completed (%d errors)", name, r.errs)
		}
		rate := float64(n) / r.wall.Seconds()
		self := ms(time.Duration(r.self) * tick / time.Duration(n))
		child := ms(time.Duration(r.children) * tick / time.Duration(n))
		fmt.Printf("cycles (%s, %d clients): %.1f/s, p50 %.1f ms, p99 %.1f ms over %d (%d errors); daemon CPU %.1f ms/cycle, children %.1f ms/cycle\n",
			name, *cyclesClients, rate, ms(pct(r.lat, 50)), ms(pct(r.lat, 99)), n, r.errs, self, child)
		b.ReportMetric(rate, name+"-cycles/s")
		b.ReportMetric(ms(pct(r.lat, 50)), name+"-p50-ms")
		b.ReportMetric(ms(pct(r.lat, 99)), name+"-p99-ms")
		b.ReportMetric(self, name+"-daemon-cpu-ms/cycle")
		b.ReportMetric(child, name+"-children-cpu-ms/cycle")
	}
	fmt.Printf("cycles: pool-default/pool-off rate %.2f×\n",
		(float64(len(res[1].lat))/res[1].wall.Seconds())/(float64(len(res[0].lat))/res[0].wall.Seconds()))
	b.ReportMetric(0, "ns/op")
}

// runCycles runs full cycles on d from n clients for dur and returns each
// cycle's latency and the number of failed cycles.
func runCycles(d *daemon, n int, dur time.Duration) ([]time.Duration, int) {
	ctx := context.Background()
	end := time.Now().Add(dur)
	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := d.client(i % len(d.keys))
			for time.Now().Before(end) {
				t0 := time.Now()
				sb, err := c.Create(ctx, nil)
				ok := err == nil
				if ok {
					res, err := sb.Exec(ctx, api.ExecRequest{Argv: []string{"python3", "-c", "print(1)"}})
					ok = err == nil && res.Stdout == "1\n"
					ok = sb.Kill(ctx) == nil && ok
				}
				mu.Lock()
				if ok {
					lat = append(lat, time.Since(t0))
				} else {
					errs++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return lat, errs
}

// procTicks returns utime+stime and cutime+cstime of /proc/pid/stat.
func procTicks(pid int) (self, children int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	get := func(k int) int64 {
		if k >= len(f) {
			return 0
		}
		v, _ := strconv.ParseInt(f[k], 10, 64)
		return v
	}
	return get(11) + get(12), get(13) + get(14)
}
