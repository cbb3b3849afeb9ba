package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
	"golang.org/x/sys/unix"
)

// TestAdversarialHostInterfaces covers what a sandbox can reach of the
// host besides files: cgroup controls, device nodes, loopback services and
// the daemon's API and agent sockets.
func TestAdversarialHostInterfaces(t *testing.T) {
	ctx := ctxT(t)
	sb := newSandbox(t, nil)
	// A host service on loopback and on every other host address.
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan string, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c.RemoteAddr().String()
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	_, apiPort, _ := net.SplitHostPort(shared.opts.listen)
	targets := []string{fmt.Sprintf("127.0.0.1:%d", port), "127.0.0.1:" + apiPort, fmt.Sprintf("[::1]:%d", port)}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
				targets = append(targets, fmt.Sprintf("%s:%d", ipn.IP, port), fmt.Sprintf("%s:%s", ipn.IP, apiPort))
			}
		}
	}
	targets = append(targets, "169.254.169.254:80", fmt.Sprintf("10.0.2.2:%d", port))

	connect := `import socket, sys
for t in sys.argv[1:]:
    host, port = t.rsplit(":", 1)
    host = host.strip("[]")
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect((host, int(port)))
        print("CONNECTED", t)
    except OSError as e:
        print("refused", t, e)
`
	cg := `try() { if ( eval "$1" ) >/dev/null 2>&1; then echo "ALLOWED: $1"; fi; }
T=$(stat -f -c %T /sys/fs/cgroup)
for d in /sys/fs/cgroup /sys/fs/cgroup/*/; do
  [ -d "$d" ] || continue
  for f in memory.limit_in_bytes memory.max memory.memsw.limit_in_bytes memory.high pids.max cpu.max cpu.cfs_quota_us cgroup.procs tasks cgroup.subtree_control release_agent notify_on_release devices.allow cgroup.freeze; do
    [ -e "$d/$f" ] && try "echo \$\$ > $d/$f"
  done
  # On cgroup v1 /sys/fs/cgroup itself is runc's private tmpfs holding the
  # read-only hierarchies (see TestAdversarialTmpfsFill); below it, no
  # cgroup may be created.
  [ "$d" = /sys/fs/cgroup ] && [ "$T" = tmpfs ] && continue
  try "mkdir $d/escape"
done
try "echo 1 > /sys/fs/cgroup/memory/memory.force_empty"
ls /dev | sort | tr '\n' ' '; echo
for dev in /dev/sda /dev/vda /dev/kmsg /dev/mem /dev/kmem /dev/port /dev/loop0 /dev/loop-control /dev/fuse /dev/net/tun /dev/console /dev/tty0 /dev/nvme0n1 /dev/zram0; do
  try "exec 3<$dev"
done
try "mknod /tmp/sda b 8 0"; try "mknod /tmp/vda b 254 0"; try "mknod /tmp/mem c 1 1"
find / -path /proc -prune -o \( -name agent.sock -o -type s \) -print 2>/dev/null | head
ls ` + shared.stateDir + ` 2>&1 | head -2
echo done`
	var conn, cgr *api.ExecResult
	worst := advProbe(t, func() {
		conn, err = sb.Exec(ctx, api.ExecRequest{Argv: append([]string{"python3", "-c", connect}, targets...), TimeoutSeconds: 60})
		if err != nil {
			t.Fatal(err)
		}
		cgr = advExec(t, sb, cg, 60)
	})
	if strings.Contains(conn.Stdout, "CONNECTED") || len(accepted) > 0 {
		t.Errorf("reached a host service: %s (accepted %d)", conn.Stdout, len(accepted))
	}
	if strings.Count("\n"+conn.Stdout, "\nrefused ") != len(targets) {
		t.Errorf("connect attempts: %+v", conn)
	}
	if strings.Contains(cgr.Stdout, "ALLOWED") || !strings.HasSuffix(cgr.Stdout, "done\n") {
		t.Errorf("cgroup/device attempts:\n%s%s", cgr.Stdout, cgr.Stderr)
	}
	lines := strings.Split(cgr.Stdout, "\n")
	devs := strings.Fields(lines[0])
	// crun adds the symlink /dev/core -> /proc/kcore (which is masked).
	wantDevs := []string{"core", "fd", "full", "mqueue", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin", "stdout", "tty", "urandom", "zero"}
	for _, d := range devs {
		if !slices.Contains(wantDevs, d) {
			t.Errorf("unexpected /dev/%s", d)
		}
	}
	if !strings.Contains(cgr.Stdout, "No such file or directory") || strings.Contains(cgr.Stdout, "agent.sock") {
		t.Errorf("the state directory or a socket is visible:\n%s", cgr.Stdout)
	}
	t.Logf("connect attempts:\n%s/dev: %v; worst other-tenant latency %v", conn.Stdout, devs, worst)
}

// TestAdversarialCrossSandbox attacks a neighbour: its processes (by the
// pid numbers it sees and by host pid) and its files.
func TestAdversarialCrossSandbox(t *testing.T) {
	ctx := ctxT(t)
	victim := newSandbox(t, nil)
	attacker := newSandbox(t, nil)
	marker := advMarker("paddock-adv-neighbour")
	if _, err := victim.Files().Write(ctx, "secret.txt", []byte(marker), 0); err != nil {
		t.Fatal(err)
	}
	// Burn some pid numbers first, so the victim's pid is one the attacker
	// does not have itself.
	_, err := victim.Start(ctx, api.ExecRequest{Command: "for i in $(seq 40); do /bin/true; done; sleep 987654 & wait"})
	if err != nil {
		t.Fatal(err)
	}
	hostPID := 0
	for deadline := time.Now().Add(5 * time.Second); hostPID == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		procs, _ := filepath.Glob("/proc/[0-9]*")
		for _, pd := range procs {
			cg, _ := os.ReadFile(pd + "/cgroup")
			cmd, _ := os.ReadFile(pd + "/cmdline")
			if strings.Contains(string(cg), "/"+victim.ID) && strings.HasPrefix(string(cmd), "sleep\x00987654") {
				hostPID, _ = strconv.Atoi(filepath.Base(pd))
			}
		}
	}
	if hostPID == 0 {
		t.Fatal("victim's sleep not found on the host")
	}
	nsPID := 0 // the sleep's pid inside the victim's pid namespace
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", hostPID)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == "NSpid:" {
				nsPID, _ = strconv.Atoi(f[len(f)-1])
			}
		}
	}
	script := fmt.Sprintf(`ps -eo pid,args | grep -c '[9]87654'
# The victim's pid as the victim sees it, unless this sandbox has its own
# process with that number, and its host pid.
for pid in %d %d; do if [ -e /proc/$pid ]; then echo "pid $pid is ours"; else kill -9 $pid 2>&1; fi; done
grep -rsl %s / --exclude-dir=proc --exclude-dir=sys --exclude-dir=usr --exclude-dir=dev | head -3
ls /proc | grep -c '^[0-9]'
echo done`, nsPID, hostPID, marker)
	var res *api.ExecResult
	worst := advProbe(t, func() { res = advExec(t, attacker, script, 60) })
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if len(lines) < 3 || lines[0] != "0" || lines[len(lines)-1] != "done" || strings.Contains(res.Stdout, marker) {
		t.Errorf("attacker saw the neighbour: %+v", res)
	}
	time.Sleep(200 * time.Millisecond)
	if err := syscall.Kill(hostPID, 0); err != nil {
		t.Errorf("victim's process (host pid %d, pid %d inside) is gone: %v", hostPID, nsPID, err)
	}
	if r := advExec(t, victim, "ps -eo args | grep -c '^[s]leep 987654'", 10); r.Stdout != "1\n" {
		t.Errorf("victim's process: %q", r.Stdout)
	}
	t.Logf("attacker (kill -9 %d and %d):\n%s; worst other-tenant latency %v", nsPID, hostPID, res.Stdout, worst)
}

// TestAdversarialHostDeviceNodes checks, under every runtime the daemon
// offers, that the device nodes a sandbox shares with the host (bind
// mounts of the host's /dev/null, /dev/zero, ...) stay owned by host root:
// otherwise root in the sandbox could chmod the host's /dev/null.
func TestAdversarialHostDeviceNodes(t *testing.T) {
	requireDaemon(t)
	devs := []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}
	type owner struct{ uid, gid, mode uint32 }
	stat := func() map[string]owner {
		m := map[string]owner{}
		for _, d := range devs {
			var st syscall.Stat_t
			if syscall.Stat(d, &st) == nil {
				m[d] = owner{st.Uid, st.Gid, st.Mode & 0o7777}
			}
		}
		return m
	}
	before := stat()
	for d, o := range before {
		if o.uid != 0 || o.gid != 0 {
			t.Logf("%s is owned by %d:%d before the test (an earlier sandbox?)", d, o.uid, o.gid)
		}
	}
	restore := func() { // every one of them is root:root 0666 on a stock host
		for d := range before {
			os.Chown(d, 0, 0)
			os.Chmod(d, 0o666)
		}
	}
	t.Cleanup(restore)
	restore()
	templates := []string{"base"}
	if _, err := advLookBin("crun"); err == nil && shared.opts.config != "" {
		templates = append(templates, "base-crun")
	}
	for _, tpl := range templates {
		t.Run(tpl, func(t *testing.T) {
			sb := newSandbox(t, &api.CreateSandboxRequest{Template: tpl})
			var changed []string
			for d, o := range stat() {
				if o.uid != 0 || o.gid != 0 {
					changed = append(changed, fmt.Sprintf("%s now owned by %d:%d", d, o.uid, o.gid))
				}
			}
			res := advExec(t, sb, `for d in /dev/null /dev/zero /dev/full /dev/random /dev/urandom /dev/tty; do
  if chmod 600 $d 2>/dev/null; then echo "ALLOWED: chmod $d"; fi
  if chown 1000 $d 2>/dev/null; then echo "ALLOWED: chown $d"; fi
  if touch -d 2000-01-01 $d 2>/dev/null; then echo "ALLOWED: touch $d"; fi
done; echo done`, 30)
			for d, o := range stat() {
				if o.mode&0o777 != 0o666 {
					changed = append(changed, fmt.Sprintf("%s mode now %o", d, o.mode&0o777))
				}
			}
			if len(changed) > 0 || strings.Contains(res.Stdout, "ALLOWED") {
				// Seen with crun 1.8.1, which fchowns the runtime's stdio to
				// the container's root, while the daemon started the runtime
				// with the host's /dev/null as stdin (os/exec's default).
				t.Errorf("host device nodes changed by a %s sandbox (runtime %s): %v\ninside: %s", tpl, sb.Runtime, changed, res.Stdout)
			}
			restore()
		})
	}
	advDaemonAnswers(t)
}

// TestAdversarialTmpfsFill fills every writable in-memory filesystem of a
// sandbox: /dev/shm and /dev (64 MiB tmpfs each) and, on cgroup v1 hosts,
// the runtime's writable tmpfs at /sys/fs/cgroup (sized by the kernel at
// half the host's RAM). Tmpfs pages are charged to the sandbox's memory
// cgroup, so the writer dies at the sandbox's memory limit, the host's
// memory is untouched and the agent keeps answering.
func TestAdversarialTmpfsFill(t *testing.T) {
	const memMiB = 128 // more than /dev/shm's 64 MiB, so filling it leaves room for the agent
	sb := newSandbox(t, &api.CreateSandboxRequest{Resources: &api.Resources{MemoryMiB: memMiB}})
	var results []string
	worst := advProbe(t, func() {
		for _, dir := range []string{"/dev/shm", "/dev", "/sys/fs/cgroup"} {
			res := advExec(t, sb, fmt.Sprintf("[ -w %[1]s ] || { echo read-only; exit 0; }; dd if=/dev/zero of=%[1]s/fill bs=1M count=%[2]d 2>&1 | tail -1; ls -s --block-size=M %[1]s/fill", dir, 4*memMiB), 60)
			results = append(results, fmt.Sprintf("%s: exit %v signal %v oom %v %q", dir, ptr(res.ExitCode), ptr(res.Signal), res.OOMKilled, strings.TrimSpace(res.Stdout)))
			// The fill file holds the cgroup's memory, so a new process
			// (an `rm`) may itself be OOM-killed: remove it through the
			// agent's file API, which runs no process, then check that
			// commands run again.
			if err := sb.Files().Remove(ctxT(t), dir+"/fill", false); err != nil && !errors.Is(err, client.ErrNotFound) {
				t.Errorf("remove %s/fill: %v", dir, err)
			}
			if r := advExec(t, sb, "echo usable", 30); r.Stdout != "usable\n" {
				t.Errorf("sandbox after filling %s: %+v", dir, r)
			}
		}
	})
	for _, d := range cgroupDirsOf(sb.ID) {
		for _, f := range []string{"memory.max_usage_in_bytes", "memory.peak"} {
			if b, err := os.ReadFile(filepath.Join(d, f)); err == nil {
				n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
				results = append(results, fmt.Sprintf("peak memory %d MiB", n>>20))
				if n > (memMiB+1)<<20 {
					t.Errorf("sandbox cgroup peaked at %d bytes over its %d MiB limit", n, memMiB)
				}
			}
		}
	}
	t.Logf("%s; worst other-tenant latency %v", strings.Join(results, "; "), worst)
}

// TestAdversarialLeakedFDs checks that no descriptor, cwd or root visible
// in a sandbox leads to the host: readlinks, ../ walks through
// /proc/<pid>/fd/N, reads of host decoys and /etc/shadow through them, and
// exec with a cwd under /proc.
func TestAdversarialLeakedFDs(t *testing.T) {
	ctx := ctxT(t)
	marker := advMarker("paddock-adv-fd")
	secret := advMarker("HOST-SECRET")
	advHostDecoys(t, secret, "/tmp/"+marker, "/root/"+marker, "/"+marker)
	shadow, _ := os.ReadFile("/etc/shadow")
	sb := newSandbox(t, nil)
	if _, err := sb.Files().Write(ctx, "fds.py", []byte(advFDProbe), 0); err != nil {
		t.Fatal(err)
	}
	// A background process keeps a few more descriptors (pipes, files) open.
	if _, err := sb.Start(ctx, api.ExecRequest{Command: "exec 7</etc/passwd 8<>/tmp/f 9</; sleep 300"}); err != nil {
		t.Fatal(err)
	}
	up := strings.Repeat("../", 12)
	rels := []string{up + "etc/shadow", up + "tmp/" + marker, up + "root/" + marker, up + marker, "../../../../../../" + marker}
	var res *api.ExecResult
	worst := advProbe(t, func() {
		res, _ = sb.Exec(ctx, api.ExecRequest{Argv: append([]string{"python3", "fds.py"}, rels...), TimeoutSeconds: 60, MaxOutputBytes: 8 << 20})
	})
	var out struct {
		Links  map[string]string `json:"links"`
		Reads  map[string]string `json:"reads"`
		Escape []string          `json:"escape"`
		Dirs   int               `json:"dirs"`
	}
	if res == nil || res.ExitCode == nil || *res.ExitCode != 0 || json.Unmarshal([]byte(res.Stdout), &out) != nil {
		t.Fatalf("fd probe: %+v", res)
	}
	if len(out.Escape) > 0 {
		t.Errorf("directories outside the sandbox's root reached through: %v", out.Escape)
	}
	for q, v := range out.Reads {
		if strings.Contains(v, secret) || (len(shadow) > 0 && strings.Contains(v, strings.SplitN(string(shadow), "\n", 2)[0])) {
			t.Errorf("read host content through %s: %.80q", q, v)
		}
	}
	for _, p := range []string{"/proc/1/cwd", "/proc/1/root", "/proc/1/exe"} {
		if v := out.Links[p]; !strings.HasPrefix(v, "ERR") {
			t.Errorf("%s of the agent is readable: %q", p, v)
		}
	}
	for p, v := range out.Links {
		if strings.Contains(v, shared.stateDir) || strings.Contains(v, "/paddock-it-") {
			t.Errorf("%s -> %q names a host path", p, v)
		}
	}
	t.Logf("checked %d links, %d directories walked to their top, %d reads succeeded (all sandbox files), worst other-tenant latency %v",
		len(out.Links), out.Dirs, len(out.Reads), worst)

	t.Run("agent seen from the host", func(t *testing.T) {
		// The agent's cwd, root and descriptors, read on the host: all inside
		// the sandbox's rootfs or anonymous (pipes, sockets, the null device).
		rootfs := filepath.Join(shared.stateDir, "containers", sb.ID, "rootfs")
		agent := 0
		procs, _ := filepath.Glob("/proc/[0-9]*")
		for _, pd := range procs {
			cg, _ := os.ReadFile(pd + "/cgroup")
			cmd, _ := os.ReadFile(pd + "/cmdline")
			if strings.Contains(string(cg), "/"+sb.ID) && strings.HasPrefix(string(cmd), "/.paddock/paddock-agent\x00serve") {
				agent, _ = strconv.Atoi(filepath.Base(pd))
			}
		}
		if agent == 0 {
			t.Fatal("agent process not found on the host")
		}
		// The sandbox's root overlay is mounted only in its own mount
		// namespace (the host's rootfs/ is an empty directory): the
		// agent's root and cwd must be the root of an overlay mounted at
		// "/" there, not the host's root.
		want, fstype := sandboxRootMount(t, agent)
		if fstype != "overlay" {
			t.Errorf("the sandbox's / is a %q mount, want overlay", fstype)
		}
		var hostRoot syscall.Stat_t
		if err := syscall.Stat("/", &hostRoot); err != nil {
			t.Fatal(err)
		}
		for _, l := range []string{"cwd", "root"} {
			// readlink shows "/" across mount namespaces: compare devices.
			var st syscall.Stat_t
			if err := syscall.Stat(fmt.Sprintf("/proc/%d/%s", agent, l), &st); err != nil || st.Dev != want || st.Dev == hostRoot.Dev {
				t.Errorf("agent %s is not the sandbox's root overlay (device %d, want %d; %v)", l, st.Dev, want, err)
			}
		}
		fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", agent))
		var targets []string
		for _, fd := range fds {
			v, _ := os.Readlink(fd)
			targets = append(targets, filepath.Base(fd)+"->"+v)
			switch {
			case strings.HasPrefix(v, "pipe:"), strings.HasPrefix(v, "socket:"), strings.HasPrefix(v, "anon_inode:"),
				v == "/dev/null", strings.HasPrefix(v, rootfs), strings.HasPrefix(v, "/sys/fs/cgroup/"):
			default:
				t.Errorf("agent holds %s -> %q", fd, v)
			}
		}
		t.Logf("agent (host pid %d) descriptors: %v", agent, targets)
	})

	t.Run("exec cwd under /proc", func(t *testing.T) {
		for _, cwd := range []string{"/proc/1/cwd", "/proc/1/root", "/proc/1/fd/3", "/proc/self/fd/0", "/proc/self/cwd/" + up, "/proc/self/root/" + up + "tmp"} {
			// Inside the sandbox these resolve to the sandbox's own
			// directories (or are refused); the host decoys stay unreachable.
			r, err := sb.Exec(ctx, api.ExecRequest{Command: "pwd; cat " + marker + " tmp/" + marker + " root/" + marker + " " + up + "tmp/" + marker + " 2>/dev/null; ls -a", Cwd: cwd})
			var ae *client.APIError
			switch {
			case errors.As(err, &ae) && ae.StatusCode >= 400 && ae.StatusCode < 500:
				t.Logf("cwd %s: refused (%v)", cwd, err)
			case err != nil:
				t.Errorf("cwd %s: %v", cwd, err)
			case strings.Contains(r.Stdout, secret):
				t.Errorf("cwd %s reached the host: %q", cwd, r.Stdout)
			default:
				t.Logf("cwd %s: ran in %s", cwd, strings.SplitN(r.Stdout, "\n", 2)[0])
			}
		}
	})
}

// sandboxRootMount returns the device and file system type of the mount
// at "/" in the mount namespace of process pid.
func sandboxRootMount(t *testing.T, pid int) (uint64, string) {
	t.Helper()
	mi, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	var dev uint64
	var fstype string
	for _, line := range strings.Split(string(mi), "\n") {
		f := strings.Fields(line)
		if len(f) < 7 || f[4] != "/" {
			continue
		}
		sep := slices.Index(f, "-")
		if sep < 0 || sep+1 >= len(f) {
			continue
		}
		var major, minor uint32
		if _, err := fmt.Sscanf(f[2], "%d:%d", &major, &minor); err != nil {
			continue
		}
		dev, fstype = unix.Mkdev(major, minor), f[sep+1] // the last mount at "/" is the one seen
	}
	if fstype == "" {
		t.Fatalf("no mount at / in process %d's mountinfo", pid)
	}
	return dev, fstype
}
