package integration

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// BenchmarkLatency measures, interleaved in one run:
//
//	(a) create → first `python3 -c 'print(1)'` result → delete
//	(b) the same exec in a running sandbox
//	(c) the same command run bare on the host (/usr/bin/python3)
//
// and reports medians, p99s and the ratios a/c and b/c. Run with
// `make bench` (200 iterations).
func BenchmarkLatency(b *testing.B) {
	requireDaemon(b)
	ctx := context.Background()
	c := shared.client(0)
	warm, err := c.Create(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer warm.Close()
	py := api.ExecRequest{Argv: []string{"python3", "-c", "print(1)"}}
	var ta, tb, tc []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		sb, err := c.Create(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		res, err := sb.Exec(ctx, py)
		if err != nil || res.Stdout != "1\n" {
			b.Fatalf("exec: %+v %v", res, err)
		}
		if err := sb.Kill(ctx); err != nil {
			b.Fatal(err)
		}
		ta = append(ta, time.Since(start))

		start = time.Now()
		res, err = warm.Exec(ctx, py)
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
	ma, mb, mc := pct(ta, 50), pct(tb, 50), pct(tc, 50)
	b.ReportMetric(ms(ma), "a-median-ms")
	b.ReportMetric(ms(pct(ta, 99)), "a-p99-ms")
	b.ReportMetric(ms(mb), "b-median-ms")
	b.ReportMetric(ms(pct(tb, 99)), "b-p99-ms")
	b.ReportMetric(ms(mc), "c-median-ms")
	b.ReportMetric(ms(pct(tc, 99)), "c-p99-ms")
	b.ReportMetric(float64(ma)/float64(mc), "a/c")
	b.ReportMetric(float64(mb)/float64(mc), "b/c")
	b.ReportMetric(0, "ns/op")
	fmt.Printf("\nruntime %s, %d iterations\n", runtimeName(), b.N)
	fmt.Printf("%-44s %10s %10s\n", "measure", "median", "p99")
	fmt.Printf("%-44s %10.1f %10.1f ms\n", "(a) create + python3 -c print(1) + delete", ms(ma), ms(pct(ta, 99)))
	fmt.Printf("%-44s %10.1f %10.1f ms\n", "(b) exec python3 -c print(1) in a sandbox", ms(mb), ms(pct(tb, 99)))
	fmt.Printf("%-44s %10.1f %10.1f ms\n", "(c) bare /usr/bin/python3 -c print(1)", ms(mc), ms(pct(tc, 99)))
	fmt.Printf("a/c %.2fx   b/c %.2fx   b-c %+.1f ms\n", float64(ma)/float64(mc), float64(mb)/float64(mc), ms(mb-mc))
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
