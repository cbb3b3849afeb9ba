package agent

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Stats is the agent's answer to GET /stats: the resource use of the
// cgroup it runs in (read from inside the sandbox, so a backend without
// host access to the cgroup, such as the pod backend, can meter) and the
// sandbox network's byte counters. CPUSeconds and the network counters are
// cumulative; a value the kernel does not offer is 0.
type Stats struct {
	CPUSeconds      float64 `json:"cpu_seconds"`
	MemoryBytes     int64   `json:"memory_bytes"`
	MemoryPeakBytes int64   `json:"memory_peak_bytes"`
	PIDs            int64   `json:"pids"`
	NetRxBytes      int64   `json:"net_rx_bytes"`
	NetTxBytes      int64   `json:"net_tx_bytes"`
}

// maxStatFile bounds every read of a cgroup or /proc file: the values are
// a few lines; a larger file is cut there, never read whole.
const maxStatFile = 64 << 10

// cgroupRoot is where the sandbox's own cgroup is mounted (cgroup v2 with a
// cgroup namespace, or v1 with runc's per-controller bind mounts).
const cgroupRoot = "/sys/fs/cgroup"

func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, readStats(cgroupRoot, "/proc/net/dev"))
	return nil
}

// readStats reads cgroup v2 files under root, or the v1 controllers'
// files when root has no cgroup.controllers, and the non-loopback totals
// of netDev.
func readStats(root, netDev string) Stats {
	var st Stats
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		st.MemoryBytes = readInt(filepath.Join(root, "memory.current"))
		st.MemoryPeakBytes = readInt(filepath.Join(root, "memory.peak"))
		st.PIDs = readInt(filepath.Join(root, "pids.current"))
		st.CPUSeconds = float64(readKey(filepath.Join(root, "cpu.stat"), "usage_usec")) / 1e6
	} else {
		st.MemoryBytes = readInt(filepath.Join(root, "memory", "memory.usage_in_bytes"))
		st.MemoryPeakBytes = readInt(filepath.Join(root, "memory", "memory.max_usage_in_bytes"))
		st.PIDs = readInt(filepath.Join(root, "pids", "pids.current"))
		st.CPUSeconds = float64(readInt(filepath.Join(root, "cpuacct", "cpuacct.usage"))) / 1e9
	}
	st.NetRxBytes, st.NetTxBytes = readNetDev(netDev)
	return st
}

// readBounded reads at most maxStatFile bytes of path.
func readBounded(path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, maxStatFile))
	return b
}

// readInt is the integer in path (0 if missing or not a number: "max").
func readInt(path string) int64 {
	n, err := strconv.ParseInt(string(bytes.TrimSpace(readBounded(path))), 10, 64)
	if err != nil {
		return 0
	}
	return max(n, 0)
}

// readKey is the value of "key N" lines such as cpu.stat's.
func readKey(path, key string) int64 {
	sc := bufio.NewScanner(bytes.NewReader(readBounded(path)))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0
			}
			return max(n, 0)
		}
	}
	return 0
}

// readNetDev sums the receive and transmit bytes of every interface but
// lo in a /proc/net/dev table.
func readNetDev(path string) (rx, tx int64) {
	sc := bufio.NewScanner(bytes.NewReader(readBounded(path)))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(name) == "lo" {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 9 {
			continue
		}
		r, err1 := strconv.ParseInt(f[0], 10, 64)
		t, err2 := strconv.ParseInt(f[8], 10, 64)
		if err1 == nil && err2 == nil && r >= 0 && t >= 0 {
			rx, tx = rx+r, tx+t
		}
	}
	return rx, tx
}

// Stats asks sandbox id's agent for its resource use (GET /stats).
func (c *Client) Stats(ctx context.Context, id string) (Stats, error) {
	var st Stats
	err := c.jsonCall(ctx, id, call{method: http.MethodGet, path: "/stats", timeout: Grace, ok: []int{http.StatusOK}}, maxSmallAnswer, &st)
	return st, err
}
