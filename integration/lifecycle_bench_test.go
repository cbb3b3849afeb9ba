package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// maxLifecycleIterations caps BenchmarkLifecycle (`make bench` asks every
// benchmark for 200): a stop/start cycle mounts and boots a sandbox.
const maxLifecycleIterations = 50

// BenchmarkLifecycle measures, interleaved in one run on one sandbox
// created with auto_resume:
//
//	pause, resume               (POST .../pause, .../resume)
//	stop, start                 (POST .../stop, .../start: processes end, files kept; boot again)
//	exec after auto-resume      (the first `echo 1` on a paused sandbox: resume + exec)
//	exec after auto-start       (the first `echo 1` on a stopped sandbox: start + exec)
//	plain exec                  (`echo 1` on the running sandbox: the baseline)
//	create + exec + delete      (a fresh sandbox: the baseline of start)
//
// and prints medians and p99s. Run with `make bench`.
func BenchmarkLifecycle(b *testing.B) {
	requireDaemon(b)
	ctx := context.Background()
	c := shared.client(0)
	sb, err := c.Create(ctx, &api.CreateSandboxRequest{AutoResume: true, TimeoutSeconds: 3600})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	echo := api.ExecRequest{Argv: []string{"echo", "1"}}
	exec := func(s *client.Sandbox) {
		res, err := s.Exec(ctx, echo)
		if err != nil || res.Stdout != "1\n" {
			b.Fatalf("exec: %+v %v", res, err)
		}
	}
	timed := func(dst *[]time.Duration, f func() error) {
		start := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		*dst = append(*dst, time.Since(start))
	}
	n := min(b.N, maxLifecycleIterations)
	var pause, resume, stop, start, autoResume, autoStart, plain, create []time.Duration
	b.ResetTimer()
	for i := 0; i < n; i++ {
		timed(&pause, func() error { return sb.Pause(ctx) })
		timed(&resume, func() error { return sb.Resume(ctx) })
		timed(&stop, func() error { return sb.Stop(ctx, 0) })
		timed(&start, func() error { return sb.Boot(ctx) })
		timed(&plain, func() error { exec(sb); return nil })
		if err := sb.Pause(ctx); err != nil {
			b.Fatal(err)
		}
		timed(&autoResume, func() error { exec(sb); return nil })
		if err := sb.Stop(ctx, 0); err != nil {
			b.Fatal(err)
		}
		timed(&autoStart, func() error { exec(sb); return nil })
		timed(&plain, func() error { exec(sb); return nil })
		timed(&create, func() error {
			fresh, err := c.Create(ctx, nil)
			if err != nil {
				return err
			}
			exec(fresh)
			return fresh.Kill(ctx)
		})
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ms(pct(autoResume, 50)), "auto-resume-exec-median-ms")
	b.ReportMetric(ms(pct(plain, 50)), "plain-exec-median-ms")
	fmt.Printf("\nruntime %s, %d iterations\n", runtimeName(), n)
	fmt.Printf("%-44s %10s %10s\n", "measure", "median", "p99")
	for _, row := range []struct {
		name string
		d    []time.Duration
	}{
		{"pause", pause}, {"resume", resume}, {"stop (files kept)", stop}, {"start (boot from kept files)", start},
		{"first exec after auto-resume (paused)", autoResume}, {"first exec after auto-start (stopped)", autoStart},
		{"plain exec echo 1 (baseline)", plain}, {"create + exec + delete (baseline)", create},
	} {
		fmt.Printf("%-44s %10.1f %10.1f ms\n", row.name, ms(pct(row.d, 50)), ms(pct(row.d, 99)))
	}
	fmt.Printf("auto-resume adds %+.1f ms, auto-start %+.1f ms to the first exec\n",
		ms(pct(autoResume, 50)-pct(plain, 50)), ms(pct(autoStart, 50)-pct(plain, 50)))
}
