package integration

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
	"github.com/paddock-sandbox/paddock/internal/backend/container"
	"github.com/paddock-sandbox/paddock/internal/network"
)

// The guest surface (issue 16, findings 10 and 12): what a sandbox's own
// root can do to the agent, and what a daemon leaves on the host.

// TestGuestSignalsToPID1: root in the sandbox sends every stop signal to
// PID 1 (the agent); the agent survives and the sandbox keeps working.
func TestGuestSignalsToPID1(t *testing.T) {
	sb := newSandbox(t, nil)
	for _, sig := range []string{"TERM", "HUP", "INT", "QUIT", "USR1", "USR2", "PIPE", "ALRM"} {
		res := advExec(t, sb, "kill -"+sig+" 1; echo sent", 30)
		if strings.TrimSpace(res.Stdout) != "sent" {
			t.Fatalf("kill -%s 1: %+v", sig, res)
		}
		// The next command needs the same agent: a dead PID 1 ends the
		// sandbox, and the exec fails.
		res = advExec(t, sb, "cat /proc/1/comm", 30)
		if got := strings.TrimSpace(res.Stdout); got != "paddock-agent" || res.ExitCode == nil || *res.ExitCode != 0 {
			t.Fatalf("after kill -%s 1: PID 1 is %q (%+v)", sig, got, res)
		}
	}
	// Commands still get the default dispositions: a TERM ends a command.
	res := advExec(t, sb, "sh -c 'kill -TERM $$; sleep 30'; echo status=$?", 60)
	if !strings.Contains(res.Stdout, "status=143") {
		t.Fatalf("a command's SIGTERM: %+v", res)
	}
}

// TestGuestManyBackgroundProcesses: 60 background processes, each under
// its shim, fit in the default pids limit, and a foreground command still
// runs. Filling the limit for real gives limit_exceeded, never a 500.
func TestGuestManyBackgroundProcesses(t *testing.T) {
	ctx := ctxT(t)
	sb := newSandbox(t, nil)
	for i := range 60 {
		if _, err := sb.Start(ctx, api.ExecRequest{Argv: []string{"sleep", "600"}}); err != nil {
			t.Fatalf("background process %d: %v", i, err)
		}
	}
	res := advExec(t, sb, "echo ok", 30)
	if strings.TrimSpace(res.Stdout) != "ok" {
		t.Fatalf("foreground exec with 60 background processes: %+v", res)
	}
	// Fill what is left: a shell forks sleeps until fork fails.
	advExec(t, sb, "i=0; while sleep 600 & do i=$((i+1)); [ $i -gt 2000 ] && break; done 2>/dev/null; echo $i", 120)
	for i := range 5 {
		_, err := sb.Exec(ctx, api.ExecRequest{Command: "true"})
		if err == nil {
			continue // a sleep may have been reaped meanwhile; fine
		}
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Code != api.CodeLimitExceeded {
			t.Fatalf("exec %d at the pids limit: %v, want %s", i, err, api.CodeLimitExceeded)
		}
	}
	// Ending the processes frees the sandbox again.
	if _, err := sb.Exec(ctx, api.ExecRequest{Argv: []string{"/bin/true"}}); err != nil {
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Code != api.CodeLimitExceeded {
			t.Fatalf("exec at the limit: %v", err)
		}
	}
}

// TestGuestMountinfoHidesHostPaths: no line of the sandbox's mountinfo
// names the daemon's state directory.
func TestGuestMountinfoHidesHostPaths(t *testing.T) {
	sb := newSandbox(t, nil)
	res := advExec(t, sb, "cat /proc/self/mountinfo", 30)
	if res.Stdout == "" {
		t.Fatalf("empty mountinfo: %+v", res)
	}
	for _, line := range strings.Split(res.Stdout, "\n") {
		if strings.Contains(line, shared.stateDir) {
			t.Errorf("mountinfo shows the state dir %s: %s", shared.stateDir, line)
		}
	}
}

// TestDaemonStopLeavesNothing: a daemon with a throwaway state dir
// creates and deletes a sandbox and stops on SIGTERM; none of its cgroups,
// mounts, packet-filter table, loop devices or processes remain.
func TestDaemonStopLeavesNothing(t *testing.T) {
	requireDaemon(t)
	d, err := startDaemon(daemonOptions{})
	if err != nil {
		t.Fatal(err)
	}
	parent := container.DefaultCgroupParent(d.stateDir)
	defer func() { // whatever the outcome, leave nothing behind
		network.RemoveTable(parent)
		network.RemovePins(d.stateDir)
		os.RemoveAll(d.stateDir)
	}()
	c := d.client(0)
	ctx := ctxT(t)
	sb, err := c.Create(ctx, &api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Exec(ctx, api.ExecRequest{Command: "echo hi"}); err != nil {
		t.Fatal(err)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	pid := d.cmd.Process.Pid
	d.cmd.Process.Signal(syscall.SIGTERM)
	if err := d.cmd.Wait(); err != nil {
		t.Fatalf("paddockd exit: %v\n%s", err, d.logTail(4000))
	}
	if dirs := cgroupParents(parent); len(dirs) > 0 {
		t.Errorf("cgroup parents left: %v", dirs)
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mi), "\n") {
		if strings.Contains(line, d.stateDir) {
			t.Errorf("mount left: %s", line)
		}
	}
	if out, err := exec.Command("nft", "list", "table", "inet", parent).CombinedOutput(); err == nil {
		t.Errorf("nftables table %s left:\n%s", parent, out)
	}
	if out, _ := exec.Command("losetup", "-a").Output(); strings.Contains(string(out), d.stateDir) {
		t.Errorf("loop devices left:\n%s", out)
	}
	if left := processesUnder(pid, d.stateDir); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
}

// cgroupParents lists the cgroup directories named parent, in every
// hierarchy.
func cgroupParents(parent string) []string {
	m1, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", parent))
	m2, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", parent))
	return append(m1, m2...)
}

// processesUnder lists live processes that are children of pid or whose
// command line names stateDir.
func processesUnder(pid int, stateDir string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		var p int
		if _, err := fmt.Sscan(e.Name(), &p); err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if strings.Contains(string(cmdline), stateDir) || (len(f) > 1 && f[1] == fmt.Sprint(pid)) {
			out = append(out, fmt.Sprintf("%d %q", p, strings.ReplaceAll(string(cmdline), "\x00", " ")))
		}
	}
	return out
}
