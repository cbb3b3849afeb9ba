package agent_test

import (
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// BenchmarkAgentExec times `python3 -c 'print(1)'` through a standalone
// agent's POST /exec and bare, interleaved, and prints the medians and
// exec minus bare: the agent's own cost per command, without a sandbox.
func BenchmarkAgentExec(b *testing.B) {
	h, _ := startAgentProcess(b)
	py := api.ExecRequest{Argv: []string{"/usr/bin/python3", "-c", "print(1)"}}
	h.exec(py)
	var tExec, tBare []time.Duration
	for range b.N {
		t0 := time.Now()
		if res := h.exec(py); res.Stdout != "1\n" {
			b.Fatalf("exec: %+v", res)
		}
		tExec = append(tExec, time.Since(t0))
		t0 = time.Now()
		if out, err := exec.Command("/usr/bin/python3", "-c", "print(1)").Output(); err != nil || string(out) != "1\n" {
			b.Fatalf("bare: %q %v", out, err)
		}
		tBare = append(tBare, time.Since(t0))
	}
	med := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	fmt.Printf("agent exec python3 -c print(1): median %v, bare %v, exec − bare %v over %d\n", med(tExec), med(tBare), med(tExec)-med(tBare), b.N)
}
