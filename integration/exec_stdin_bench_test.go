package integration

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

var stdinN = flag.Int("paddock.stdin.n", 30, "execs BenchmarkExecStdin times per stdin size and daemon")

// execStdinUIDBase keeps BenchmarkExecStdin's uid ranges clear of every
// other test's.
const execStdinUIDBase = crashUIDBase + 2300*65536

// BenchmarkExecStdin times `wc -c` fed 1 MiB and 16 MiB (the largest
// allowed) on stdin through the Go client, -paddock.stdin.n times each,
// interleaved with the baseline build's daemon when one is given, and
// reports medians, p99s, the ratio to the baseline and how much the
// daemon's and the guest agent's peak RSS grew.
func BenchmarkExecStdin(b *testing.B) {
	requireDaemon(b)
	names, ds := benchDaemons(b, execStdinUIDBase, 4)
	ctx := context.Background()
	sbs := warmSandboxes(b, ds, api.ExecRequest{Argv: []string{"wc", "-c"}, Stdin: "x"})
	agents := make([]int, len(ds))
	daemonHWM := make([]int64, len(ds))
	for j, d := range ds {
		agents[j] = agentPID(b, sbs[j].ID)
		daemonHWM[j] = hwmKiB(d.cmd.Process.Pid)
	}
	fmt.Println()
	for _, size := range []int{1 << 20, 16 << 20} {
		stdin := string(bytes.Repeat([]byte("0123456789abcdef"), size/16))
		req := api.ExecRequest{Argv: []string{"wc", "-c"}, Stdin: stdin}
		want := strconv.Itoa(size) + "\n"
		agentBefore := make([]int64, len(ds))
		for j := range ds {
			agentBefore[j] = hwmKiB(agents[j])
		}
		lat := make([][]time.Duration, len(ds))
		for i := 0; i < *stdinN; i++ {
			for k := range ds {
				j := (i + k) % len(ds) // alternate who goes first
				t0 := time.Now()
				res, err := sbs[j].Exec(ctx, req)
				if err != nil || res.Stdout != want {
					b.Fatalf("exec (%s): %+v %v", names[j], res, err)
				}
				lat[j] = append(lat[j], time.Since(t0))
			}
		}
		label := fmt.Sprintf("%d MiB", size>>20)
		for j, name := range names {
			m, p99 := pct(lat[j], 50), pct(lat[j], 99)
			agentGrew := float64(hwmKiB(agents[j])-agentBefore[j]) / 1024
			daemonNow := hwmKiB(ds[j].cmd.Process.Pid)
			fmt.Printf("exec wc -c with %s stdin (%s): median %.1f ms, p99 %.1f ms over %d; agent peak RSS +%.1f MiB, paddockd peak RSS %.1f MiB (+%.1f MiB since the warm-up)\n",
				label, name, ms(m), ms(p99), len(lat[j]), agentGrew, float64(daemonNow)/1024, float64(daemonNow-daemonHWM[j])/1024)
			key := strconv.Itoa(size>>20) + "MiB-" + name
			b.ReportMetric(ms(m), "stdin-"+key+"-median-ms")
			b.ReportMetric(ms(p99), "stdin-"+key+"-p99-ms")
		}
		if len(ds) == 2 {
			fmt.Printf("exec wc -c with %s stdin: this/baseline median %.2f×, p99 %.2f×\n", label,
				float64(pct(lat[0], 50))/float64(pct(lat[1], 50)), float64(pct(lat[0], 99))/float64(pct(lat[1], 99)))
		}
	}
	b.ReportMetric(0, "ns/op")
}
