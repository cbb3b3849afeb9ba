package integration

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// TestTemplateRuntimeGVisor: a config template with "runtime": "runsc"
// runs its sandboxes under gVisor next to runc's on the same daemon, end
// to end through the API: exec, files, a background process. It needs the
// runsc that `make runsc-test` builds (bin/runsc); without it, it skips.
func TestTemplateRuntimeGVisor(t *testing.T) {
	requireDaemon(t)
	runsc := filepath.Join(*binDir, "runsc")
	if _, err := os.Stat(runsc); err != nil {
		t.Skipf("no %s (make runsc-test builds it)", runsc)
	}
	cfg, _ := json.Marshal(map[string]any{
		"runtimes":  map[string]string{"runsc": runsc},
		"templates": map[string]any{"base-gvisor": map[string]string{"runtime": "runsc"}},
	})
	d, err := startDaemon(daemonOptions{config: string(cfg)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.shutdown)
	ctx := ctxT(t)
	gv := newSandboxOn(t, d, 0, &api.CreateSandboxRequest{Template: "base-gvisor"})
	rc := newSandboxOn(t, d, 0, &api.CreateSandboxRequest{})
	kernel := func(res *api.ExecResult) bool { return strings.Contains(res.Stdout, "gVisor") }
	if res := advExec(t, gv, "dmesg 2>&1 | head -3", 30); !kernel(res) {
		t.Fatalf("template base-gvisor does not run under gVisor: %+v", res)
	}
	if res := advExec(t, rc, "dmesg 2>&1 | head -3", 30); kernel(res) {
		t.Fatalf("template base runs under gVisor: %+v", res)
	}
	if _, err := gv.Files().Write(ctx, "hello.txt", []byte("from gvisor"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := advExec(t, gv, "cat hello.txt; echo; id -u", 30); res.Stdout != "from gvisor\n0\n" {
		t.Fatalf("files under gVisor: %+v", res)
	}
	p, err := gv.Start(ctx, api.ExecRequest{Command: "sleep 0.2; echo bg"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := p.Wait(ctx, time.Minute)
	if err != nil || w.Result == nil || w.Result.ExitCode == nil || *w.Result.ExitCode != 0 {
		t.Fatalf("background process under gVisor: %+v, %v", w, err)
	}

	// The agent's socket sits in a directory bound in from the host that the
	// sandbox's root can write: it swaps the socket for a link to a socket
	// of the host. The daemon must not follow it (the sandbox only cuts
	// itself off).
	host := filepath.Join(d.stateDir, "host.sock")
	ln, err := net.Listen("unix", host)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	reached := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			reached <- struct{}{}
			c.Close()
		}
	}()
	res := advExec(t, gv, "rm /.paddock-sock/agent.sock && ln -s "+host+" /.paddock-sock/agent.sock && ls -l /.paddock-sock/", 30)
	if !strings.Contains(res.Stdout, "-> "+host) {
		t.Fatalf("could not plant the link: %+v", res)
	}
	if lt, err := os.Readlink(filepath.Join(d.stateDir, "containers", gv.ID, "sock", "agent.sock")); err != nil || lt != host {
		t.Logf("the link did not reach the host (%q, %v): the sandbox cannot plant it at all", lt, err)
	}
	// More execs at once than the daemon keeps idle connections (4): some
	// must dial anew.
	var wg sync.WaitGroup
	var failed atomic.Int32
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := gv.Exec(ctx, api.ExecRequest{Command: "sleep 1"}); err != nil {
				failed.Add(1)
			}
		}()
	}
	wg.Wait()
	if failed.Load() == 0 {
		t.Fatal("no exec needed a new connection: the test proves nothing")
	}
	select {
	case <-reached:
		t.Fatal("the daemon followed the sandbox's link to a socket of the host")
	default:
	}
}
