package agent

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestOOMKillCount(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       int64
	}{
		{"v2 memory.events", "low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\noom_group_kill 0\n", 2},
		{"v1 memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 7\n", 7},
		{"no count", "oom_kill_disable 1\nunder_oom 0\n", 0},
		{"empty", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := oomKillCount([]byte(tc.data)); got != tc.want {
				t.Errorf("oomKillCount = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestSelfThreads checks the runtime's thread count against the kernel's.
func TestSelfThreads(t *testing.T) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			want, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	// Threads may start or end between the two reads.
	if got := selfThreads(); got < want-2 || got > want+2 || got <= 0 {
		t.Errorf("selfThreads = %d, /proc/self/status says %d", got, want)
	}
}
