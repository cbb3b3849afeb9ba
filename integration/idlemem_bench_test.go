package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// idleMemUIDBase keeps BenchmarkIdleMemory's uid ranges clear of every
// other test's.
const idleMemUIDBase = crashUIDBase + 6500*65536

// BenchmarkIdleMemory measures the host memory an idle sandbox costs:
// -paddock.bench.n idle sandboxes are created on a daemon and the drop of
// MemAvailable, divided by n, is the figure. The breakdown per sandbox:
// the agents' RSS, PSS and private memory (every process of the
// sandboxes' uid ranges), the kernel's slab (reclaimable and not), the
// page cache, and the daemon's RSS. With -paddock.baseline.bin the
// baseline build's daemon is measured after this build's (its sandboxes
// deleted first): host-wide figures, so the two never run at once.
func BenchmarkIdleMemory(b *testing.B) {
	requireDaemon(b)
	n := *benchN
	names, ds := benchDaemons(b, idleMemUIDBase, n+2)
	ctx := context.Background()
	per := make([]float64, len(ds))
	for j, d := range ds {
		uidLo := idleMemUIDBase + j*(n+4)*65536
		uidHi := uidLo + 2*(n+2)*65536
		if j == 0 && len(ds) == 2 {
			uidHi = idleMemUIDBase + (n+4)*65536
		}
		time.Sleep(3 * time.Second)
		m0, rss0 := meminfo(), rssKiB(d.cmd.Process.Pid)
		sbs, err := createIdle(ctx, d.client(0), n, 3600)
		if err != nil {
			b.Fatalf("%s: created %d of %d: %v", names[j], len(sbs), n, err)
		}
		// Let the agents settle and their spare shims retire (paddockd's
		// --spare-shim-idle, 1 min): a sandbox idle for longer holds only
		// its agent.
		time.Sleep(idleSettle)
		m1, rss1 := meminfo(), rssKiB(d.cmd.Process.Pid)
		ag := agentMemory(uidLo, uidHi)
		kib := func(k string) float64 { return float64(m0[k]-m1[k]) / float64(n) }
		grow := func(k string) float64 { return float64(m1[k]-m0[k]) / float64(n) }
		per[j] = kib("MemAvailable:") / 1024
		fmt.Printf("idle memory (%s), %d idle sandboxes: host MemAvailable −%.2f MiB per sandbox (MemFree −%.2f MiB); per sandbox: agent RSS %.0f KiB, PSS %.0f KiB, private %.0f KiB (%d processes, %.1f tasks per sandbox); slab +%.0f KiB (unreclaimable +%.0f, reclaimable +%.0f); page cache +%.0f KiB (shmem +%.0f); kernel stacks +%.0f KiB; page tables +%.0f KiB; daemon RSS +%.0f KiB\n",
			names[j], n, per[j], kib("MemFree:")/1024, float64(ag.rss)/float64(n), float64(ag.pss)/float64(n), float64(ag.private)/float64(n), ag.procs, float64(ag.threads)/float64(n),
			grow("Slab:"), grow("SUnreclaim:"), grow("SReclaimable:"), grow("Cached:"), grow("Shmem:"), grow("KernelStack:"), grow("PageTables:"),
			float64(rss1-rss0)/float64(n))
		b.ReportMetric(per[j], "host-MiB/sandbox-"+names[j])
		deleteTimed(ctx, sbs, massDeleteClients)
		waitDirs(d, 0, 10*time.Minute)
	}
	if len(ds) == 2 {
		fmt.Printf("idle memory: this/baseline host memory per sandbox %.2f×\n", per[0]/per[1])
	}
	b.ReportMetric(0, "ns/op")
}

// idleSettle is how long BenchmarkIdleMemory waits after the creates:
// past paddockd's default --spare-shim-idle.
const idleSettle = 70 * time.Second

// meminfo reads /proc/meminfo's KiB figures by key ("MemAvailable:").
func meminfo() map[string]int64 {
	out := map[string]int64{}
	data, _ := os.ReadFile("/proc/meminfo")
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			out[f[0]] = v
		}
	}
	return out
}

// agentMem sums the memory of processes, in KiB.
type agentMem struct {
	procs, threads    int
	rss, pss, private int64
}

// agentMemory sums smaps_rollup over every process whose uid is in
// [uidLo, uidHi): the sandboxes' agents (and anything else they run).
func agentMemory(uidLo, uidHi int) agentMem {
	var a agentMem
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		if !uidInRange(p, uidLo, uidHi) {
			continue
		}
		data, err := os.ReadFile(p + "/smaps_rollup")
		if err != nil {
			continue
		}
		a.procs++
		if st, err := os.ReadDir(p + "/task"); err == nil {
			a.threads += len(st)
		}
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			v, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "Rss:":
				a.rss += v
			case "Pss:":
				a.pss += v
			case "Private_Clean:", "Private_Dirty:":
				a.private += v
			}
		}
	}
	return a
}
