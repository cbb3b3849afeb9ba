package integration

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// lifecycleUIDBase is the uid range of the lifecycle tests' daemon.
const lifecycleUIDBase = crashUIDBase + 740*65536

// startLifecycleDaemon runs a daemon of its own with short retention
// bounds, so the reaper's verdicts come within seconds.
func startLifecycleDaemon(t *testing.T) *daemon {
	t.Helper()
	requireDaemon(t)
	// Its own network pool and proxy ports: the defaults may be taken by
	// another daemon on the host. No warm pool: the tests count every
	// process and mount in the uid range as theirs (the pool's own crash
	// safety is TestPoolRestart's).
	d, err := startDaemon(daemonOptions{config: `{"network": {"pool": "10.95.0.0/16", "proxy_port": 15501, "dns_port": 15553}}`,
		extraArgs: []string{"--uid-base", strconv.Itoa(lifecycleUIDBase), "--max-sandboxes", "10",
			"--pause-retention", "600", "--max-pause-retention", "1200", "--stop-retention", "3600", "--max-stop-retention", "7200", "--warm-pool", "0"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(d.logTail(6000))
		}
		d.shutdown()
	})
	return d
}

// waitFor polls sb until it is in state (with reason, if not empty) and
// returns it; the reaper acts within about a second.
func waitFor(t *testing.T, c *client.Client, id, state, reason string) *client.Sandbox {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		sb, err := c.Get(ctxBG(), id)
		if err != nil {
			t.Fatal(err)
		}
		if sb.State == state && (reason == "" || sb.Reason == reason) {
			return sb
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %s (%q), want %s (%q)", id, sb.State, sb.Reason, state, reason)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// history is a sandbox's lifecycle history as "state/reason" entries.
func history(sb *api.Sandbox) string {
	var out []string
	for _, e := range sb.History {
		out = append(out, e.State+"/"+e.Reason)
	}
	return strings.Join(out, " ")
}

// TestStopStart: stop ends every process and keeps the files; the daemon
// is killed with SIGKILL and restarted; start boots the sandbox again
// with its files, the same id, resources and network policy, and fresh
// processes. While stopped nothing of it runs or is mounted on the host.
func TestStopStart(t *testing.T) {
	d := startLifecycleDaemon(t)
	ctx := ctxT(t)
	c := d.client(0)
	res := &api.Resources{MemoryMiB: 256, DiskMiB: 512}
	sb, err := c.Create(ctx, &api.CreateSandboxRequest{TimeoutSeconds: 600, Resources: res})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Exec(ctx, api.ExecRequest{Command: "echo kept > /workspace/kept.txt && mkdir -p /opt/x && echo deep > /opt/x/y && sync"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Start(ctx, api.ExecRequest{Argv: []string{"sleep", "1000"}}); err != nil {
		t.Fatal(err)
	}
	if err := sb.Stop(ctx, 7201*time.Second); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("stop with keep_for over --max-stop-retention: %v, want invalid", err)
	}
	if err := sb.Stop(ctx, 1800*time.Second); err != nil {
		t.Fatal(err)
	}
	if sb.State != api.StateStopped || sb.StoppedAt == nil || sb.ExpiresAt.Sub(*sb.StoppedAt).Round(time.Second) != 1800*time.Second {
		t.Fatalf("stopped: %s stopped_at %v expires %v", sb.State, sb.StoppedAt, sb.ExpiresAt)
	}
	tr := tracesOf(d.stateDir, []string{sb.ID}, lifecycleUIDBase, lifecycleUIDBase+10*65536)
	tr.Disks, tr.Details = 0, nil // its disk in the disk pool is what it keeps
	if !tr.zero() {
		t.Fatalf("a stopped sandbox holds more than its disk: %+v", tr)
	}
	if _, err := sb.Exec(ctx, api.ExecRequest{Command: "true"}); !errors.Is(err, client.ErrConflict) {
		t.Errorf("exec on a stopped sandbox: %v, want conflict", err)
	}

	d.kill9()
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, sb.ID); err != nil || got.State != api.StateStopped {
		t.Fatalf("after kill -9 and restart: %+v %v", got, err)
	}
	if err := sb.Boot(ctx); err != nil {
		t.Fatal(err)
	}
	if sb.State != api.StateRunning || sb.StoppedAt != nil {
		t.Fatalf("started: %s", sb.State)
	}
	r, err := sb.Exec(ctx, api.ExecRequest{Command: "cat /workspace/kept.txt /opt/x/y; pgrep -c sleep || true"})
	if err != nil || r.Stdout != "kept\ndeep\n0\n" {
		t.Fatalf("files and processes after stop, kill -9, restart, start: %q %q %v", r.Stdout, r.Stderr, err)
	}
	if sb.Resources.MemoryMiB != 256 || sb.Resources.DiskMiB != 512 || sb.Network.Mode != api.NetworkOff {
		t.Errorf("started with resources %+v network %+v", sb.Resources, sb.Network)
	}
	if h := history(&sb.Sandbox); !strings.HasSuffix(h, "stopped/stopped running/start") {
		t.Errorf("history %q", h)
	}
	// Usage accrues across the stop, the restart and the start (its cost,
	// in whole micros, may still round to 0 this early).
	m, err := sb.Metrics(ctx)
	if err != nil || m.RunningSeconds <= 0 || m.MemoryGiBSeconds <= 0 || m.CPUSeconds <= 0 {
		t.Errorf("metrics after start: %+v %v", m, err)
	}

	// A networked sandbox gets its network (a fresh interface, the same
	// policy) back when it starts.
	policy := api.NetworkPolicy{Mode: api.NetworkAllowlist, Allow: []string{"example.test"}}
	netSb := newSandboxOn(t, d, 0, &api.CreateSandboxRequest{Network: &policy})
	netCheck := "grep -c Paddock /etc/resolv.conf; ip -o -4 addr show scope global | wc -l"
	before, err := netSb.Exec(ctx, api.ExecRequest{Command: netCheck})
	if err != nil {
		t.Fatal(err)
	}
	if err := netSb.Stop(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := netSb.Boot(ctx); err != nil {
		t.Fatal(err)
	}
	after, err := netSb.Exec(ctx, api.ExecRequest{Command: netCheck})
	if err != nil || after.Stdout != before.Stdout || before.Stdout != "1\n1\n" {
		t.Errorf("network before stop %q, after start %q (%v)", before.Stdout, after.Stdout, err)
	}
	if netSb.Network.Mode != policy.Mode || len(netSb.Network.Allow) != 1 {
		t.Errorf("policy after start: %+v", netSb.Network)
	}
}

// TestRetention: the reaper honours a pause's keep_for, a pause's
// then_stop_after, and a stop's keep_for (deleting the files).
func TestRetention(t *testing.T) {
	d := startLifecycleDaemon(t)
	ctx := ctxT(t)
	c := d.client(0)
	paused, stopped, then := newSandboxOn(t, d, 0, nil), newSandboxOn(t, d, 0, nil), newSandboxOn(t, d, 0, nil)
	if err := paused.PauseFor(ctx, 1201*time.Second, 0); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("pause with keep_for over --max-pause-retention: %v, want invalid", err)
	}
	if err := paused.PauseFor(ctx, 2*time.Second, 0); err != nil {
		t.Fatal(err)
	}
	if err := then.PauseFor(ctx, 600*time.Second, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := stopped.Stop(ctx, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, paused.ID, api.StateTerminated, "expired while paused")
	waitFor(t, c, stopped.ID, api.StateTerminated, "expired while stopped")
	waitFor(t, c, then.ID, api.StateStopped, "stopped after pause")
	if _, err := os.Stat(filepath.Join(d.stateDir, "containers", stopped.ID)); !os.IsNotExist(err) {
		t.Errorf("the files of a stopped sandbox past its retention are still there: %v", err)
	}
	if err := then.Boot(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestIdleAutoResume: a sandbox idles out (pause, or stop), and the next
// exec or file read resumes or starts it transparently; its history
// shows each step.
func TestIdleAutoResume(t *testing.T) {
	d := startLifecycleDaemon(t)
	ctx := ctxT(t)
	c := d.client(0)
	for _, onIdle := range []string{api.OnIdlePause, api.OnIdleStop} {
		t.Run(onIdle, func(t *testing.T) {
			sb := newSandboxOn(t, d, 0, &api.CreateSandboxRequest{IdleTimeoutSeconds: 2, OnIdle: onIdle, AutoResume: true})
			if _, err := sb.Files().Write(ctx, "note.txt", []byte("hello"), 0); err != nil {
				t.Fatal(err)
			}
			state := api.StatePaused
			if onIdle == api.OnIdleStop {
				state = api.StateStopped
			}
			waitFor(t, c, sb.ID, state, "idle")
			r, err := sb.Exec(ctx, api.ExecRequest{Command: "cat /workspace/note.txt"})
			if err != nil || r.Stdout != "hello" {
				t.Fatalf("exec after idling out: %+v %v", r, err)
			}
			got, err := c.Get(ctx, sb.ID)
			if err != nil {
				t.Fatal(err)
			}
			if h := history(&got.Sandbox); got.State != api.StateRunning || !strings.HasSuffix(h, state+"/idle running/auto_resume") {
				t.Errorf("after auto-resume: %s, history %q", got.State, h)
			}
		})
	}
}

// TestPortAutoResume: a request through a port of an idle-paused
// auto_resume sandbox resumes it and is served by the process that was
// frozen.
func TestPortAutoResume(t *testing.T) {
	d := startLifecycleDaemon(t)
	ctx := ctxT(t)
	c := d.client(0)
	sb := newSandboxOn(t, d, 0, &api.CreateSandboxRequest{IdleTimeoutSeconds: 2, AutoResume: true})
	if _, err := sb.Start(ctx, api.ExecRequest{Argv: []string{"python3", "-m", "http.server", "8000", "--bind", "127.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	var ports []api.Port
	for deadline := time.Now().Add(20 * time.Second); len(ports) == 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var err error
		if ports, err = sb.Ports(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(ports) != 1 {
		t.Fatalf("ports: %+v", ports)
	}
	waitFor(t, c, sb.ID, api.StatePaused, "idle")
	req, _ := http.NewRequestWithContext(ctx, "GET", ports[0].URL, nil)
	req.Header.Set("Authorization", "Bearer "+d.keys[0])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("port request on a paused auto_resume sandbox: %d", resp.StatusCode)
	}
	got, err := c.Get(ctx, sb.ID)
	if err != nil || got.State != api.StateRunning || !strings.HasSuffix(history(&got.Sandbox), "paused/idle running/auto_resume") {
		t.Fatalf("after the port request: %+v %v", got, err)
	}
}
