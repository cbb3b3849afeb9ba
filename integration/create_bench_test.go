package integration

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

var createN = flag.Int("paddock.create.n", 50, "creates BenchmarkCreate times per daemon")

// createBenchUIDBase keeps BenchmarkCreate's uid ranges clear of every
// other test's.
const createBenchUIDBase = crashUIDBase + 2000*65536

// BenchmarkCreate times a cold create → the first `python3 -c 'print(1)'`
// result, as a client sees it, -paddock.create.n times per daemon,
// interleaved with the baseline build's daemon when one is given and with
// a daemon of this build with its default warm pool ("this-pool"). The
// delete after each is not timed.
func BenchmarkCreate(b *testing.B) {
	requireDaemon(b)
	names, ds := benchDaemons(b, createBenchUIDBase, 4)
	pooled, err := startDaemon(daemonOptions{extraArgs: []string{"--uid-base", strconv.Itoa(createBenchUIDBase + 20*65536),
		"--max-sandboxes", "12", "--max-sandboxes-per-key", "-1"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pooled.shutdown)
	names, ds = append(names, "this-pool"), append(ds, pooled)
	ctx := context.Background()
	lat := make([][]time.Duration, len(ds))
	for i := 0; i < *createN; i++ {
		for k := range ds {
			j := (i + k) % len(ds) // alternate who goes first
			t0 := time.Now()
			sb, err := ds[j].client(0).Create(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			res, err := sb.Exec(ctx, api.ExecRequest{Argv: []string{"python3", "-c", "print(1)"}})
			if err != nil || res.Stdout != "1\n" {
				b.Fatalf("first exec: %+v %v", res, err)
			}
			lat[j] = append(lat[j], time.Since(t0))
			killQuietly(ctx, sb)
		}
	}
	fmt.Println()
	for j, name := range names {
		b.ReportMetric(ms(pct(lat[j], 50)), "create-"+name+"-median-ms")
		b.ReportMetric(ms(pct(lat[j], 99)), "create-"+name+"-p99-ms")
		fmt.Printf("create → first python3 result (%s): median %.1f ms, p99 %.1f ms over %d\n", name, ms(pct(lat[j], 50)), ms(pct(lat[j], 99)), len(lat[j]))
	}
	for j := 1; j < len(ds); j++ {
		fmt.Printf("create: %s/this median %.2f×\n", names[j], float64(pct(lat[j], 50))/float64(pct(lat[0], 50)))
	}
	b.ReportMetric(0, "ns/op")
}

func killQuietly(ctx context.Context, sb *client.Sandbox) { sb.Kill(ctx) }
