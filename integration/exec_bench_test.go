package integration

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

var execN = flag.Int("paddock.exec.n", 200, "execs BenchmarkExec times per daemon")

// execBenchUIDBase and agentMemUIDBase keep these benchmarks' uid ranges
// clear of every other test's.
const (
	execBenchUIDBase = crashUIDBase + 2100*65536
	agentMemUIDBase  = crashUIDBase + 2200*65536
)

// BenchmarkExec times `python3 -c 'print(1)'` run bare on the host and
// through the API in a running sandbox, -paddock.exec.n times, interleaved
// (and with the baseline build's daemon when one is given), and reports
// medians, p99s and exec minus bare.
func BenchmarkExec(b *testing.B) {
	requireDaemon(b)
	names, ds := benchDaemons(b, execBenchUIDBase, 4)
	ctx := context.Background()
	py := api.ExecRequest{Argv: []string{"python3", "-c", "print(1)"}}
	sbs := warmSandboxes(b, ds, py)
	bare := func() time.Duration {
		t0 := time.Now()
		out, err := exec.Command("/usr/bin/python3", "-c", "print(1)").Output()
		if err != nil || string(out) != "1\n" {
			b.Fatalf("bare: %q %v", out, err)
		}
		return time.Since(t0)
	}
	var tBare []time.Duration
	lat := make([][]time.Duration, len(ds))
	for i := 0; i < *execN; i++ {
		tBare = append(tBare, bare())
		for k := range ds {
			j := (i + k) % len(ds) // alternate who goes first
			t0 := time.Now()
			res, err := sbs[j].Exec(ctx, py)
			if err != nil || res.Stdout != "1\n" {
				b.Fatalf("exec (%s): %+v %v", names[j], res, err)
			}
			lat[j] = append(lat[j], time.Since(t0))
		}
	}
	fmt.Println()
	mBare := pct(tBare, 50)
	fmt.Printf("bare /usr/bin/python3 -c print(1): median %.1f ms, p99 %.1f ms over %d\n", ms(mBare), ms(pct(tBare, 99)), len(tBare))
	b.ReportMetric(ms(mBare), "bare-median-ms")
	for j, name := range names {
		m := pct(lat[j], 50)
		fmt.Printf("exec python3 -c print(1) in a running sandbox (%s): median %.1f ms, p99 %.1f ms; exec − bare %+.1f ms (median)\n",
			name, ms(m), ms(pct(lat[j], 99)), ms(m-mBare))
		b.ReportMetric(ms(m), "exec-"+name+"-median-ms")
		b.ReportMetric(ms(pct(lat[j], 99)), "exec-"+name+"-p99-ms")
		b.ReportMetric(ms(m-mBare), "exec-minus-bare-"+name+"-ms")
	}
	if len(ds) == 2 {
		fmt.Printf("exec: this/baseline median %.2f×\n", float64(pct(lat[0], 50))/float64(pct(lat[1], 50)))
	}
	execBackToBack(b, names, sbs)
	b.ReportMetric(0, "ns/op")
}

// execBackToBack times `true` run back to back in each daemon's running
// sandbox, in runs of 20 that alternate between the daemons: each exec
// follows the previous one at once, before the agent has refilled its
// spare shim, so it starts a shim of its own. Then it times `true` with
// 60 ms before each call, interleaved: each takes the spare.
func execBackToBack(b *testing.B, names []string, sbs []*client.Sandbox) {
	ctx := context.Background()
	tr := api.ExecRequest{Argv: []string{"true"}}
	lat := make([][]time.Duration, len(sbs))
	for i := 0; i < *execN; i += 20 {
		for k := range sbs {
			j := (i/20 + k) % len(sbs)
			for range 20 {
				t0 := time.Now()
				res, err := sbs[j].Exec(ctx, tr)
				if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
					b.Fatalf("exec true (%s): %+v %v", names[j], res, err)
				}
				lat[j] = append(lat[j], time.Since(t0))
			}
		}
	}
	// The same with a pause before each call: the spare shim's path.
	spaced := make([][]time.Duration, len(sbs))
	for i := 0; i < *execN; i++ {
		for k := range sbs {
			j := (i + k) % len(sbs)
			time.Sleep(60 * time.Millisecond) // past refillDelay and a spare's start
			t0 := time.Now()
			res, err := sbs[j].Exec(ctx, tr)
			if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
				b.Fatalf("exec true (%s): %+v %v", names[j], res, err)
			}
			spaced[j] = append(spaced[j], time.Since(t0))
		}
	}
	for j, name := range names {
		fmt.Printf("exec true 60 ms apart (%s): median %.1f ms, p99 %.1f ms over %d\n", name, ms(pct(spaced[j], 50)), ms(pct(spaced[j], 99)), len(spaced[j]))
		b.ReportMetric(ms(pct(spaced[j], 50)), "spaced-"+name+"-median-ms")
	}
	for j, name := range names {
		fmt.Printf("exec true back to back (%s): median %.1f ms, p99 %.1f ms over %d\n", name, ms(pct(lat[j], 50)), ms(pct(lat[j], 99)), len(lat[j]))
		b.ReportMetric(ms(pct(lat[j], 50)), "b2b-"+name+"-median-ms")
	}
	if len(sbs) == 2 {
		fmt.Printf("exec true back to back: this/baseline median %.2f×\n", float64(pct(lat[0], 50))/float64(pct(lat[1], 50)))
	}
}

// BenchmarkAgentMemory prints 100 MiB with a 16 MiB cap in a fresh sandbox
// through the JSON exec answer and through the NDJSON stream, and reports
// how much the guest agent's peak RSS grew (each daemon, each path, a
// sandbox of its own, as the peak only grows).
func BenchmarkAgentMemory(b *testing.B) {
	requireDaemon(b)
	names, ds := benchDaemons(b, agentMemUIDBase, 4)
	ctx := context.Background()
	const capBytes = 16 << 20
	req := api.ExecRequest{Command: "head -c 104857600 /dev/zero | tr '\\0' a", MaxOutputBytes: capBytes, TimeoutSeconds: 120}
	fmt.Println()
	for j, d := range ds {
		for _, path := range []string{"json", "ndjson"} {
			sb, err := d.client(0).Create(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := sb.Exec(ctx, api.ExecRequest{Argv: []string{"true"}}); err != nil {
				b.Fatal(err)
			}
			pid := agentPID(b, sb.ID)
			before := hwmKiB(pid)
			kept := 0
			if path == "json" {
				res, err := sb.Exec(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				kept = len(res.Stdout)
			} else {
				for ev, err := range sb.ExecStream(ctx, req) {
					if err != nil {
						b.Fatal(err)
					}
					kept += len(ev.Data)
				}
			}
			if kept != capBytes {
				b.Fatalf("%s (%s): kept %d bytes", path, names[j], kept)
			}
			after := hwmKiB(pid)
			grew := float64(after-before) / 1024
			fmt.Printf("agent peak RSS, 100 MiB printed under a 16 MiB cap, %s answer (%s): %.1f → %.1f MiB (+%.1f MiB)\n",
				path, names[j], float64(before)/1024, float64(after)/1024, grew)
			b.ReportMetric(grew, "agent-peak-growth-"+path+"-"+names[j]+"-MiB")
			killQuietly(ctx, sb)
		}
	}
	b.ReportMetric(0, "ns/op")
}

// agentPID finds the host pid of the guest agent of sandbox id: the
// process running the agent's serve whose cgroup path names the sandbox.
func agentPID(b testing.TB, id string) int {
	b.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.HasPrefix(string(cmdline), "/.paddock/paddock-agent\x00serve\x00") {
			continue
		}
		if cg, err := os.ReadFile("/proc/" + e.Name() + "/cgroup"); err == nil && strings.Contains(string(cg), id) {
			return pid
		}
	}
	b.Fatalf("no agent process for sandbox %s", id)
	return 0
}

func hwmKiB(pid int) int64 { return statusKiB(fmt.Sprintf("/proc/%d/status", pid), "VmHWM:") }

// warmSandboxes creates a sandbox on each of ds (deleted when b ends) and
// runs warm in it three times before anything is timed.
func warmSandboxes(b *testing.B, ds []*daemon, warm api.ExecRequest) []*client.Sandbox {
	ctx := context.Background()
	sbs := make([]*client.Sandbox, len(ds))
	for j, d := range ds {
		sb, err := d.client(0).Create(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { killQuietly(ctx, sb) })
		sbs[j] = sb
		for range 3 {
			if _, err := sb.Exec(ctx, warm); err != nil {
				b.Fatal(err)
			}
		}
	}
	return sbs
}
