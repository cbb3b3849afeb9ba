package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/paddock-sandbox/paddock/client"
)

// crunSeccompUIDBase keeps TestCrunSeccompBPF's uid ranges clear of every
// other test's.
const crunSeccompUIDBase = crashUIDBase + 2800*65536

// seccompProbe asks the kernel, from inside a sandbox, what the filter
// decides for the syscalls and arguments the profile's rules turn on:
// each line is a call and its errno (0: allowed). The process survives
// every call (the profile's actions are allow and errno).
const seccompProbe = `
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def call(name, nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(nr, *[ctypes.c_ulong(a) for a in args])
    e = ctypes.get_errno() if r == -1 else 0
    if name.startswith("socket") and r >= 0: os.close(r)
    print(name, e)
for fam in (1, 2, 10, 16, 17, 38, 40, 44, 45, 46):
    call("socket/%d" % fam, 41, fam, 2 if fam != 16 else 3, 0)
for p in (0, 8, 0x20000, 0x20008, 0xffffffff, 0x0400000, 0x0040000):
    call("personality/%#x" % p, 135, p)
call("clone3", 435, 0, 0)
call("unshare/newuser", 272, 0x10000000)
call("keyctl", 250, 0, 0, 0, 0, 0)
call("bpf", 321, 0, 0, 0)
call("ptrace/traceme", 101, 0, 0, 0, 0)
call("mount", 165, 0, 0, 0, 0, 0)
call("open_by_handle_at", 304, 0, 0, 0)
call("getpid", 39)
`

// TestCrunSeccompBPF: under crun, paddockd hands later sandboxes the
// filter crun compiled for the first (run.oci.seccomp_bpf_data), and
// those sandboxes get the very same filter: their seccomp.bpf is the
// first's byte for byte, the kernel decides every probed syscall and
// argument alike in both, and the compat ABIs stay refused. It needs crun
// on PATH; without it, it skips.
func TestCrunSeccompBPF(t *testing.T) {
	requireDaemon(t)
	if runtime.GOARCH != "amd64" {
		t.Skip("the probe's syscall numbers are amd64's")
	}
	if _, err := exec.LookPath("crun"); err != nil {
		t.Skip("no crun on PATH")
	}
	d, err := startDaemon(daemonOptions{extraArgs: []string{"--runtime", "crun", "--warm-pool", "0",
		"--uid-base", strconv.Itoa(crunSeccompUIDBase), "--max-sandboxes", "4", "--max-sandboxes-per-key", "-1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.shutdown)
	first := newSandboxOn(t, d, 0, nil)
	later := newSandboxOn(t, d, 0, nil)
	third := newSandboxOn(t, d, 0, nil)
	annotation := func(id string) string {
		b, err := os.ReadFile(filepath.Join(d.stateDir, "containers", id, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Annotations map[string]string `json:"annotations"`
			Linux       struct {
				Seccomp struct {
					Flags    []string          `json:"flags"`
					Syscalls []json.RawMessage `json:"syscalls"`
				} `json:"seccomp"`
			} `json:"linux"`
		}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		if len(s.Linux.Seccomp.Syscalls) == 0 {
			t.Errorf("%s: the spec lost its seccomp profile", id)
		}
		if strings.Join(s.Linux.Seccomp.Flags, ",") != "SECCOMP_FILTER_FLAG_TSYNC" {
			t.Errorf("%s: seccomp flags %v (crun would add SPEC_ALLOW to none)", id, s.Linux.Seccomp.Flags)
		}
		return s.Annotations["run.oci.seccomp_bpf_data"]
	}
	filter := func(id string) []byte {
		b, err := os.ReadFile(filepath.Join(d.stateDir, "runtime", "crun", id, "seccomp.bpf"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if a := annotation(first.ID); a != "" {
		t.Errorf("the first sandbox got a filter before crun compiled one")
	}
	compiled := filter(first.ID)
	for _, sb := range []string{later.ID, third.ID} {
		a := annotation(sb)
		handed, err := base64.StdEncoding.DecodeString(a)
		if a == "" || err != nil {
			t.Fatalf("%s: no compiled filter handed to crun (%v)", sb, err)
		}
		if !bytes.Equal(handed, compiled) || !bytes.Equal(filter(sb), compiled) {
			t.Errorf("%s: filter differs from the one crun compiled (%d, %d, %d bytes)", sb, len(handed), len(filter(sb)), len(compiled))
		}
	}
	var outs []string
	for _, c := range []struct {
		name string
		sb   *client.Sandbox
	}{{"compiled by crun", first}, {"handed to crun", later}} {
		s := c.sb
		if _, err := s.Files().Write(ctxT(t), "probe.py", []byte(seccompProbe), 0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Files().Write(ctxT(t), "abi.c", []byte(seccompABIProbe), 0); err != nil {
			t.Fatal(err)
		}
		res := advExec(t, s, "grep Seccomp /proc/self/status && python3 probe.py && gcc -O0 -o /tmp/abi abi.c && /tmp/abi", 120)
		if res.ExitCode == nil || *res.ExitCode != 0 {
			t.Fatalf("%s: probe: %+v", c.name, res)
		}
		if strings.Contains(res.Stdout, "ALLOWED") {
			t.Errorf("%s: a compat-ABI syscall ran:\n%s", c.name, res.Stdout)
		}
		if !strings.Contains(res.Stdout, "Seccomp_filters:\t1") || !strings.Contains(res.Stdout, "getpid 0") ||
			!strings.Contains(res.Stdout, "keyctl 1\n") || !strings.Contains(res.Stdout, "clone3 38\n") ||
			!strings.Contains(res.Stdout, "socket/40 1\n") || !strings.Contains(res.Stdout, "socket/1 0\n") {
			t.Errorf("%s: the profile's decisions are not in force:\n%s", c.name, res.Stdout)
		}
		outs = append(outs, res.Stdout)
	}
	if outs[0] != outs[1] {
		t.Errorf("the kernel decides differently:\ncompiled by crun:\n%s\nhanded to crun:\n%s", outs[0], outs[1])
	}
	t.Logf("%d-byte filter (sha256 %x; TestSeccompFilterDecisions checks the decisions of its own libseccomp compile, logged with its hash); probe:\n%s",
		len(compiled), sha256.Sum256(compiled), outs[1])
}
