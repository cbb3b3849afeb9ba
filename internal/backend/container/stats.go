package container

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"golang.org/x/sys/unix"
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

// Stats samples the sandbox's cgroups, disk and network namespace. The
// daemon samples every running sandbox every few seconds, so a sandbox
// whose CPU time has not moved since its last full sample (an idle one:
// its processes have not run, so its memory, disk and traffic are those
// of that sample) costs one read of its CPU counter, and its last sample
// is returned, up to statsMaxAge old.
func (b *Backend) Stats(ctx context.Context, id string) (sandbox.Stats, error) {
	var st sandbox.Stats
	if !validID(id) {
		return st, sandbox.ErrNotFound
	}
	cpu := b.cpuUsage(id)
	if cached, ok := b.stats.get(id, cpu, time.Now()); ok {
		return cached, nil
	}
	m, err := b.readMeta(id)
	if err != nil {
		return st, fmt.Errorf("%w: sandbox %s", sandbox.ErrNotFound, id)
	}
	st.CPUSeconds = b.cpuSeconds(cpu)
	if b.cgroupV1 {
		mem := filepath.Join(cgroupRoot, "memory", b.cfg.CgroupParent, id)
		st.MemoryBytes = readInt(filepath.Join(mem, "memory.usage_in_bytes"))
		st.MemoryPeakBytes = readInt(filepath.Join(mem, "memory.max_usage_in_bytes"))
		st.PIDs = readInt(filepath.Join(cgroupRoot, "pids", b.cfg.CgroupParent, id, "pids.current"))
	} else {
		dir := filepath.Join(cgroupRoot, b.cfg.CgroupParent, id)
		st.MemoryBytes = readInt(filepath.Join(dir, "memory.current"))
		st.MemoryPeakBytes = readInt(filepath.Join(dir, "memory.peak"))
		st.PIDs = readInt(filepath.Join(dir, "pids.current"))
	}
	if n, err := b.diskUsage(id, m); err == nil {
		st.DiskBytes = n
	}
	if pid, err := readSmall(filepath.Join(b.dir(id), "init.pid")); err == nil {
		st.NetRxBytes, st.NetTxBytes = netDev("/proc/" + strings.TrimSpace(string(pid)) + "/net/dev")
	}
	b.stats.put(id, cpu, st, time.Now())
	return st, nil
}

// cpuUsage is the raw CPU counter of sandbox id's cgroup (see cpuCounter).
func (b *Backend) cpuUsage(id string) int64 {
	return b.cpuCounter(filepath.Join(b.cfg.CgroupParent, id))
}

// cpuCounter is the raw CPU counter of the cgroup at rel (relative to the
// hierarchies' roots), which counts its descendants too: nanoseconds on
// cgroup v1 (cpuacct.usage), microseconds on v2 (cpu.stat usage_usec).
func (b *Backend) cpuCounter(rel string) int64 {
	if b.cgroupV1 {
		return readInt(filepath.Join(cgroupRoot, "cpuacct", rel, "cpuacct.usage"))
	}
	return readKey(filepath.Join(cgroupRoot, rel, "cpu.stat"), "usage_usec")
}

// cpuSeconds converts a raw CPU counter to seconds.
func (b *Backend) cpuSeconds(n int64) float64 {
	if b.cgroupV1 {
		return float64(n) / 1e9
	}
	return float64(n) / 1e6
}

// TotalCPUSeconds implements sandbox.MeterTotal: the CPU time of every
// sandbox under the daemon's cgroup parent, including ended ones.
func (b *Backend) TotalCPUSeconds(ctx context.Context) (float64, error) {
	n := b.cpuCounter(b.cfg.CgroupParent)
	if n <= 0 {
		return 0, fmt.Errorf("no CPU counter for cgroup %s", b.cfg.CgroupParent)
	}
	return b.cpuSeconds(n), nil
}

// statsMaxAge bounds how old a sample Stats hands back for a sandbox
// whose CPU time has not moved may be: a quota disk's usage settles when
// btrfs commits (up to 30 s after a write), and the host may reclaim an
// idle sandbox's page cache.
const statsMaxAge = 30 * time.Second

// statsCache holds each sandbox's last full sample and the CPU counter it
// was taken at.
type statsCache struct {
	mu sync.Mutex
	m  map[string]cachedStats
}

type cachedStats struct {
	cpu int64
	st  sandbox.Stats
	at  time.Time
}

// get returns id's last sample if it was taken at CPU counter cpu less
// than statsMaxAge before now. A counter of 0 (unreadable) never matches.
func (c *statsCache) get(id string, cpu int64, now time.Time) (sandbox.Stats, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[id]
	if !ok || cpu == 0 || e.cpu != cpu || now.Sub(e.at) >= statsMaxAge {
		return sandbox.Stats{}, false
	}
	return e.st, true
}

func (c *statsCache) put(id string, cpu int64, st sandbox.Stats, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]cachedStats{}
	}
	c.m[id] = cachedStats{cpu: cpu, st: st, at: now}
}

// forget drops id's sample (it was destroyed).
func (c *statsCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}

// readSmall reads a small file (a cgroup, sysfs or proc file) with plain
// system calls: os.ReadFile also registers every file with the runtime's
// poller, which doubled the cost of sampling thousands of sandboxes.
func readSmall(p string) ([]byte, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 512)
	for len(buf) < 1<<20 {
		if len(buf) == cap(buf) {
			buf = append(buf, make([]byte, cap(buf))...)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: p, Err: err}
		}
		if n == 0 {
			break
		}
		buf = buf[:len(buf)+n]
	}
	return buf, nil
}

func readInt(p string) int64 {
	b, err := readSmall(p)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// readKey reads "key value" lines (cpu.stat) and returns key's value.
func readKey(p, key string) int64 {
	b, err := readSmall(p)
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
	b, err := readSmall(p)
	if err != nil {
		return 0, 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
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
