package integration

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

var (
	scaleN       = flag.Int("paddock.scale.n", 5000, "idle sandboxes BenchmarkScaleIdle tries to hold")
	scaleDeleteN = flag.Int("paddock.scale.delete", 2000, "sandboxes BenchmarkScaleIdle deletes at once first (timed), before the rest")
)

// scaleUIDBase keeps BenchmarkScaleIdle's uid ranges clear of every other
// test's (2 × 5,010 ranges).
const scaleUIDBase = crashUIDBase + 7000*65536

// BenchmarkScaleIdle creates up to -paddock.scale.n idle sandboxes on one
// daemon (4 clients) and, while they are held, measures another tenant's
// `exec true` (p50, p99 over 200). When a create fails it reports how many
// were reached, the error, whether the daemon is still alive (with the
// tail of its log if not) and the host limits that bind at that scale.
// It then deletes -paddock.scale.delete of them at once (massDeleteClients
// clients) while the others stay, timed until every delete answered and
// until their directories are gone, and then the rest. No warm
// pool: the host is clean once no sandbox directory is left.
func BenchmarkScaleIdle(b *testing.B) {
	requireDaemon(b)
	n := *scaleN
	d, err := startDaemon(daemonOptions{extraArgs: []string{"--uid-base", strconv.Itoa(scaleUIDBase),
		"--max-sandboxes", strconv.Itoa(n + 10), "--max-sandboxes-per-key", "-1", "--log-level", "info", "--warm-pool", "0"}})
	if err != nil {
		b.Fatal(err)
	}
	defer d.shutdown()
	ctx := context.Background()
	fmt.Printf("\nscale: host limits before: %s\n", hostLimits(d.cmd.Process.Pid))
	avail0 := memAvailableKiB()
	t0 := time.Now()
	cpu0 := sampleCPU(d.cmd.Process.Pid)
	stopProgress := progress(d, 60*time.Second)
	sbs, createErr := createIdle(ctx, d.client(0), n, 7200)
	stopProgress()
	elapsed := time.Since(t0)
	fmt.Printf("scale: while creating: %s; host mounts %d; top CPU over 5 s: %s\n",
		sampleCPU(d.cmd.Process.Pid).since(cpu0), hostMounts(), topCPU(5*time.Second, 6))
	alive := d.cmd.ProcessState == nil && d.cmd.Process.Signal(syscall.Signal(0)) == nil
	fmt.Printf("scale: %d of %d idle sandboxes in %.0f s (%.1f creates/s); first error: %v; daemon alive: %v\n",
		len(sbs), n, elapsed.Seconds(), float64(len(sbs))/elapsed.Seconds(), createErr, alive)
	fmt.Printf("scale: host limits at %d: %s\n", len(sbs), hostLimits(d.cmd.Process.Pid))
	if createErr != nil {
		fmt.Printf("scale: daemon log errors:\n%s\n", logErrors(d.log.String(), 20))
		if !alive {
			fmt.Printf("scale: daemon log tail:\n%s\n", d.logTail(6000))
			b.Fatal("the daemon died")
		}
	}
	time.Sleep(idleSettle) // let the agents settle and their spare shims retire
	avail1 := memAvailableKiB()
	fmt.Printf("scale: host limits after %v idle: %s\n", idleSettle, hostLimits(d.cmd.Process.Pid))
	fmt.Printf("scale: host MemAvailable −%.2f MiB per idle sandbox at %d\n", float64(avail0-avail1)/1024/float64(max(len(sbs), 1)), len(sbs))
	if len(sbs) > 0 {
		sbCPU := parentCPU(sbs[0].ID)
		s0 := sbCPU()
		daemonCPU := cpuOverAll([]*daemon{d}, time.Minute)[0]
		sandboxesCPU := (sbCPU() - s0) / time.Minute.Seconds() * 100
		fmt.Printf("scale: %d idle over 1 min: the daemon used %.2f%% of a core (%.3f%% per 100 idle), the sandboxes together %.2f%% (%.1f µs per sandbox per second)\n",
			len(sbs), daemonCPU, daemonCPU/float64(len(sbs))*100, sandboxesCPU, sandboxesCPU/100/float64(len(sbs))*1e6)
		b.ReportMetric(daemonCPU, "daemon-cpu%-idle")
		b.ReportMetric(sandboxesCPU, "sandboxes-cpu%-idle")
	}
	other, err := d.client(1).Create(ctx, nil)
	if err != nil {
		b.Fatalf("the other tenant's create: %v", err)
	}
	var lat []time.Duration
	for i := 0; i < 200; i++ {
		t := time.Now()
		if _, err := other.Exec(ctx, api.ExecRequest{Argv: []string{"true"}}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t))
	}
	slices.Sort(lat)
	fmt.Printf("scale: other tenant's exec among %d idle: p50 %.1f ms, p99 %.1f ms; idle host: %s\n",
		len(sbs), ms(pct(lat, 50)), ms(pct(lat, 99)), topCPU(5*time.Second, 6))
	b.ReportMetric(float64(len(sbs)), "idle-sandboxes")
	b.ReportMetric(ms(pct(lat, 50)), "other-exec-p50-ms")
	b.ReportMetric(ms(pct(lat, 99)), "other-exec-p99-ms")
	other.Kill(ctx)
	first, rest := sbs[:min(*scaleDeleteN, len(sbs))], sbs[min(*scaleDeleteN, len(sbs)):]
	for i, part := range [][]*client.Sandbox{first, rest} {
		if len(part) == 0 {
			continue
		}
		tDel := time.Now()
		cpu0 = sampleCPU(d.cmd.Process.Pid)
		answered, failed := deleteTimed(ctx, part, massDeleteClients)
		wantLeft := 0
		if i == 0 {
			wantLeft = len(rest)
		}
		left := waitDirs(d, wantLeft, 20*time.Minute)
		fmt.Printf("scale: deleting %d at once (%d staying): all answered after %.1f s (%.0f/s), their directories gone after %.1f s (%d failed, %d left); %s; host mounts %d\n",
			len(part), wantLeft, answered.Seconds(), float64(len(part))/answered.Seconds(), time.Since(tDel).Seconds(),
			failed, left-wantLeft, sampleCPU(d.cmd.Process.Pid).since(cpu0), hostMounts())
		if i == 0 {
			b.ReportMetric(answered.Seconds(), "delete-first-answered-s")
			b.ReportMetric(time.Since(tDel).Seconds(), "delete-first-clean-s")
		}
	}
	b.ReportMetric(0, "ns/op")
}

// progress prints, every interval until stopped, how many sandboxes
// daemon d holds, the creates per second since the last line, the host's
// mounts and who used the CPU.
func progress(d *daemon, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t0 := time.Now()
		last, lastN := sampleCPU(d.cmd.Process.Pid), 0
		for {
			select {
			case <-done:
				return
			case <-time.After(interval):
			}
			now, n := sampleCPU(d.cmd.Process.Pid), len(sandboxDirs(d))
			fmt.Printf("scale: %4.0f s: %d sandboxes (%.1f creates/s), host mounts %d, %s\n", time.Since(t0).Seconds(), n,
				float64(n-lastN)/now.at.Sub(last.at).Seconds(), hostMounts(), now.since(last))
			last, lastN = now, n
		}
	}()
	return func() { close(done); <-exited }
}

// hostMounts counts the mounts of the host's mount namespace.
func hostMounts() int {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	return strings.Count(string(b), "\n")
}

// hostLimits describes the host-wide counts that bind at scale: threads
// against kernel.pid_max, the daemon's descriptors against its limit,
// mounts, loop devices, and memory.
func hostLimits(pid int) string {
	read := func(p string) string { b, _ := os.ReadFile(p); return strings.TrimSpace(string(b)) }
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	var nofile string
	for _, line := range strings.Split(read(fmt.Sprintf("/proc/%d/limits", pid)), "\n") {
		if strings.HasPrefix(line, "Max open files") {
			nofile = strings.Fields(line)[3]
		}
	}
	load := strings.Fields(read("/proc/loadavg"))
	tasks := ""
	if len(load) > 3 {
		tasks = load[3]
	}
	loops, _ := filepath.Glob("/sys/block/loop*")
	mounts := strings.Count(read("/proc/self/mountinfo"), "\n")
	return fmt.Sprintf("tasks (running/all) %s of pid_max %s, threads-max %s; daemon fds %d of %s, threads %s; mounts %d; loop devices %d; MemAvailable %d MiB",
		tasks, read("/proc/sys/kernel/pid_max"), read("/proc/sys/kernel/threads-max"), len(fds), nofile,
		statusField(pid, "Threads:"), mounts, len(loops), memAvailableKiB()/1024)
}

func statusField(pid int, key string) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == key {
			return f[1]
		}
	}
	return "?"
}

// logErrors returns the last k distinct error and warning lines of a
// daemon log.
func logErrors(log string, k int) string {
	var out []string
	seen := map[string]bool{}
	lines := strings.Split(log, "\n")
	for i := len(lines) - 1; i >= 0 && len(out) < k; i-- {
		l := lines[i]
		if !strings.Contains(l, "level=ERROR") && !strings.Contains(l, "level=WARN") && !strings.Contains(l, "panic") && !strings.Contains(l, "fatal") {
			continue
		}
		key := l
		if j := strings.Index(l, "msg="); j >= 0 {
			key = l[j:]
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, l)
		}
	}
	slices.Reverse(out)
	return strings.Join(out, "\n")
}

// parentCPU returns a reader of the CPU seconds used by every sandbox
// under the cgroup parent of sandbox id (0 when it cannot be found).
func parentCPU(id string) func() float64 {
	for _, dir := range cgroupDirsOf(id) {
		if parent := filepath.Dir(dir); cgroupCPUNS(parent) >= 0 {
			return func() float64 { return float64(max(cgroupCPUNS(parent), 0)) / 1e9 }
		}
	}
	return func() float64 { return 0 }
}
