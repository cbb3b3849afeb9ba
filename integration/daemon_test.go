package integration

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// TestTemplateRuntime checks that a template can pick its own OCI runtime.
func TestTemplateRuntime(t *testing.T) {
	requireDaemon(t)
	if _, err := exec.LookPath("crun"); err != nil {
		t.Skip("crun not installed")
	}
	ctx := ctxT(t)
	sb := newSandbox(t, &api.CreateSandboxRequest{Template: "base-crun"})
	if sb.Runtime != "crun" || sb.Template != "base-crun" {
		t.Fatalf("template base-crun ran on %q", sb.Runtime)
	}
	res, err := sb.Exec(ctx, api.ExecRequest{Command: "cat /proc/1/cmdline | tr '\\0' ' '"})
	if err != nil || !strings.HasPrefix(res.Stdout, "/.paddock/paddock-agent serve") {
		t.Fatalf("exec under crun: %+v %v", res, err)
	}
}

// TestKeyCreatedWhileRunning checks that `paddockd keys create` works
// against a running daemon's state directory and the key works at once.
func TestKeyCreatedWhileRunning(t *testing.T) {
	requireDaemon(t)
	out, err := exec.Command(filepath.Join(*binDir, "paddockd"), "keys", "create", "--state-dir", shared.stateDir, "--name", "carol").Output()
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(out))
	if !strings.HasPrefix(key, "pdk_") {
		t.Fatalf("key %q", key)
	}
	c := client.New(shared.url, key)
	ctx := ctxT(t)
	sb, err := c.Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if _, err := shared.client(0).Get(ctx, sb.ID); err == nil {
		t.Fatal("another key sees carol's sandbox")
	}
}

// TestGracefulRestart stops the daemon with SIGTERM: it exits cleanly,
// the sandbox keeps running, and the next start re-adopts it.
func TestGracefulRestart(t *testing.T) {
	requireDaemon(t)
	d, err := startDaemon(daemonOptions{extraArgs: []string{"--uid-base", strconv.Itoa(crashUIDBase + 40*65536)}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.shutdown()
	ctx := ctxT(t)
	sb, err := d.client(0).Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Exec(ctx, api.ExecRequest{Command: "echo kept > kept.txt"}); err != nil {
		t.Fatal(err)
	}
	// A paused sandbox survives the restart too, files and processes kept.
	paused, err := d.client(0).Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := paused.Exec(ctx, api.ExecRequest{Command: "echo frozen > f.txt; (sleep 1000 &)"}); err != nil {
		t.Fatal(err)
	}
	if err := paused.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- d.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("paddockd exited with %v after SIGTERM", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("paddockd did not exit within 20s of SIGTERM")
	}
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := sb.Exec(cctx, api.ExecRequest{Command: "cat kept.txt"})
	if err != nil || res.Stdout != "kept\n" {
		t.Fatalf("after restart: %+v %v", res, err)
	}
	if err := paused.Refresh(cctx); err != nil || paused.State != api.StatePaused {
		t.Fatalf("paused sandbox after restart: %s %v", paused.State, err)
	}
	if err := paused.Resume(cctx); err != nil {
		t.Fatal(err)
	}
	res, err = paused.Exec(cctx, api.ExecRequest{Command: "cat f.txt; ps -eo args | grep -c '^sleep 1000'"})
	if err != nil || res.Stdout != "frozen\n1\n" {
		t.Fatalf("paused sandbox resumed after restart: %+v %v", res, err)
	}
}
