package integration

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// BenchmarkCode measures the code interpreter, interleaved in one run in
// one sandbox:
//
//	(d) creating a Python code context (interpreter ready) and deleting it
//	(e) a trivial cell `1+1` in a warm context (REST → agent → kernel)
//	(b) exec `python3 -c 1+1` in the same sandbox
//	(c) `/usr/bin/python3 -c 1+1` bare on the host
//
// and reports medians and p99s (docs/benchmarks.md). Run with `make bench`.
func BenchmarkCode(b *testing.B) {
	requireDaemon(b)
	ctx := context.Background()
	sb, err := shared.client(0).Create(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	if res, err := sb.RunCode(ctx, &api.CodeRequest{Code: "1+1"}); err != nil || mainResult(res) != "2" {
		b.Fatalf("warm-up: %+v %v", res, err)
	}
	py := api.ExecRequest{Argv: []string{"python3", "-c", "1+1"}}
	var td, te, tb, tc []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		cc, err := sb.CreateCodeContext(ctx, &api.CodeContextRequest{Language: "python"})
		if err != nil {
			b.Fatal(err)
		}
		if res, err := sb.RunCode(ctx, &api.CodeRequest{ContextID: cc.ID, Code: "1+1"}); err != nil || mainResult(res) != "2" {
			b.Fatalf("first cell: %+v %v", res, err)
		}
		td = append(td, time.Since(start))
		if err := sb.DeleteCodeContext(ctx, cc.ID); err != nil {
			b.Fatal(err)
		}

		start = time.Now()
		res, err := sb.RunCode(ctx, &api.CodeRequest{Code: "1+1"})
		if err != nil || mainResult(res) != "2" {
			b.Fatalf("cell: %+v %v", res, err)
		}
		te = append(te, time.Since(start))

		start = time.Now()
		er, err := sb.Exec(ctx, py)
		if err != nil || er.ExitCode == nil || *er.ExitCode != 0 {
			b.Fatalf("exec: %+v %v", er, err)
		}
		tb = append(tb, time.Since(start))

		start = time.Now()
		if err := exec.Command("/usr/bin/python3", "-c", "1+1").Run(); err != nil {
			b.Fatalf("bare: %v", err)
		}
		tc = append(tc, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(ms(pct(td, 50)), "ctx-create-median-ms")
	b.ReportMetric(ms(pct(te, 50)), "cell-median-ms")
	b.ReportMetric(ms(pct(te, 99)), "cell-p99-ms")
	b.ReportMetric(ms(pct(tb, 50)), "exec-median-ms")
	b.ReportMetric(ms(pct(tc, 50)), "bare-median-ms")
	b.ReportMetric(0, "ns/op")
	fmt.Printf("\nruntime %s, %d iterations\n", runtimeName(), b.N)
	fmt.Printf("%-52s %10s %10s\n", "measure", "median", "p99")
	fmt.Printf("%-52s %10.1f %10.1f ms\n", "(d) create a python context + first cell 1+1", ms(pct(td, 50)), ms(pct(td, 99)))
	fmt.Printf("%-52s %10.1f %10.1f ms\n", "(e) cell 1+1 in a warm context", ms(pct(te, 50)), ms(pct(te, 99)))
	fmt.Printf("%-52s %10.1f %10.1f ms\n", "(b) exec python3 -c 1+1 in the same sandbox", ms(pct(tb, 50)), ms(pct(tb, 99)))
	fmt.Printf("%-52s %10.1f %10.1f ms\n", "(c) bare /usr/bin/python3 -c 1+1 on the host", ms(pct(tc, 50)), ms(pct(tc, 99)))
	fmt.Printf("e/c %.2fx   e/b %.2fx\n", float64(pct(te, 50))/float64(pct(tc, 50)), float64(pct(te, 50))/float64(pct(tb, 50)))
}
