package integration

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// BenchmarkNetworkOnOff measures, interleaved in one run:
//
//	(a) create offline → `true` → delete, on a daemon with networking
//	    (each sandbox gets a pinned namespace it can be switched on in)
//	(b) the same on the shared daemon without networking (the runtime's
//	    own namespace: the baseline)
//	(c) PATCH off → allowlist, then the first fetch from the test's index
//	(d) PATCH allowlist → off
//
// Run with `go test -run '^$' -bench BenchmarkNetworkOnOff -benchtime 50x
// ./integration/ -args -paddock.bin=$PWD/bin`.
func BenchmarkNetworkOnOff(b *testing.B) {
	requireDaemon(b)
	startIndex(b)
	d, err := startDaemon(daemonOptions{
		extraArgs: []string{"--uid-base", strconv.Itoa(crashUIDBase + 780*65536)},
		config: fmt.Sprintf(`{"network": {"pool": "10.92.0.0/16", "proxy_port": 15221, "dns_port": 15273,
			"hosts": {"index.test": [%q]}}}`, indexAddr),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer d.shutdown()
	ctx := context.Background()
	netc, plain := d.client(0), shared.client(0)
	sb, err := netc.Create(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	tru := api.ExecRequest{Argv: []string{"true"}}
	fetch := api.ExecRequest{Command: "curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://index.test/simple/tinypkg/"}
	allow := api.NetworkPolicy{Mode: api.NetworkAllowlist, Allow: []string{"index.test"}}
	off := api.NetworkPolicy{Mode: api.NetworkOff}
	var ta, tb, tc, tf, td []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, c := range []*[]time.Duration{&ta, &tb} {
			cl := netc
			if j == 1 {
				cl = plain
			}
			start := time.Now()
			s, err := cl.Create(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Exec(ctx, tru); err != nil {
				b.Fatal(err)
			}
			if err := s.Kill(ctx); err != nil {
				b.Fatal(err)
			}
			*c = append(*c, time.Since(start))
		}

		start := time.Now()
		if err := sb.SetNetwork(ctx, allow); err != nil {
			b.Fatal(err)
		}
		tc = append(tc, time.Since(start))
		res, err := sb.Exec(ctx, fetch)
		if err != nil || res.Stdout != "200" {
			b.Fatalf("fetch after on: %+v %v", res, err)
		}
		tf = append(tf, time.Since(start))
		start = time.Now()
		if err := sb.SetNetwork(ctx, off); err != nil {
			b.Fatal(err)
		}
		td = append(td, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	fmt.Printf("\nruntime %s, %d iterations\n", runtimeName(), b.N)
	fmt.Printf("%-58s %10s %10s\n", "measure", "median", "p99")
	for _, r := range []struct {
		name string
		d    []time.Duration
	}{
		{"(a) create offline + true + delete, networking on", ta},
		{"(b) the same, daemon without networking (baseline)", tb},
		{"(c) PATCH off → allowlist", tc},
		{"(c') PATCH off → allowlist + first fetch from the index", tf},
		{"(d) PATCH allowlist → off", td},
	} {
		fmt.Printf("%-58s %10.1f %10.1f ms\n", r.name, ms(pct(r.d, 50)), ms(pct(r.d, 99)))
	}
	fmt.Printf("a − b %+.1f ms (median)\n", ms(pct(ta, 50)-pct(tb, 50)))
}
