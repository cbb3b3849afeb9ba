package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadStats(t *testing.T) {
	netDev := "Inter-|   Receive                                                |  Transmit\n" +
		" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n" +
		"    lo:  500       5    0    0    0     0          0         0      500       5    0    0    0     0       0          0\n" +
		"  eth0: 1000      10    0    0    0     0          0         0     2000      20    0    0    0     0       0          0\n"
	tests := []struct {
		name  string
		files map[string]string
		want  Stats
	}{
		{"v2", map[string]string{
			"cgroup.controllers": "cpu memory pids\n", "memory.current": "4096\n", "memory.peak": "8192\n",
			"pids.current": "3\n", "cpu.stat": "usage_usec 2500000\nuser_usec 1\n",
		}, Stats{CPUSeconds: 2.5, MemoryBytes: 4096, MemoryPeakBytes: 8192, PIDs: 3, NetRxBytes: 1000, NetTxBytes: 2000}},
		{"v1", map[string]string{
			"memory/memory.usage_in_bytes": "100\n", "memory/memory.max_usage_in_bytes": "200\n",
			"pids/pids.current": "7\n", "cpuacct/cpuacct.usage": "1500000000\n",
		}, Stats{CPUSeconds: 1.5, MemoryBytes: 100, MemoryPeakBytes: 200, PIDs: 7, NetRxBytes: 1000, NetTxBytes: 2000}},
		{"hostile values", map[string]string{
			"cgroup.controllers": "", "memory.current": "-5\n", "memory.peak": "max\n",
			"pids.current": strings.Repeat("9", 2*maxStatFile), "cpu.stat": "usage_usec nope\n",
		}, Stats{NetRxBytes: 1000, NetTxBytes: 2000}},
		{"nothing readable", nil, Stats{NetRxBytes: 1000, NetTxBytes: 2000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for name, body := range tt.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			nd := filepath.Join(t.TempDir(), "dev")
			if err := os.WriteFile(nd, []byte(netDev), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := readStats(root, nd); got != tt.want {
				t.Errorf("readStats = %+v, want %+v", got, tt.want)
			}
		})
	}
}
