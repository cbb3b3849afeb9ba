package container

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"golang.org/x/sys/unix"
)

// agentPIDsReserve is how many pids the cgroup grants beyond the
// sandbox's pids, for the agent.
const agentPIDsReserve = 64

// shimTasks is what the agent's shim for one command may hold in threads
// (internal/agent's shimTasks).
const shimTasks = 8

// pidsMax is the cgroup's pids limit for a sandbox with pids processes:
// the processes, a shim's threads for each (a background process keeps
// its shim; commands run under RLIMIT_NPROC = pids plus the live shims'
// threads, set by the agent) and the agent's reserve.
func pidsMax(pids int64) int64 {
	return pids*(1+shimTasks) + agentPIDsReserve
}

// idRange is the size of the uid and gid range each sandbox maps.
const idRange = 65536

// capabilities is the minimal set the sandbox's root keeps (within its own
// user namespace). Notably absent: SYS_ADMIN, NET_ADMIN, NET_RAW, SYS_PTRACE,
// MKNOD, SYS_CHROOT, AUDIT_WRITE, SETFCAP.
var capabilities = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_NET_BIND_SERVICE",
}

var maskedPaths = []string{
	"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
	"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
	"/sys/firmware", "/sys/devices/virtual/powercap", "/proc/interrupts",
}

var readonlyPaths = []string{
	"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
}

// specParams is what buildSpec needs beyond the request.
type specParams struct {
	ID           string
	CgroupParent string
	Rootfs       string
	HostMounts   []string
	UIDBase      uint32
	Resources    sandbox.Resources
	Env          map[string]string
	CgroupV1     bool
	HasMemsw     bool
	// SpareIdle is the agent's --spare-idle (0: the agent keeps its spare
	// shim).
	SpareIdle time.Duration
	// IdleExec is the agent's --idle-exec ("": the agent never
	// hibernates).
	IdleExec string
}

// buildSpec writes the OCI runtime spec of one sandbox.
func buildSpec(p specParams) (*specs.Spec, error) {
	env := []string{
		"PATH=" + sandboxPath,
		"HOME=/root", "USER=root", "LANG=C.UTF-8", "TERM=xterm", "HOSTNAME=sandbox",
		"PYTHONUNBUFFERED=1",
	}
	keys := make([]string, 0, len(p.Env))
	for k := range p.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+p.Env[k])
	}
	caps := append([]string(nil), capabilities...)
	args := []string{agentPath, "serve", "--listen-fd", "3", "--workdir", "/workspace",
		"--nproc", strconv.FormatInt(p.Resources.PIDs, 10)}
	if p.SpareIdle > 0 {
		args = append(args, "--spare-idle", p.SpareIdle.String())
	}
	if p.IdleExec != "" {
		args = append(args, "--idle-exec", p.IdleExec)
	}
	s := &specs.Spec{
		Version: "1.0.2", // the oldest version every runtime we support accepts (crun 1.8 refuses newer)
		Root:    &specs.Root{Path: p.Rootfs},
		Process: &specs.Process{
			User: specs.User{UID: 0, GID: 0},
			Args: args,
			Env:  env,
			Cwd:  "/",
			Capabilities: &specs.LinuxCapabilities{
				Bounding: caps, Effective: caps, Permitted: caps,
			},
			Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_NOFILE", Hard: nofile(), Soft: nofile()},
				{Type: "RLIMIT_CORE", Hard: 0, Soft: 0},
			},
			NoNewPrivileges: true,
		},
		Hostname: "sandbox",
		Mounts:   baseMounts(p.HostMounts, shmSize(p.Resources.MemoryMiB)),
		Linux: &specs.Linux{
			UIDMappings: []specs.LinuxIDMapping{{ContainerID: 0, HostID: p.UIDBase, Size: idRange}},
			GIDMappings: []specs.LinuxIDMapping{{ContainerID: 0, HostID: p.UIDBase, Size: idRange}},
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
				{Type: specs.MountNamespace}, {Type: specs.NetworkNamespace},
				{Type: specs.UserNamespace}, {Type: specs.CgroupNamespace},
			},
			CgroupsPath:   "/" + p.CgroupParent + "/" + p.ID,
			Resources:     resources(p),
			Devices:       defaultDevices(),
			MaskedPaths:   maskedPaths,
			ReadonlyPaths: readonlyPaths,
			Sysctl:        map[string]string{"net.ipv4.ping_group_range": "0 65535"},
		},
	}
	sc, err := seccomp.GetDefaultProfile(s)
	if err != nil {
		return nil, fmt.Errorf("seccomp profile: %w", err)
	}
	// Only the native syscall ABI: the compat ABIs (x86 and x32 on
	// amd64) are refused outright. That is less kernel surface, and the
	// runtime compiles a third of the filter on every create.
	sc.Architectures = nativeArch(sc.Architectures)
	s.Linux.Seccomp = sc
	return s, nil
}

// nativeArch keeps the first of the profile's architectures, the host's
// own (the default profile lists it before its compat ABIs).
func nativeArch(archs []specs.Arch) []specs.Arch {
	if len(archs) == 0 {
		return archs
	}
	return archs[:1]
}

// shmSize is /dev/shm's size: 64 MiB, or a quarter of the memory limit if
// smaller, so filling it cannot starve the agent of memory.
func shmSize(memoryMiB int64) string {
	kib := min(int64(65536), memoryMiB*1024/4)
	return fmt.Sprintf("size=%dk", max(kib, 1024))
}

func baseMounts(hostMounts []string, shm string) []specs.Mount {
	m := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", shm}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
	}
	for _, d := range hostMounts {
		m = append(m, specs.Mount{Destination: d, Type: "bind", Source: d, Options: []string{"rbind", "ro", "nodev"}})
	}
	return m
}

func resources(p specParams) *specs.LinuxResources {
	mem := p.Resources.MemoryMiB << 20
	// Commands run under RLIMIT_NPROC = pids (set by the agent's shim); the
	// cgroup allows a reserve on top so the agent can always start a
	// thread or a shim, even under a fork bomb.
	pidsMax := pidsMax(p.Resources.PIDs)
	r := &specs.LinuxResources{
		Memory: &specs.LinuxMemory{Limit: &mem},
		CPU:    &specs.LinuxCPU{},
		Pids:   &specs.LinuxPids{Limit: &pidsMax},
	}
	if !p.CgroupV1 || p.HasMemsw {
		swap := mem // memory+swap == memory: no swap
		r.Memory.Swap = &swap
	}
	if p.Resources.VCPUs > 0 {
		period := uint64(100000)
		quota := int64(p.Resources.VCPUs * float64(period))
		r.CPU.Period, r.CPU.Quota = &period, &quota
	}
	// Device cgroup: deny everything but the default devices.
	r.Devices = []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}
	for _, d := range defaultDevices() {
		maj, min := d.Major, d.Minor
		r.Devices = append(r.Devices, specs.LinuxDeviceCgroup{Allow: true, Type: d.Type, Major: &maj, Minor: &min, Access: "rwm"})
	}
	ptsMaj, ptmxMaj, ptmx := int64(136), int64(5), int64(2)
	r.Devices = append(r.Devices,
		specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: &ptsMaj, Access: "rwm"}, // nil minor: all ptys
		specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: &ptmxMaj, Minor: &ptmx, Access: "rwm"})
	return r
}

func defaultDevices() []specs.LinuxDevice {
	// In a user namespace the runtime cannot mknod: it bind-mounts the
	// host's device nodes, so ownership and mode stay the host's.
	dev := func(path string, maj, min int64) specs.LinuxDevice {
		return specs.LinuxDevice{Path: path, Type: "c", Major: maj, Minor: min}
	}
	return []specs.LinuxDevice{
		dev("/dev/null", 1, 3), dev("/dev/zero", 1, 5), dev("/dev/full", 1, 7),
		dev("/dev/random", 1, 8), dev("/dev/urandom", 1, 9), dev("/dev/tty", 5, 0),
	}
}

// nofile is the sandbox's open-file limit: 65536, or the daemon's own hard
// limit if lower (a user namespace cannot raise it).
func nofile() uint64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err == nil && rl.Max < 65536 {
		return rl.Max
	}
	return 65536
}
