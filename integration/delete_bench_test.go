package integration

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

var (
	baselineBin = flag.String("paddock.baseline.bin", "", "directory of a baseline build (make bench BASELINE=<git ref> makes one); benchmarks that take one interleave it with this build")
	deleteN     = flag.Int("paddock.delete.n", 50, "deletes BenchmarkDelete times per daemon")
)

// benchDaemons starts this build's daemon and, with -paddock.baseline.bin,
// the baseline's, each with uid ranges of its own from uidBase and room
// for max sandboxes. Names are "this" and "baseline". The warm pool is
// off: its idle sandbox is none of the benchmark's, would count in idle
// memory and would keep the host from ever being clean of sandboxes.
func benchDaemons(b *testing.B, uidBase, max int, args ...string) (names []string, ds []*daemon) {
	bins := []string{""}
	names = []string{"this"}
	if *baselineBin != "" {
		bins, names = append(bins, *baselineBin), append(names, "baseline")
	}
	for i, bin := range bins {
		d, err := startDaemon(daemonOptions{bin: bin, extraArgs: append([]string{"--uid-base", strconv.Itoa(uidBase + i*(max+2)*65536),
			"--max-sandboxes", strconv.Itoa(max), "--max-sandboxes-per-key", "-1", "--warm-pool", "0"}, args...)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(d.shutdown)
		ds = append(ds, d)
	}
	return names, ds
}

// deleteBenchUIDBase keeps BenchmarkDelete's uid ranges clear of every
// other test's.
const deleteBenchUIDBase = crashUIDBase + 1900*65536

// BenchmarkDelete times DELETE of a running sandbox (that has run one
// command), as its client waits for it, -paddock.delete.n times per
// daemon, interleaved with the baseline build's daemon when one is given;
// then the deletes of 20 sandboxes at once (4 clients), until all answered
// and until the host is clean.
func BenchmarkDelete(b *testing.B) {
	requireDaemon(b)
	names, ds := benchDaemons(b, deleteBenchUIDBase, 24)
	ctx := context.Background()
	lat := make([][]time.Duration, len(ds))
	for i := 0; i < *deleteN; i++ {
		for k := range ds {
			j := (i + k) % len(ds) // alternate who goes first
			sb, err := ds[j].client(0).Create(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := sb.Exec(ctx, api.ExecRequest{Argv: []string{"true"}}); err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			if err := sb.Kill(ctx); err != nil {
				b.Fatal(err)
			}
			lat[j] = append(lat[j], time.Since(t0))
		}
	}
	// Many at once: 20 per daemon deleted by 4 clients, until they all
	// answered and until the host is clean, the daemons taking turns.
	const many = 20
	answered, cleaned := make([]time.Duration, len(ds)), make([]time.Duration, len(ds))
	for round := 0; round < 2; round++ {
		for k := range ds {
			j := (round + k) % len(ds)
			sbs, err := createIdle(ctx, ds[j].client(0), many, 3600)
			if err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			deleteAll(ctx, sbs, 4)
			answered[j] += time.Since(t0)
			settledDirs(ds[j], 0)
			cleaned[j] += time.Since(t0)
		}
	}
	fmt.Println()
	for j, name := range names {
		fmt.Printf("delete %d at once (%s, mean of 2): all answered after %.2f s, host clean after %.2f s\n",
			many, name, answered[j].Seconds()/2, cleaned[j].Seconds()/2)
		b.ReportMetric(cleaned[j].Seconds()/2, "delete-20-clean-"+name+"-s")
	}
	for j, name := range names {
		slices.Sort(lat[j])
		b.ReportMetric(ms(pct(lat[j], 50)), "delete-"+name+"-median-ms")
		b.ReportMetric(ms(pct(lat[j], 99)), "delete-"+name+"-p99-ms")
		fmt.Printf("delete (%s): median %.1f ms, p99 %.1f ms over %d\n", name, ms(pct(lat[j], 50)), ms(pct(lat[j], 99)), len(lat[j]))
	}
	if len(ds) == 2 {
		fmt.Printf("delete: this/baseline median %.2f×\n", float64(pct(lat[0], 50))/float64(pct(lat[1], 50)))
	}
	b.ReportMetric(0, "ns/op")
}
