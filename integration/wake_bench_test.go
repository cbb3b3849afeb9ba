package integration

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// wakeBenchUIDBase keeps BenchmarkWake's uid ranges clear of every other
// test's.
const wakeBenchUIDBase = crashUIDBase + 2900*65536

var wakeN = flag.Int("paddock.wake.n", 10, "BenchmarkWake: sandboxes per daemon (each woken -paddock.wake.rounds times)")
var wakeRounds = flag.Int("paddock.wake.rounds", 3, "BenchmarkWake: rounds of idle then exec")

// BenchmarkWake times the first exec into a sandbox that sat idle past
// its spare shim's idle time (1 s here; 1 min by default), when this
// build's agent hibernated (paddock-idle is PID 1, so the call starts the
// agent, then a shim) and, with -paddock.baseline.bin, when the
// baseline's only retired its spare (the call starts a shim); then the
// exec right after it. Rounds alternate between the daemons.
func BenchmarkWake(b *testing.B) {
	requireDaemon(b)
	const idle = time.Second
	n := *wakeN
	names, ds := benchDaemons(b, wakeBenchUIDBase, n+2, "--spare-shim-idle", idle.String())
	ctx := context.Background()
	sbs := make([][]*client.Sandbox, len(ds))
	for j, d := range ds {
		for range n {
			sb, err := d.client(0).Create(ctx, &api.CreateSandboxRequest{TimeoutSeconds: 3600})
			if err != nil {
				b.Fatalf("%s: create: %v", names[j], err)
			}
			sbs[j] = append(sbs[j], sb)
		}
	}
	first := make([][]time.Duration, len(ds))
	second := make([][]time.Duration, len(ds))
	idlePID1 := make([]string, len(ds))
	exec := func(sb *client.Sandbox) time.Duration {
		start := time.Now()
		res, err := sb.Exec(ctx, api.ExecRequest{Argv: []string{"true"}})
		if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
			b.Fatalf("exec in %s: %+v %v", sb.ID, res, err)
		}
		return time.Since(start)
	}
	for r := range *wakeRounds {
		for k := range ds {
			j := (r + k) % len(ds)
			for _, sb := range sbs[j] {
				if r == 0 {
					exec(sb) // its first command: the spare is then the one it came back from
				}
			}
			for _, sb := range sbs[j] {
				// Idle: one process left (paddock-idle, or the agent alone).
				pids := waitPIDs(b, sb.ID, 1, idle+40*time.Second)
				time.Sleep(500 * time.Millisecond) // past the hibernation that follows the spare's retirement
				idlePID1[j] = comm(pids[0])
				first[j] = append(first[j], exec(sb))
				second[j] = append(second[j], exec(sb))
			}
		}
	}
	for j := range ds {
		fmt.Printf("wake (%s, idle PID 1 %s): first exec after idle median %.1f ms, p99 %.1f ms; the exec right after it median %.1f ms (%d)\n",
			names[j], idlePID1[j], ms(pct(first[j], 50)), ms(pct(first[j], 99)), ms(pct(second[j], 50)), len(first[j]))
	}
	if len(ds) == 2 {
		fmt.Printf("wake: first exec after idle, this/baseline median %.2fx (%+.1f ms)\n",
			float64(pct(first[0], 50))/float64(pct(first[1], 50)), ms(pct(first[0], 50)-pct(first[1], 50)))
	}
	b.ReportMetric(ms(pct(first[0], 50)), "wake-ms-this")
}
