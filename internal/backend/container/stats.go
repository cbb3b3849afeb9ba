package container

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

var (
	_ sandbox.Pauser = (*Backend)(nil)
	_ sandbox.Meter  = (*Backend)(nil)
)

// Pause freezes every process of the sandbox (cgroup freezer).
func (b *Backend) Pause(ctx context.Context, id string) error {
	return b.runtimeCmd(ctx, id, "pause")
}

// Resume thaws a paused sandbox.
func (b *Backend) Resume(ctx context.Context, id string) error {
	return b.runtimeCmd(ctx, id, "resume")
}

func (b *Backend) runtimeCmd(ctx context.Context, id, verb string) error {
	m, err := b.readMeta(id)
	if err != nil {
		return fmt.Errorf("%w: sandbox %s", sandbox.ErrNotFound, id)
	}
	rt := b.runtimes[m.Runtime]
	if rt == nil {
		return fmt.Errorf("runtime %q not configured", m.Runtime)
	}
	out, err := exec.CommandContext(ctx, rt.path, append(rt.base(""), verb, id)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", rt.name, verb, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Stats samples the sandbox's cgroups, disk and network namespace.
func (b *Backend) Stats(ctx context.Context, id string) (sandbox.Stats, error) {
	var st sandbox.Stats
	if !validID(id) {
		return st, sandbox.ErrNotFound
	}
	m, err := b.readMeta(id)
	if err != nil {
		return st, fmt.Errorf("%w: sandbox %s", sandbox.ErrNotFound, id)
	}
	if b.cgroupV1 {
		st.CPUSeconds = float64(readInt(filepath.Join(cgroupRoot, "cpuacct", b.cfg.CgroupParent, id, "cpuacct.usage"))) / 1e9
		mem := filepath.Join(cgroupRoot, "memory", b.cfg.CgroupParent, id)
		st.MemoryBytes = readInt(filepath.Join(mem, "memory.usage_in_bytes"))
		st.MemoryPeakBytes = readInt(filepath.Join(mem, "memory.max_usage_in_bytes"))
		st.PIDs = readInt(filepath.Join(cgroupRoot, "pids", b.cfg.CgroupParent, id, "pids.current"))
	} else {
		dir := filepath.Join(cgroupRoot, b.cfg.CgroupParent, id)
		st.CPUSeconds = float64(readKey(filepath.Join(dir, "cpu.stat"), "usage_usec")) / 1e6
		st.MemoryBytes = readInt(filepath.Join(dir, "memory.current"))
		st.MemoryPeakBytes = readInt(filepath.Join(dir, "memory.peak"))
		st.PIDs = readInt(filepath.Join(dir, "pids.current"))
	}
	if n, err := b.diskUsage(id, m); err == nil {
		st.DiskBytes = n
	}
	if pid, err := os.ReadFile(filepath.Join(b.dir(id), "init.pid")); err == nil {
		st.NetRxBytes, st.NetTxBytes = netDev("/proc/" + strings.TrimSpace(string(pid)) + "/net/dev")
	}
	return st, nil
}

func readInt(p string) int64 {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// readKey reads "key value" lines (cpu.stat) and returns key's value.
func readKey(p, key string) int64 {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == key {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// netDev sums received and transmitted bytes over all interfaces of a
// network namespace, loopback included (traffic inside the sandbox).
func netDev(p string) (rx, tx int64) {
	f, err := os.Open(p)
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(name) == "" {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) >= 9 {
			r, _ := strconv.ParseInt(fields[0], 10, 64)
			t, _ := strconv.ParseInt(fields[8], 10, 64)
			rx, tx = rx+r, tx+t
		}
	}
	return rx, tx
}
