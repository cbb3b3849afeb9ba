package integration

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/paddock-sandbox/paddock/internal/network"
)

// cgroupDirsOf lists the cgroup directories of sandbox id on the host.
func cgroupDirsOf(id string) []string {
	var out []string
	for _, p := range []string{"/sys/fs/cgroup/paddock*/" + id, "/sys/fs/cgroup/*/paddock*/" + id} {
		m, _ := filepath.Glob(p)
		out = append(out, m...)
	}
	return out
}

// cgroupCPUNS is the CPU time in nanoseconds of the cgroup at dir and its
// descendants (cgroup v1 cpuacct.usage or v2 cpu.stat), or -1 if dir has
// neither.
func cgroupCPUNS(dir string) int64 {
	if b, err := os.ReadFile(filepath.Join(dir, "cpuacct.usage")); err == nil {
		n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return n
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cpu.stat")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "usage_usec" {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				return n * 1000
			}
		}
	}
	return -1
}

// hostTraces counts what sandboxes of a state directory hold on the host:
// cgroups, the network namespaces pinned in the daemon's pin namespace
// (Netns, found through its pin <state>/netns.mnt: a sandbox with a
// network keeps one while it runs), mounts under the state dir (Mounts),
// processes whose root is
// under it, loop devices backed by files under it, and their disks in the
// disk pool (<state>/disks/<id>). The disk pool's own mount and loop
// device are the daemon's, shared by all sandboxes, and not counted.
type hostTraces struct {
	Cgroups, Mounts, Netns, Processes, Loops, Disks int
	Details                                         []string
}

func (h hostTraces) zero() bool {
	return h.Cgroups == 0 && h.Mounts == 0 && h.Netns == 0 && h.Processes == 0 && h.Loops == 0 && h.Disks == 0
}

func tracesOf(stateDir string, ids []string, uidLo, uidHi int) hostTraces {
	var h hostTraces
	for _, id := range ids {
		h.Cgroups += len(cgroupDirsOf(id))
	}
	pinned, err := network.PinnedIDs(stateDir)
	h.Netns = len(pinned)
	if err != nil {
		h.Netns++
		h.Details = append(h.Details, "pin namespace: "+err.Error())
	}
	if f, err := os.Open("/proc/self/mountinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			// The pin namespace's pin and the disk pool are the
			// daemon's, not a sandbox's.
			switch {
			case len(fs) <= 4 || !strings.HasPrefix(fs[4], stateDir+"/") || fs[4] == stateDir+"/netns.mnt" || fs[4] == stateDir+"/disks":
			default:
				h.Mounts++
				h.Details = append(h.Details, "mount "+fs[4])
			}
		}
		f.Close()
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		cg, _ := os.ReadFile(p + "/cgroup")
		in := false
		for _, id := range ids {
			if strings.Contains(string(cg), "/"+id+"\n") || strings.Contains(string(cg), "/"+id+" ") {
				in = true
			}
		}
		if (in || uidInRange(p, uidLo, uidHi)) && !zombie(p) {
			h.Processes++
			cmd, _ := os.ReadFile(p + "/cmdline")
			h.Details = append(h.Details, fmt.Sprintf("%s %q %s", p, cmd, strings.TrimSpace(string(cg))))
		}
	}
	loops, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, l := range loops {
		if b, err := os.ReadFile(l); err == nil && strings.HasPrefix(string(b), stateDir+"/") && strings.TrimSpace(string(b)) != stateDir+"/disks.img" {
			h.Loops++
		}
	}
	for _, id := range ids {
		if _, err := os.Lstat(filepath.Join(stateDir, "disks", id)); err == nil {
			h.Disks++
			h.Details = append(h.Details, "disk "+id)
		}
	}
	return h
}

// uidInRange reports whether the real uid of /proc/<pid> is in [lo, hi).
func uidInRange(procDir string, lo, hi int) bool {
	b, err := os.ReadFile(procDir + "/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			uid, err := strconv.Atoi(f[1])
			return err == nil && uid >= lo && uid < hi
		}
	}
	return false
}

// zombie reports whether /proc/<pid> has exited and awaits its parent.
func zombie(procDir string) bool {
	b, err := os.ReadFile(procDir + "/stat")
	if err != nil {
		return true // gone
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}
