package integration

import (
	"strconv"
	"strings"
	"testing"

	"github.com/paddock-sandbox/paddock/api"
)

// sealProbe runs in a sandbox: it finds the agent's spare shims (the
// paddock-shim processes that are not this command's ancestors: the spare
// waits for its spec on its control socket, fd 4) once they are past their
// start (a shim seals itself first thing in its main and then starts its
// spare threads, so it has at least 6; from its exec until then it is
// dumpable, the known gap of docs/security.md, which this probe does not
// race for: the probe's own exec took the spare and the refill starts
// while it runs), tries to ptrace them,
// to open or steal their status pipe and control socket (fds 3 and 4) and
// to open their memory, printing ALLOWED for what
// succeeded, and with the argument kill kills them last.
const sealProbe = `
import ctypes, os, sys, time
def ppid(pid):
    s = open("/proc/%d/stat" % pid).read()
    return int(s[s.rindex(")") + 2:].split()[1])
anc, p = set(), os.getpid()
while p > 1:
    p = ppid(p); anc.add(p)
def threads(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0
spares = []
for _ in range(500):
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) in anc:
            continue
        try:
            if open("/proc/%s/comm" % d).read().strip() == "paddock-shim" and threads(int(d)) >= 6:
                spares.append(int(d))
        except OSError:
            pass
    if spares:
        break
    time.sleep(0.01)
print("spares", " ".join(map(str, spares)))
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
for pid in spares:
    if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
        print("ALLOWED ptrace attach", pid)
    if libc.ptrace(0x4206, pid, None, None) == 0:  # PTRACE_SEIZE
        print("ALLOWED ptrace seize", pid)
    for path in ["/proc/%d/fd/4" % pid, "/proc/%d/fd/3" % pid]:
        try:
            os.readlink(path); print("ALLOWED readlink", path)
        except OSError:
            pass
        for mode in (os.O_RDONLY, os.O_WRONLY, os.O_RDWR):
            try:
                os.open(path, mode); print("ALLOWED open", path, mode)
            except OSError:
                pass
    try:  # (its environ holds only GOMAXPROCS=1: commands' come over the socket)
        os.open("/proc/%d/mem" % pid, os.O_RDONLY); print("ALLOWED mem")
    except OSError:
        pass
    try:
        pidfd = os.pidfd_open(pid)
        if libc.syscall(438, pidfd, 4, 0) >= 0:  # pidfd_getfd
            print("ALLOWED pidfd_getfd")
    except OSError:
        pass
if "kill" in sys.argv:
    for pid in spares:
        os.kill(pid, 9)
print("done")
`

// TestGuestShimsSealed: root in the sandbox finds the agent's spare shim
// and can neither ptrace it nor reach its control socket (it is undumpable
// and the sandbox has no CAP_SYS_PTRACE). It can only kill it, and the next
// exec still works. The process list never shows a spare.
func TestGuestShimsSealed(t *testing.T) {
	sb := newSandbox(t, nil)
	advExec(t, sb, "true", 30) // the spare is started by now
	res, err := sb.Exec(ctxT(t), api.ExecRequest{Argv: []string{"python3", "-c", sealProbe, "kill"}, TimeoutSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(res.Stdout, "done\n") {
		t.Fatalf("probe: %+v", res)
	}
	first, _, _ := strings.Cut(res.Stdout, "\n")
	spares := strings.Fields(strings.TrimPrefix(first, "spares"))
	if len(spares) == 0 {
		t.Fatalf("the probe found no spare shim: %q", res.Stdout)
	}
	if strings.Contains(res.Stdout, "ALLOWED") {
		t.Errorf("a sandbox process reached the spare shim:\n%s", res.Stdout)
	}
	for i := range 3 {
		if r := advExec(t, sb, "echo alive", 30); r.Stdout != "alive\n" {
			t.Fatalf("exec %d after the spare was killed: %+v", i, r)
		}
	}
	procs, err := sb.Processes(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		for _, s := range spares {
			if strconv.Itoa(p.PID) == s {
				t.Errorf("the process list shows spare shim %s: %+v", s, p)
			}
		}
	}
	t.Logf("probe output:\n%s", res.Stdout)
}
