package agent_test

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/agent"
)

// listProcs is a shell command printing "pid state comm" for every process
// the agent can see.
const listProcs = `for f in /proc/[0-9]*/stat; do read -r l < "$f" 2>/dev/null && echo "$l"; done | awk '{print $1, $3, $2}'`

// TestAgentAsPID1 runs the test binary as a standalone agent that is PID 1
// of a new pid namespace (unshare, needs root), as in a sandbox: orphans
// must be reaped and timeouts must still kill whole trees.
func TestAgentAsPID1(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and unshare(1)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sockDir, err := os.MkdirTemp("", "pa")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "agent.sock")
	workdir := t.TempDir()
	cmd := exec.Command(unshare, "--pid", "--fork", "--mount-proc", "--kill-child", exe, "serve-test", sock, workdir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Skipf("unshare: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		stdin.Close() // the agent shuts down
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("agent did not shut down")
		}
	})
	h := &harness{t: t, c: agent.NewHTTPClient(sock), workdir: workdir}
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		select {
		case err := <-exited:
			exited <- err
			t.Skipf("cannot run in a new pid namespace: %v: %s", err, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	h.waitHealthy()

	if res := h.exec(api.ExecRequest{Command: "echo $PPID"}); strings.TrimSpace(res.Stdout) == "" {
		t.Fatalf("exec: %+v", res)
	}

	// Orphans reparent to the agent, which must reap them. Those that end
	// while their shim is still exiting (under -race, os.Exit sleeps a
	// second) are its zombies until then: wait for the count to reach 0.
	h.exec(api.ExecRequest{Command: "for i in 1 2 3; do (sleep 0.1 &) ; done; sleep 0.05 &"})
	if left := h.waitProcs(func(pid, state, comm string) bool { return state == "Z" }); left != "" {
		t.Errorf("zombies left:\n%s", left)
	}

	// A timeout kills the tree, setsid and double-forked children included.
	res := h.exec(api.ExecRequest{
		Command:        "setsid sleep 31 & sh -c 'sleep 31 &' & sleep 31",
		TimeoutSeconds: 0.5,
	})
	if !res.TimedOut {
		t.Errorf("not timed out: %+v", res)
	}
	if left := h.waitProcs(func(pid, state, comm string) bool { return comm == "(sleep)" }); left != "" {
		t.Errorf("sleep survived the timeout:\n%s", left)
	}

	// Background processes work with the reaper too.
	var p api.Process
	h.must(http.StatusCreated, http.MethodPost, "/processes", api.ExecRequest{Argv: []string{"sh", "-c", "exit 3"}}, &p)
	if w := h.waitProcess(p.ID, "10"); deref(w.Result.ExitCode) != 3 {
		t.Errorf("background result %+v", w.Result)
	}
}

// waitProcs lists the sandbox's processes until none matches, for up to
// ten seconds, and returns the last listing if some still match.
func (h *harness) waitProcs(match func(pid, state, comm string) bool) string {
	h.t.Helper()
	for i := range 100 {
		res := h.exec(api.ExecRequest{Command: listProcs})
		found := false
		for line := range strings.SplitSeq(strings.TrimSpace(res.Stdout), "\n") {
			if f := strings.Fields(line); len(f) >= 3 && match(f[0], f[1], f[2]) {
				found = true
			}
		}
		if !found {
			return ""
		}
		if i == 99 {
			return res.Stdout
		}
		time.Sleep(100 * time.Millisecond)
	}
	return ""
}
