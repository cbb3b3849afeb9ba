package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// Escape attempts: every one runs as root inside a sandbox (root in its own
// user namespace) and must end inside the sandbox.

// advSyscallProbe tries syscalls that must fail in a sandbox and prints one
// line per attempt: the name and the errno (0 when the call succeeded).
const advSyscallProbe = `#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/wait.h>

static void rep(const char *name, long r) {
	printf("%s %d\n", name, r < 0 ? errno : 0);
	fflush(stdout);
}

/* forked runs f in a child (so a call that succeeds cannot disturb the
   probe) and reports its errno. */
static void forked(const char *name, long (*f)(void)) {
	int p[2];
	if (pipe(p) < 0) { rep(name, -1); return; }
	pid_t pid = fork();
	if (pid == 0) {
		long r = f();
		int e = r < 0 ? errno : 0;
		write(p[1], &e, sizeof e);
		_exit(0);
	}
	int e = -1;
	close(p[1]);
	read(p[0], &e, sizeof e);
	close(p[0]);
	waitpid(pid, NULL, 0);
	printf("%s %d\n", name, e);
	fflush(stdout);
}

static long do_unshare_user(void) { return unshare(CLONE_NEWUSER); }
static long do_unshare_net(void) { return unshare(CLONE_NEWNET); }
static long do_unshare_mnt(void) { return unshare(CLONE_NEWNS); }
static long do_unshare_pid(void) { return unshare(CLONE_NEWPID); }
static long do_unshare_cgroup(void) { return unshare(CLONE_NEWCGROUP); }
static long do_clone_user(void) {
	long r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
	if (r == 0) _exit(0);
	return r;
}
static long do_clone3(void) {
	struct { unsigned long long flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls; } a;
	memset(&a, 0, sizeof a);
	a.flags = CLONE_NEWUSER; a.exit_signal = SIGCHLD;
	long r = syscall(SYS_clone3, &a, sizeof a);
	if (r == 0) _exit(0);
	return r;
}
static long do_setns(const char *path, int type) {
	int fd = open(path, O_RDONLY);
	if (fd < 0) return -1;
	return setns(fd, type);
}
static char nspath[64];
static long do_setns_parent_mnt(void) { snprintf(nspath, sizeof nspath, "/proc/%d/ns/mnt", getppid()); return do_setns(nspath, 0); }
static long do_setns_parent_user(void) { snprintf(nspath, sizeof nspath, "/proc/%d/ns/user", getppid()); return do_setns(nspath, 0); }
static long do_setns_pid1_mnt(void) { return do_setns("/proc/1/ns/mnt", 0); }
static long do_setns_pid1_net(void) { return do_setns("/proc/1/ns/net", 0); }
static long do_chroot(void) { return chroot("/tmp"); }

int main(void) {
	char buf[64];
	struct iovec local = {buf, sizeof buf}, remote = {(void *)0x400000, sizeof buf};

	rep("mount_tmpfs", mount("none", "/mnt", "tmpfs", 0, NULL));
	rep("mount_bind_root", mount("/", "/mnt", NULL, MS_BIND | MS_REC, NULL));
	rep("mount_proc", mount("proc", "/mnt", "proc", 0, NULL));
	rep("mount_cgroup", mount("cgroup", "/mnt", "cgroup", 0, "memory"));
	rep("remount_sys_rw", mount(NULL, "/sys", NULL, MS_REMOUNT | MS_BIND, NULL));
	rep("umount_proc_sys", umount2("/proc/sys", MNT_DETACH));
	rep("umount_masked", umount2("/proc/kcore", MNT_DETACH));
	rep("pivot_root", syscall(SYS_pivot_root, "/tmp", "/tmp"));
	forked("chroot", do_chroot);
	rep("fsopen", syscall(SYS_fsopen, "tmpfs", 0));
	rep("fspick", syscall(SYS_fspick, AT_FDCWD, "/", 0));
	rep("open_tree", syscall(SYS_open_tree, AT_FDCWD, "/", 1 /* OPEN_TREE_CLONE */));
	rep("move_mount", syscall(SYS_move_mount, AT_FDCWD, "/tmp", AT_FDCWD, "/mnt", 0));
	rep("mount_setattr", syscall(SYS_mount_setattr, AT_FDCWD, "/usr", 0, NULL, 0));

	forked("unshare_user", do_unshare_user);
	forked("unshare_net", do_unshare_net);
	forked("unshare_mnt", do_unshare_mnt);
	forked("unshare_pid", do_unshare_pid);
	forked("unshare_cgroup", do_unshare_cgroup);
	forked("clone_newuser", do_clone_user);
	forked("clone3_newuser", do_clone3);
	forked("setns_parent_mnt", do_setns_parent_mnt);
	forked("setns_parent_user", do_setns_parent_user);
	forked("setns_pid1_mnt", do_setns_pid1_mnt);
	forked("setns_pid1_net", do_setns_pid1_net);

	rep("ptrace_attach_pid1", ptrace(PTRACE_ATTACH, 1, 0, 0));
	rep("ptrace_seize_pid1", ptrace(PTRACE_SEIZE, 1, 0, 0));
	rep("process_vm_readv_pid1", process_vm_readv(1, &local, 1, &remote, 1, 0));
	rep("open_pid1_mem", open("/proc/1/mem", O_RDWR));
	int pfd = syscall(SYS_pidfd_open, 1, 0);
	rep("pidfd_getfd_pid1", pfd < 0 ? pfd : syscall(SYS_pidfd_getfd, pfd, 3, 0));

	rep("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0));
	rep("kexec_file_load", syscall(SYS_kexec_file_load, -1, -1, 0, "", 0));
	rep("init_module", syscall(SYS_init_module, "", 0, ""));
	rep("finit_module", syscall(SYS_finit_module, 0, "", 0));
	rep("delete_module", syscall(SYS_delete_module, "loop", O_NONBLOCK));

	union bpf_attr ba;
	memset(&ba, 0, sizeof ba);
	ba.map_type = BPF_MAP_TYPE_ARRAY; ba.key_size = 4; ba.value_size = 4; ba.max_entries = 1;
	rep("bpf_map_create", syscall(SYS_bpf, BPF_MAP_CREATE, &ba, sizeof ba));
	struct perf_event_attr pa;
	memset(&pa, 0, sizeof pa);
	pa.type = PERF_TYPE_SOFTWARE; pa.size = sizeof pa; pa.config = PERF_COUNT_SW_CPU_CLOCK;
	rep("perf_event_open", syscall(SYS_perf_event_open, &pa, 0, -1, -1, 0));
	rep("keyctl_join", syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, "paddock"));
	rep("keyctl_read_user", syscall(SYS_keyctl, KEYCTL_READ, KEY_SPEC_USER_KEYRING, buf, sizeof buf));
	rep("add_key", syscall(SYS_add_key, "user", "k", "v", 1, KEY_SPEC_PROCESS_KEYRING));
	rep("request_key", syscall(SYS_request_key, "user", "k", NULL, 0));
	rep("io_uring_setup", syscall(SYS_io_uring_setup, 8, buf));
	rep("userfaultfd", syscall(SYS_userfaultfd, 0));
	rep("fanotify_init", syscall(SYS_fanotify_init, 0, 0));

	rep("socket_packet_raw", socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL)));
	rep("socket_packet_dgram", socket(AF_PACKET, SOCK_DGRAM, htons(ETH_P_ALL)));
	rep("socket_inet_raw_icmp", socket(AF_INET, SOCK_RAW, IPPROTO_ICMP));
	rep("socket_inet_raw_raw", socket(AF_INET, SOCK_RAW, IPPROTO_RAW));
	rep("socket_inet6_raw", socket(AF_INET6, SOCK_RAW, IPPROTO_RAW));

	rep("mknod_blk_sda", mknod("/tmp/sda", S_IFBLK | 0600, makedev(8, 0)));
	rep("mknod_blk_vda", mknod("/tmp/vda", S_IFBLK | 0600, makedev(254, 0)));
	rep("mknod_chr_mem", mknod("/tmp/mem", S_IFCHR | 0600, makedev(1, 1)));
	rep("mknod_chr_kmsg", mknod("/tmp/kmsg", S_IFCHR | 0600, makedev(1, 11)));
	rep("open_by_handle_at", syscall(SYS_open_by_handle_at, AT_FDCWD, buf, O_RDONLY));
	rep("swapon", syscall(SYS_swapon, "/tmp/swap", 0));
	rep("reboot", syscall(SYS_reboot, 0xfee1dead, 672274793, 0x4321FEDC, NULL));
	struct timespec ts = {1, 0};
	rep("clock_settime", syscall(SYS_clock_settime, CLOCK_REALTIME, &ts));
	rep("settimeofday", syscall(SYS_settimeofday, NULL, NULL));
	rep("sethostname", sethostname("escaped", 7));
	rep("setdomainname", setdomainname("escaped", 7));
	rep("syslog_read", syscall(SYS_syslog, 3, buf, sizeof buf));
	rep("iopl", syscall(SYS_iopl, 3));
	rep("ioperm", syscall(SYS_ioperm, 0x80, 1, 1));
	rep("acct", syscall(SYS_acct, "/tmp/acct"));
	rep("quotactl", syscall(SYS_quotactl, 0x800002 /* Q_GETQUOTA */, "/dev/vda", 0, buf));
	rep("lookup_dcookie", syscall(SYS_lookup_dcookie, 0, buf, sizeof buf));
	rep("vhangup", syscall(SYS_vhangup));
	rep("setrlimit_nofile_up", ({ struct { unsigned long cur, max; } rl = {1 << 24, 1 << 24}; syscall(SYS_setrlimit, 7 /* RLIMIT_NOFILE */, &rl); }));
	return 0;
}
`

// TestAdversarialSyscalls compiles a probe with gcc inside the sandbox and
// checks that every privileged syscall fails, plus the shell-level
// attempts (strace -p 1, nsenter, unshare) and the process's credentials.
func TestAdversarialSyscalls(t *testing.T) {
	ctx := ctxT(t)
	sb := newSandbox(t, nil)
	if _, err := sb.Files().Write(ctx, "probe.c", []byte(advSyscallProbe), 0); err != nil {
		t.Fatal(err)
	}
	var res *api.ExecResult
	worst := advProbe(t, func() {
		res = advExec(t, sb, "gcc -O0 -o /tmp/probe probe.c && /tmp/probe", 120)
	})
	if res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("probe: %+v", res)
	}
	allowed := []syscall.Errno{syscall.EPERM, syscall.EACCES, syscall.ENOSYS, syscall.EROFS}
	var tried []string
	for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		name, num, ok := strings.Cut(line, " ")
		n, err := strconv.Atoi(num)
		if !ok || err != nil {
			t.Errorf("probe line %q", line)
			continue
		}
		e := syscall.Errno(n)
		tried = append(tried, fmt.Sprintf("%s=%s", name, advErrnoName(e)))
		switch {
		case n == 0:
			t.Errorf("%s succeeded inside the sandbox", name)
		case n < 0:
			t.Errorf("%s: probe child did not report", name)
		case !slices.Contains(allowed, e):
			t.Errorf("%s failed with %v, want EPERM/EACCES/ENOSYS/EROFS", name, e)
		}
	}
	if len(tried) < 60 {
		t.Errorf("probe ran only %d attempts: %s", len(tried), res.Stdout)
	}
	t.Logf("%d syscall attempts refused: %s", len(tried), strings.Join(tried, " "))

	t.Run("shell tools", func(t *testing.T) {
		cmds := []string{
			"strace -p 1 -e trace=none -o /dev/null", // ptrace of the agent
			"nsenter -t 1 -m -u -i -n -p true",
			"nsenter -t 1 -U true",
			"unshare -U true", "unshare -Ur true", "unshare -n true", "unshare -m true",
			"unshare -pf true", "unshare -C true", "unshare -Urmnpf --mount-proc true",
			"mount -t tmpfs none /mnt", "mount --bind / /mnt", "mount -o remount,rw /sys",
			"mount -t cgroup -o memory cgroup /mnt", "umount -l /proc/sys",
			"cat /proc/1/environ", "cat /proc/1/mem", "ls /proc/1/root/", "ls /proc/1/cwd/",
			"readlink -e /proc/1/exe", "head -c1 /proc/kcore | grep -q .", "grep -q . /proc/keys", "grep -q . /proc/timer_list", "dmesg",
			"modprobe -n loop", "insmod /nonexistent.ko", "sysctl -w kernel.hostname=escaped",
			"echo 1 > /proc/sys/kernel/core_pattern", "echo '|/tmp/x' > /proc/sys/kernel/core_pattern",
			"echo /tmp/x > /proc/sys/kernel/modprobe", "echo c > /proc/sysrq-trigger",
			"echo /tmp/x > /sys/kernel/uevent_helper", "echo 1 > /sys/kernel/mm/ksm/run",
			"hostname escaped",
		}
		var script strings.Builder
		for _, c := range cmds {
			fmt.Fprintf(&script, "if ( %s ) >/dev/null 2>&1; then echo 'ALLOWED: %s'; fi\n", c, strings.ReplaceAll(c, "'", ""))
		}
		script.WriteString("grep -E '^(CapEff|CapPrm|CapBnd|CapAmb|CapInh|NoNewPrivs|Seccomp):' /proc/self/status; hostname\n")
		res := advExec(t, sb, script.String(), 60)
		if strings.Contains(res.Stdout, "ALLOWED") {
			t.Errorf("allowed inside the sandbox:\n%s", res.Stdout)
		}
		// CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID, NET_BIND_SERVICE.
		for _, want := range []string{"CapEff:\t00000000000004fb", "CapPrm:\t00000000000004fb", "CapBnd:\t00000000000004fb",
			"CapAmb:\t0000000000000000", "CapInh:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2", "\nsandbox\n"} {
			if !strings.Contains("\n"+res.Stdout, want) {
				t.Errorf("credentials: want %q in\n%s", want, res.Stdout)
			}
		}
	})
	t.Logf("worst other-tenant latency %v", worst)
}

func advErrnoName(e syscall.Errno) string {
	for _, c := range []struct {
		e syscall.Errno
		n string
	}{{syscall.EPERM, "EPERM"}, {syscall.EACCES, "EACCES"}, {syscall.ENOSYS, "ENOSYS"}, {syscall.EROFS, "EROFS"}, {0, "OK"}} {
		if c.e == e {
			return c.n
		}
	}
	return strconv.Itoa(int(e))
}

// advWritableWalk walks the sandbox's tree (not /proc, /sys, /dev, which get
// a fixed list) and tries to create a file named argv[1] in every
// directory. It prints a JSON summary.
const advWritableWalk = `import json, os, sys
name = sys.argv[1]
made, refused = [], 0
def attempt(d):
    global refused
    try:
        fd = os.open(os.path.join(d, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        os.write(fd, b"paddock adversarial marker\n")
        os.close(fd)
        made.append(d)
    except OSError:
        refused += 1
for root, dirs, files in os.walk("/"):
    if root == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
    attempt(root)
for d in ["/dev", "/dev/shm", "/dev/mqueue", "/dev/pts", "/sys", "/sys/fs", "/sys/fs/cgroup",
          "/sys/kernel", "/proc", "/proc/sys", "/proc/sys/kernel", "/proc/self", "/proc/1/cwd", "/proc/1/root"]:
    attempt(d)
for d in os.listdir("/sys/fs/cgroup"):
    attempt(os.path.join("/sys/fs/cgroup", d))
print(json.dumps({"made": made, "refused": refused}))
`

// TestAdversarialWritablePaths creates a uniquely named file in every
// directory a sandbox can write to, then searches the host for that name
// outside the daemon's state directory.
func TestAdversarialWritablePaths(t *testing.T) {
	ctx := ctxT(t)
	sb := newSandbox(t, nil)
	name := advMarker("paddock-adv-write")
	if _, err := sb.Files().Write(ctx, "walk.py", []byte(advWritableWalk), 0); err != nil {
		t.Fatal(err)
	}
	var res *api.ExecResult
	worst := advProbe(t, func() {
		res, _ = sb.Exec(ctx, api.ExecRequest{Argv: []string{"python3", "walk.py", name}, TimeoutSeconds: 300, MaxOutputBytes: 4 << 20})
	})
	var out struct {
		Made    []string `json:"made"`
		Refused int      `json:"refused"`
	}
	if res == nil || res.ExitCode == nil || *res.ExitCode != 0 || json.Unmarshal([]byte(res.Stdout), &out) != nil {
		t.Fatalf("walk: %+v", res)
	}
	if len(out.Made) == 0 || !slices.Contains(out.Made, "/workspace") || out.Refused < 1000 {
		t.Fatalf("walk made %d files, refused %d: the walk did not run as expected", len(out.Made), out.Refused)
	}
	for _, d := range out.Made {
		if d == "/usr" || strings.HasPrefix(d, "/usr/") || strings.HasPrefix(d, "/proc") || d == "/.paddock" {
			t.Errorf("created a file in %s", d)
		}
	}
	var notOverlay []string
	for _, d := range out.Made {
		if d == "/dev" || strings.HasPrefix(d, "/dev/") || strings.HasPrefix(d, "/sys") {
			notOverlay = append(notOverlay, d)
		}
	}
	start := time.Now()
	found := advSearchHost(name, shared.stateDir)
	t.Logf("created the marker in %d directories (%d refused); outside the overlay: %v; host search took %v; worst other-tenant latency %v",
		len(out.Made), out.Refused, notOverlay, time.Since(start).Round(time.Millisecond), worst)
	if len(found) > 0 {
		t.Fatalf("a file created inside the sandbox appeared on the host: %v", found)
	}
	// The search works: the files are there, under the state directory.
	if inState := advSearchHostUnder(name, shared.stateDir); len(inState) == 0 {
		t.Errorf("the marker is not even under the state directory %s: the host search is broken", shared.stateDir)
	}
}

// advSearchHostUnder finds files named name below dir.
func advSearchHostUnder(name, dir string) []string {
	var found []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == name {
			found = append(found, p)
		}
		return nil
	})
	return found
}

// advAgentBinaries are the host files a CVE-2019-5736-style overwrite would
// target: the binaries next to paddockd and the template's agent copy.
func advAgentBinaries(t *testing.T) map[string]string {
	requireDaemon(t)
	t.Helper()
	sums := map[string]string{}
	for _, b := range []string{"paddock-agent", "paddock-shim", "runc", "paddockd"} {
		p := filepath.Join(*binDir, b)
		sums[p] = advSHA256(p)
	}
	for _, b := range []string{"paddock-agent", "paddock-shim"} {
		tpl, _ := filepath.Glob(filepath.Join(shared.stateDir, "templates", "*", "rootfs", ".paddock", b))
		if len(tpl) == 0 {
			t.Fatalf("no template copy of %s under %s", b, shared.stateDir)
		}
		for _, p := range tpl {
			sums[p] = advSHA256(p)
		}
	}
	if path, err := advLookBin("crun"); err == nil {
		sums[path] = advSHA256(path)
	}
	return sums
}

func advLookBin(name string) (string, error) {
	for _, dir := range []string{"/usr/local/bin", "/usr/bin", "/usr/sbin", "/bin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}

// TestAdversarialProcExe tries to overwrite the binaries that run the
// sandbox (CVE-2019-5736 pattern): /proc/self/exe, /proc/1/exe, the shim's
// /proc/<pid>/exe (paddock-shim), the agent and shim files themselves, an
// O_PATH handle reopened for writing, and renaming their directory away.
func TestAdversarialProcExe(t *testing.T) {
	before := advAgentBinaries(t)
	payload := advMarker("PADDOCK-PWNED")
	script := `P=` + payload + `
printf '#!/bin/sh\necho %s\n' "$P" > /tmp/payload; chmod +x /tmp/payload
SHIM=$PPID   # the paddock-shim running this command
try() { if ( "$@" ) >/dev/null 2>&1; then echo "ALLOWED: $*"; fi; }
for p in /proc/self/exe /proc/1/exe /proc/$$/exe /proc/$SHIM/exe /.paddock/paddock-agent /.paddock/paddock-shim; do
  try sh -c "echo $P >> $p"
  try cp /tmp/payload $p
  try dd if=/tmp/payload of=$p conv=notrunc
  try python3 -c "import os,sys; os.open(sys.argv[1], os.O_WRONLY)" $p
  try python3 -c "import os,sys; os.truncate(sys.argv[1], 0)" $p
  try chmod 777 $p
done
# Reopen an O_PATH handle on the shim's executable for writing, racing its exit.
python3 - "$SHIM" <<'EOF'
import os, sys, time
fd = os.open("/proc/%s/exe" % sys.argv[1], os.O_PATH)
end = time.time() + 1
while time.time() < end:
    try:
        w = os.open("/proc/self/fd/%d" % fd, os.O_WRONLY)
        os.write(w, b"PWNED")
        print("ALLOWED: write through O_PATH reopen")
        break
    except OSError:
        pass
EOF
# Replace the agent inside the sandbox's own root. Overlayfs refuses to
# rename a lower-layer directory (EXDEV); were it allowed, it would change
# only the sandbox's writable layer, never the template or the host.
mv /.paddock /.paddock-old 2>/dev/null && mkdir /.paddock && cp /tmp/payload /.paddock/paddock-agent && echo replaced-in-sandbox
echo done`
	var res *api.ExecResult
	sb := newSandbox(t, nil)
	worst := advProbe(t, func() {
		res = advExec(t, sb, script, 60)
	})
	if !strings.HasSuffix(res.Stdout, "done\n") {
		t.Fatalf("script: %+v", res)
	}
	if strings.Contains(res.Stdout, "ALLOWED") {
		t.Errorf("overwrite attempts that succeeded:\n%s", res.Stdout)
	}
	// The sandbox still works: its agent runs from memory.
	if r := advExec(t, sb, "echo alive", 10); r.Stdout != "alive\n" {
		t.Errorf("sandbox after the attempts: %+v", r)
	}
	after := advAgentBinaries(t)
	for p, sum := range before {
		if after[p] == sum {
			continue
		}
		b, _ := os.ReadFile(p)
		if bytes.Contains(b, []byte(payload)) || after[p] == "" || strings.Contains(p, shared.stateDir) {
			t.Errorf("%s changed: sha256 %s -> %s", p, sum, after[p])
		} else {
			t.Logf("%s changed without the payload (a concurrent `make build`?)", p)
		}
	}
	// A new sandbox still gets the genuine agent and shim from the template.
	fresh := newSandbox(t, nil)
	for _, b := range []string{"paddock-agent", "paddock-shim"} {
		want := ""
		for p, s := range after {
			if strings.HasPrefix(p, shared.stateDir) && filepath.Base(p) == b {
				want = s
			}
		}
		if r := advExec(t, fresh, "sha256sum /.paddock/"+b, 10); want == "" || !strings.HasPrefix(r.Stdout, want) {
			t.Errorf("new sandbox's %s: %q, template %s", b, r.Stdout, want)
		}
	}
	t.Logf("hashed %d host binaries before and after; sandbox output:\n%s; worst other-tenant latency %v", len(before), res.Stdout, worst)
}

// advFDProbe looks at every file descriptor, cwd and root of every process
// it can see (CVE-2024-21626 pattern: a leaked host directory fd reached
// through /proc/<pid>/fd/N/..). It prints JSON: each path tried and what
// happened. "escape" entries are directories whose topmost ancestor is not
// the sandbox's root.
const advFDProbe = `import json, os, sys
rels = sys.argv[1:]
root = os.stat("/")
out = {"links": {}, "reads": {}, "escape": [], "dirs": 0}
def top_of(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        for _ in range(64):
            nfd = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        return os.fstat(fd)
    finally:
        os.close(fd)
pids = sorted([p for p in os.listdir("/proc") if p.isdigit()], key=int) + ["self", "thread-self"]
paths = []
for pid in pids:
    base = "/proc/" + pid
    paths += [base + "/cwd", base + "/root", base + "/exe"]
    try:
        paths += [base + "/fd/" + fd for fd in os.listdir(base + "/fd")]
    except OSError as e:
        out["links"][base + "/fd"] = "ERR " + e.strerror
for p in paths:
    try:
        out["links"][p] = os.readlink(p)
    except OSError as e:
        out["links"][p] = "ERR " + e.strerror
    st = top_of(p)
    if st is not None:
        out["dirs"] += 1
        if (st.st_dev, st.st_ino) != (root.st_dev, root.st_ino):
            out["escape"].append(p)
    for rel in rels:
        q = p + "/" + rel
        try:
            with open(q, "rb") as f:
                out["reads"][q] = "READ " + f.read(200).decode("latin-1")
        except OSError as e:
            pass
print(json.dumps(out))
`
