package integration

import (
	"context"
	"flag"
	"fmt"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

var poolBenchSize = flag.Int("paddock.pool.size", 4, "warm pool size of BenchmarkPool's pooled daemon")

// BenchmarkPool measures, interleaved in one run, create → first
// `python3 -c 'print(1)'` result:
//
//	(w) on a daemon with a warm pool of the base template
//	(a) on a daemon without one (a cold create)
//	(c) the same command run bare on the host (/usr/bin/python3)
//
// plus, to see where (w)'s time goes, its create call alone and its first
// exec alone, and (b) an exec in a sandbox that has already run one.
// Each sandbox is deleted after its first result, and after each pooled
// create the loop waits for the pool to refill, outside the timing, so that
// no refill runs during a measurement (as when an agent's conversations
// start a sandbox now and then; creates in a burst faster than the refill
// are served until the pool is empty, then cold).
// Run with `go test -run '^$' -bench Pool -benchtime 100x ./integration/`.
func BenchmarkPool(b *testing.B) {
	ctx := context.Background()
	pooled := startPoolDaemon(b, 3, `{"warm_pool": {"base": `+strconv.Itoa(*poolBenchSize)+`}}`)
	cold := startPoolDaemon(b, 4, "")
	waitEvent(b, pooled, "pool_create", *poolBenchSize)
	pc, cc := pooled.client(0), cold.client(0)
	py := api.ExecRequest{Argv: []string{"python3", "-c", "print(1)"}}
	first := func(c *client.Client) (create, total time.Duration, sb *client.Sandbox) {
		start := time.Now()
		sb, err := c.Create(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		create = time.Since(start)
		res, err := sb.Exec(ctx, py)
		if err != nil || res.Stdout != "1\n" {
			b.Fatalf("exec: %+v %v", res, err)
		}
		return create, time.Since(start), sb
	}
	warm, err := pc.Create(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer warm.Close()
	if _, err := warm.Exec(ctx, py); err != nil {
		b.Fatal(err)
	}
	var tw, twCreate, twExec, ta, tb, tc []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		create, total, sb := first(pc)
		tw, twCreate, twExec = append(tw, total), append(twCreate, create), append(twExec, total-create)
		if err := sb.Kill(ctx); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		waitEvent(b, pooled, "pool_create", *poolBenchSize+2+i)
		b.StartTimer()

		_, total, sb = first(cc)
		ta = append(ta, total)
		if err := sb.Kill(ctx); err != nil {
			b.Fatal(err)
		}

		start := time.Now()
		res, err := warm.Exec(ctx, py)
		if err != nil || res.Stdout != "1\n" {
			b.Fatalf("exec: %+v %v", res, err)
		}
		tb = append(tb, time.Since(start))

		start = time.Now()
		out, err := exec.Command("/usr/bin/python3", "-c", "print(1)").Output()
		if err != nil || string(out) != "1\n" {
			b.Fatalf("bare: %q %v", out, err)
		}
		tc = append(tc, time.Since(start))
	}
	b.StopTimer()
	ev := lifecycleEvents(b, pooled)
	mw, mc := pct(tw, 50), pct(tc, 50)
	b.ReportMetric(ms(mw), "w-median-ms")
	b.ReportMetric(ms(pct(tw, 99)), "w-p99-ms")
	b.ReportMetric(ms(pct(ta, 50)), "a-median-ms")
	b.ReportMetric(ms(pct(ta, 99)), "a-p99-ms")
	b.ReportMetric(ms(mc), "c-median-ms")
	b.ReportMetric(ms(pct(tc, 99)), "c-p99-ms")
	b.ReportMetric(ms(mw-mc), "w-c-ms")
	b.ReportMetric(float64(ev["pool_hit"]-1), "pool-hits")
	b.ReportMetric(0, "ns/op")
	fmt.Printf("\nruntime %s, %d iterations, warm pool of %d (hits %d, misses %d)\n",
		runtimeName(), b.N, *poolBenchSize, ev["pool_hit"]-1, ev["pool_miss"])
	fmt.Printf("%-50s %10s %10s\n", "create → first python3 -c print(1) result", "median", "p99")
	row := func(name string, d []time.Duration) {
		fmt.Printf("%-50s %10.1f %10.1f ms\n", name, ms(pct(d, 50)), ms(pct(d, 99)))
	}
	row("(w) with the warm pool", tw)
	row("    of which the create call", twCreate)
	row("    of which the first exec", twExec)
	row("(a) without (cold create)", ta)
	row("(b) exec in a sandbox that already ran one", tb)
	row("(c) bare /usr/bin/python3 -c print(1)", tc)
	fmt.Printf("w-c %+.1f ms (median), %+.1f ms (p99)   a/w %.1fx\n",
		ms(mw-mc), ms(pct(tw, 99)-pct(tc, 99)), float64(pct(ta, 50))/float64(mw))
}
