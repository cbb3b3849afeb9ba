package integration

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// probeDaemon measures how long the daemon takes to answer an unrelated
// tenant while f runs, and fails if it stops answering.
func probeDaemon(t *testing.T, f func()) (worst time.Duration) {
	t.Helper()
	other := newSandboxOn(t, shared, 1, nil)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	var probeErr error
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			start := time.Now()
			res, err := other.Exec(ctx, api.ExecRequest{Argv: []string{"echo", "ok"}})
			cancel()
			if err != nil || res.Stdout != "ok\n" {
				probeErr = errors.Join(probeErr, err)
				return
			}
			resp, err := http.Get(shared.url + "/v1/health")
			if err != nil {
				probeErr = errors.Join(probeErr, err)
				return
			}
			resp.Body.Close()
			worst = max(worst, time.Since(start))
		}
	}()
	f()
	close(done)
	wg.Wait()
	if probeErr != nil {
		t.Fatalf("daemon or other tenant stopped answering: %v", probeErr)
	}
	return worst
}

func TestForkBombContained(t *testing.T) {
	ctx := ctxT(t)
	sb := newSandbox(t, &api.CreateSandboxRequest{Resources: &api.Resources{PIDs: 128}})
	worst := probeDaemon(t, func() {
		res, err := sb.Exec(ctx, api.ExecRequest{Command: "bomb() { bomb | bomb & }; bomb; sleep 100", TimeoutSeconds: 5})
		if err != nil {
			t.Fatal(err)
		}
		if !res.TimedOut {
			t.Errorf("fork bomb: %+v", res)
		}
	})
	t.Logf("worst other-tenant exec+health latency during the fork bomb: %v", worst)
	res, err := sb.Exec(ctx, api.ExecRequest{Command: "echo usable; ps -e --no-headers | wc -l"})
	if err != nil || !strings.HasPrefix(res.Stdout, "usable\n") {
		t.Fatalf("sandbox after fork bomb: %+v %v", res, err)
	}
}

func TestMemoryHogContained(t *testing.T) {
	ctx := ctxT(t)
	sb := newSandbox(t, &api.CreateSandboxRequest{Resources: &api.Resources{MemoryMiB: 128}})
	probeDaemon(t, func() {
		res, err := sb.Exec(ctx, api.ExecRequest{
			Argv:           []string{"python3", "-c", "b = []\nwhile True: b.append(bytearray(16 << 20))"},
			TimeoutSeconds: 60,
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != nil && *res.ExitCode == 0 || res.TimedOut {
			t.Errorf("memory hog was not stopped: %+v", res)
		}
		if !res.OOMKilled || res.Signal == nil || *res.Signal != "SIGKILL" {
			t.Errorf("memory hog: oom_killed %v signal %v, want an OOM kill reported", res.OOMKilled, ptr(res.Signal))
		}
		t.Logf("memory hog result: exit %v signal %v oom_killed %v stderr %q", ptr(res.ExitCode), ptr(res.Signal), res.OOMKilled, tail(res.Stderr, 200))
	})
	res, err := sb.Exec(ctx, api.ExecRequest{Command: "echo usable"})
	if err != nil || res.Stdout != "usable\n" {
		t.Fatalf("sandbox after memory hog: %+v %v", res, err)
	}
}

func TestDiskLimit(t *testing.T) {
	ctx := ctxT(t)
	sb := newSandbox(t, &api.CreateSandboxRequest{Resources: &api.Resources{DiskMiB: 96}})
	res, err := sb.Exec(ctx, api.ExecRequest{Command: "dd if=/dev/zero of=/workspace/big bs=1M count=200 2>&1; df -m / | tail -1 | awk '{print $2}'"})
	if err != nil {
		t.Fatal(err)
	}
	// "Disk quota exceeded" with the quota disk mode, "No space left on
	// device" with a loop disk.
	if !strings.Contains(res.Stdout, "No space left on device") && !strings.Contains(res.Stdout, "Disk quota exceeded") {
		t.Fatalf("disk fill: %+v", res)
	}
	if _, err := sb.Files().Write(ctx, "more.bin", make([]byte, 8<<20), 0); !errors.Is(err, client.ErrNoSpace) {
		t.Fatalf("files API write on a full disk: %v, want no_space", err)
	}
	res, err = sb.Exec(ctx, api.ExecRequest{Command: "rm /workspace/big && echo freed > /workspace/ok && cat /workspace/ok"})
	if err != nil || res.Stdout != "freed\n" {
		t.Fatalf("after freeing: %+v %v", res, err)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
