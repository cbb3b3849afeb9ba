package container

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

var _ sandbox.Updater = (*Backend)(nil)

// Update sets the CPU quota, memory limit and pids limit of a running
// sandbox with `<runtime> update`, the same values buildSpec writes at
// create (memory+swap equal to memory: no swap). The disk size cannot
// change and is ignored. A runtime whose `update` fails makes the caller
// fall back to a new sandbox.
func (b *Backend) Update(ctx context.Context, id string, r sandbox.Resources) error {
	if !validID(id) {
		return fmt.Errorf("%w: bad sandbox id %q", sandbox.ErrInvalid, id)
	}
	m, err := b.readMeta(id)
	if err != nil {
		return fmt.Errorf("%w: sandbox %s", sandbox.ErrNotFound, id)
	}
	rt := b.runtimes[m.Runtime]
	if rt == nil {
		return fmt.Errorf("runtime %q not configured", m.Runtime)
	}
	swap := !b.cgroupV1 || b.hasMemsw
	if rt.gvisor() && swap && r.MemoryMiB > 0 {
		// runsc writes the memory limit before memory+swap, which cgroup
		// v1 refuses when the limit grows past the old memory+swap: raise
		// memory+swap first. When it shrinks this step fails, harmlessly,
		// and the update below sets them in the order that works.
		mem := strconv.FormatInt(r.MemoryMiB<<20, 10)
		_ = exec.CommandContext(ctx, rt.path, append(rt.base(""), "update", "--memory-swap", mem, id)...).Run()
	}
	args := append(rt.base(""), "update")
	args = append(args, updateArgs(r, swap)...)
	args = append(args, id)
	out, err := exec.CommandContext(ctx, rt.path, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s update: %v: %s", rt.name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// updateArgs are the `update` flags for r; swap says whether the host
// has a memory+swap limit to set.
func updateArgs(r sandbox.Resources, swap bool) []string {
	var args []string
	if r.MemoryMiB > 0 {
		mem := strconv.FormatInt(r.MemoryMiB<<20, 10)
		args = append(args, "--memory", mem)
		if swap {
			args = append(args, "--memory-swap", mem)
		}
	}
	if r.VCPUs > 0 {
		const period = 100000
		args = append(args, "--cpu-period", strconv.Itoa(period),
			"--cpu-quota", strconv.FormatInt(int64(r.VCPUs*period), 10))
	}
	if r.PIDs > 0 {
		args = append(args, "--pids-limit", strconv.FormatInt(pidsMax(r.PIDs), 10))
	}
	return args
}
