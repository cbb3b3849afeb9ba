package integration

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// Clear errors instead of internals (issue 16, finding 11).

// TestExecEndsWhenLeaseEnds: a command still running when its sandbox's
// lease ends gets a clear "expired" error, streamed or not, not a bare EOF
// or a 500.
func TestExecEndsWhenLeaseEnds(t *testing.T) {
	ctx := ctxT(t)
	t.Run("stream", func(t *testing.T) {
		sb := newSandbox(t, &api.CreateSandboxRequest{TimeoutSeconds: 3})
		var last error
		started := false
		for ev, err := range sb.ExecStream(ctx, api.ExecRequest{Command: "echo started; sleep 120", TimeoutSeconds: 120}) {
			if err != nil {
				last = err
				break
			}
			started = started || ev.Type == api.EventStart
			if ev.Type == api.EventExit {
				t.Fatalf("the command exited: %+v", ev)
			}
		}
		wantExpired(t, started, last)
	})
	t.Run("stream, paused at the lease's end", func(t *testing.T) {
		sb := newSandbox(t, &api.CreateSandboxRequest{TimeoutSeconds: 3, OnTimeout: api.OnTimeoutPause})
		var last error
		started := false
		for ev, err := range sb.ExecStream(ctx, api.ExecRequest{Command: "sleep 120", TimeoutSeconds: 120}) {
			if err != nil {
				last = err
				break
			}
			started = started || ev.Type == api.EventStart
		}
		wantExpired(t, started, last)
		if !strings.Contains(last.Error(), "paused") {
			t.Errorf("the error does not say the sandbox is paused: %v", last)
		}
	})
	t.Run("result", func(t *testing.T) {
		sb := newSandbox(t, &api.CreateSandboxRequest{TimeoutSeconds: 3})
		res, err := sb.Exec(ctx, api.ExecRequest{Command: "sleep 120", TimeoutSeconds: 120})
		if err == nil {
			t.Fatalf("the command ended: %+v", res)
		}
		wantExpired(t, true, err)
	})
}

func wantExpired(t *testing.T, started bool, err error) {
	t.Helper()
	var ae *client.APIError
	if !started || !errors.As(err, &ae) || ae.Code != api.CodeConflict || !strings.Contains(ae.Message, "expired") {
		t.Fatalf("started %v, error %v: want a %s error that says the sandbox expired", started, err, api.CodeConflict)
	}
}

// TestDaemonRefusesUnsearchableStateDir: a state directory below a
// directory the sandboxes' uids cannot search (a 0700 temp dir) is refused
// at start with one sentence naming that directory, before any create
// could fail deep in the runtime.
func TestDaemonRefusesUnsearchableStateDir(t *testing.T) {
	requireDaemon(t)
	private, err := os.MkdirTemp("", "paddock-private-") // 0700
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(private)
	out, err := exec.Command(filepath.Join(*binDir, "paddockd"), "serve", "--state-dir", filepath.Join(private, "state"),
		"--listen", freePort(), "--runtime", runtimeName()).CombinedOutput()
	if err == nil {
		t.Fatalf("paddockd served with a state dir under a 0700 directory:\n%s", out)
	}
	want := private + " (mode 0700) is not searchable by other users"
	if !strings.Contains(string(out), want) {
		t.Fatalf("paddockd output does not say %q:\n%s", want, out)
	}
}
