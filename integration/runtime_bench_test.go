package integration

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

var benchRuntimes = flag.String("paddock.bench.runtimes", "runc,crun", "comma-separated OCI runtimes BenchmarkCreateRuntimes compares (the baseline build's daemons run each too)")

// runtimeBenchUIDBase keeps BenchmarkCreateRuntimes' uid ranges clear of
// every other test's.
const runtimeBenchUIDBase = crashUIDBase + 2300*65536

// BenchmarkCreateRuntimes times a cold create → the first `python3 -c
// 'print(1)'` result with the warm pool off, -paddock.create.n times per
// daemon, one daemon per runtime of -paddock.bench.runtimes (and one per
// runtime of the baseline build when one is given), interleaved. It prints
// the medians, p99s and ratios against the first runtime, and the CPU the
// daemon's waited-for children (the runtime invocations) used per create
// (and delete) from /proc/<pid>/stat.
func BenchmarkCreateRuntimes(b *testing.B) {
	requireDaemon(b)
	rts := strings.Split(*benchRuntimes, ",")
	bins, builds := []string{""}, []string{"this"}
	if *baselineBin != "" {
		bins, builds = append(bins, *baselineBin), append(builds, "baseline")
	}
	var names []string
	var ds []*daemon
	for i, bin := range bins {
		for k, rt := range rts {
			slot := i*len(rts) + k
			d, err := startDaemon(daemonOptions{bin: bin, extraArgs: []string{"--runtime", rt, "--warm-pool", "0",
				"--uid-base", strconv.Itoa(runtimeBenchUIDBase + slot*6*65536),
				"--max-sandboxes", "4", "--max-sandboxes-per-key", "-1", "--log-level", "warn"}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(d.shutdown)
			names, ds = append(names, builds[i]+"-"+rt), append(ds, d)
		}
	}
	ctx := context.Background()
	lat := make([][]time.Duration, len(ds))
	children := make([]int64, len(ds))
	for i := 0; i < *createN; i++ {
		for k := range ds {
			j := (i + k) % len(ds) // alternate who goes first
			_, c0 := procTicks(ds[j].cmd.Process.Pid)
			t0 := time.Now()
			sb, err := ds[j].client(0).Create(ctx, nil)
			if err != nil {
				b.Fatalf("%s: %v", names[j], err)
			}
			res, err := sb.Exec(ctx, api.ExecRequest{Argv: []string{"python3", "-c", "print(1)"}})
			if err != nil || res.Stdout != "1\n" {
				b.Fatalf("%s: first exec: %+v %v", names[j], res, err)
			}
			lat[j] = append(lat[j], time.Since(t0))
			killQuietly(ctx, sb)
			_, c1 := procTicks(ds[j].cmd.Process.Pid)
			children[j] += c1 - c0
		}
	}
	fmt.Println()
	const tick = 10 * time.Millisecond // USER_HZ 100
	for j, name := range names {
		child := ms(time.Duration(children[j]) * tick / time.Duration(len(lat[j])))
		b.ReportMetric(ms(pct(lat[j], 50)), "create-"+name+"-median-ms")
		b.ReportMetric(ms(pct(lat[j], 99)), "create-"+name+"-p99-ms")
		b.ReportMetric(child, "create-"+name+"-children-cpu-ms")
		fmt.Printf("create → first python3 result (%s, pool off): median %.1f ms, p99 %.1f ms over %d; runtime CPU %.1f ms per create+delete\n",
			name, ms(pct(lat[j], 50)), ms(pct(lat[j], 99)), len(lat[j]), child)
	}
	for j := 1; j < len(ds); j++ {
		fmt.Printf("create: %s/%s median %.2f×\n", names[j], names[0], float64(pct(lat[j], 50))/float64(pct(lat[0], 50)))
	}
	b.ReportMetric(0, "ns/op")
}
