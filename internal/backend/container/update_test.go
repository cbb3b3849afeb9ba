package container

import (
	"slices"
	"testing"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

func TestUpdateArgs(t *testing.T) {
	r := sandbox.Resources{VCPUs: 0.5, MemoryMiB: 256, DiskMiB: 999, PIDs: 100}
	want := []string{"--memory", "268435456", "--memory-swap", "268435456",
		"--cpu-period", "100000", "--cpu-quota", "50000", "--pids-limit", "964"} // pidsMax(100)
	if got := updateArgs(r, true); !slices.Equal(got, want) {
		t.Fatalf("with swap: %q", got)
	}
	noSwap := append(slices.Clone(want[:2]), want[4:]...)
	if got := updateArgs(r, false); !slices.Equal(got, noSwap) {
		t.Fatalf("without swap: %q", got)
	}
	// The same limits as a new sandbox's spec.
	res := resources(specParams{Resources: r, HasMemsw: true})
	if *res.Memory.Limit != 256<<20 || *res.Memory.Swap != 256<<20 || *res.CPU.Quota != 50000 ||
		*res.CPU.Period != 100000 || *res.Pids.Limit != pidsMax(100) {
		t.Fatalf("spec resources differ: %+v", res)
	}
}
