package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times (100 on
// every Linux architecture Paddock runs on).
const clockTicks = 100

// cpuSample is the CPU time the host's init (PID 1) and the daemon had
// used at one moment, for the scale benchmarks' "who burns the CPU".
type cpuSample struct {
	at           time.Time
	pid1, daemon float64 // seconds
}

func sampleCPU(daemonPID int) cpuSample {
	return cpuSample{at: time.Now(), pid1: procCPUSeconds(1), daemon: procCPUSeconds(daemonPID)}
}

// since describes the CPU PID 1 and the daemon used from s0 to s, as
// shares of one core, and the host's load averages now.
func (s cpuSample) since(s0 cpuSample) string {
	d := s.at.Sub(s0.at).Seconds()
	if d <= 0 {
		d = 1
	}
	comm, _ := os.ReadFile("/proc/1/comm")
	return fmt.Sprintf("PID 1 (%s) %.0f%% of a core, paddockd %.0f%%, load average %s", strings.TrimSpace(string(comm)),
		100*(s.pid1-s0.pid1)/d, 100*(s.daemon-s0.daemon)/d, loadAverage())
}

// loadAverage is the 1, 5 and 15 minute load averages.
func loadAverage() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// procCPUSeconds is the user+system CPU time process pid has used.
func procCPUSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	return statCPUSeconds(string(b))
}

func statCPUSeconds(stat string) float64 {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / clockTicks
}

// topCPU samples every process for window and returns the k commands
// (processes of the same name summed) that used the most CPU, as shares
// of one core.
func topCPU(window time.Duration, k int) string {
	type sample struct {
		name string
		cpu  float64
	}
	read := func() map[string]sample {
		out := map[string]sample{}
		stats, _ := filepath.Glob("/proc/[0-9]*/stat")
		for _, p := range stats {
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			s := string(b)
			i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
			if i < 0 || j < i {
				continue
			}
			out[filepath.Base(filepath.Dir(p))] = sample{s[i+1 : j], statCPUSeconds(s)}
		}
		return out
	}
	a := read()
	time.Sleep(window)
	b := read()
	byName := map[string]float64{}
	for pid, v := range b {
		// A process born in the window counts whole; one that exec'd
		// another program (an agent that hibernated) counts under its new
		// name for the window only.
		byName[v.name] += v.cpu - a[pid].cpu
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return byName[names[i]] > byName[names[j]] })
	var parts []string
	for _, n := range names[:min(k, len(names))] {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", n, 100*byName[n]/window.Seconds()))
	}
	return strings.Join(parts, ", ")
}
