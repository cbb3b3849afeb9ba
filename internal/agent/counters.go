package agent

import (
	"bytes"
	"runtime/metrics"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// oomCounter reads the sandbox cgroup's OOM kill count, which an exec
// reads before its command starts and again if it was SIGKILLed. The
// file is opened once and read with pread, one syscall per read.
type oomCounter struct {
	once sync.Once
	fd   int // -1 if there is none
}

// oomFiles are the cgroup v2 and v1 files that count OOM kills; the
// sandbox's cgroup namespace makes either its own cgroup.
var oomFiles = [...]string{"/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"}

// kills is the OOM kill count (0 if unknown).
func (c *oomCounter) kills() int64 {
	c.once.Do(func() {
		c.fd = -1
		for _, p := range oomFiles {
			if fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
				c.fd = fd
				return
			}
		}
	})
	if c.fd < 0 {
		return 0
	}
	var buf [512]byte // either file is a few lines
	n, err := unix.Pread(c.fd, buf[:], 0)
	if err != nil || n <= 0 {
		return 0
	}
	return oomKillCount(buf[:n])
}

// oomKillCount is the value of the "oom_kill N" line of data, 0 if none.
func oomKillCount(data []byte) int64 {
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("oom_kill ")); ok {
			n, _ := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return n
		}
	}
	return 0
}

// selfThreads is the number of threads of the agent: in a Go binary
// without cgo every thread is one of the runtime's, which counts them
// without a syscall (once read from /proc/self/status on every exec).
func selfThreads() int {
	s := []metrics.Sample{{Name: "/sched/threads/total:threads"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int(s[0].Value.Uint64())
}
