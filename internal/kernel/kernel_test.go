package kernel

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"golang.org/x/sys/unix"
)

// startLocal starts an interpreter as a plain child of the test.
func startLocal(path string, argv []string, attr *syscall.ProcAttr) (int, <-chan struct{}, error) {
	pid, err := syscall.ForkExec(path, argv, attr)
	if err != nil {
		return 0, nil, err
	}
	ch := make(chan struct{})
	go func() {
		var ws unix.WaitStatus
		for {
			if _, err := unix.Wait4(pid, &ws, 0, nil); err != unix.EINTR {
				break
			}
		}
		close(ch)
	}()
	return pid, ch, nil
}

func newTestManager(t *testing.T, cfg Config) *Manager {
	t.Helper()
	cfg.Workdir = t.TempDir()
	cfg.Start = startLocal
	cfg.Env = func(extra map[string]string) ([]string, error) {
		env := []string{"PATH=/usr/bin:/bin", "HOME=" + cfg.Workdir}
		for k, v := range extra {
			env = append(env, k+"="+v)
		}
		return env, nil
	}
	if cfg.Grace == 0 {
		cfg.Grace = 500 * time.Millisecond
	}
	m := NewManager(cfg)
	t.Cleanup(m.Close)
	return m
}

func run(t *testing.T, m *Manager, req api.CodeRequest) *api.CodeExecution {
	t.Helper()
	res, err := m.Run(context.Background(), req, nil)
	if err != nil {
		t.Fatalf("run %q: %v", req.Code, err)
	}
	return res
}

func mainText(res *api.CodeExecution) string {
	for _, r := range res.Results {
		if r.IsMainResult {
			return r.Data["text/plain"]
		}
	}
	return ""
}

func TestLanguages(t *testing.T) {
	m := newTestManager(t, Config{})
	cases := []struct {
		lang, setup, code, stdout, main string
	}{
		{"python", "x = 41", "print('hi')\nx + 1", "hi\n", "42"},
		{"javascript", "const x = await Promise.resolve(41)", "console.log('hi'); x + 1", "hi\n", "42"},
		{"bash", "cd /tmp; Y=5", "echo $Y; pwd", "5\n/tmp\n", ""},
	}
	for _, tc := range cases {
		t.Run(tc.lang, func(t *testing.T) {
			if res := run(t, m, api.CodeRequest{Language: tc.lang, Code: tc.setup}); res.Error != nil {
				t.Fatalf("setup: %+v stderr %q", res.Error, res.Stderr)
			}
			res := run(t, m, api.CodeRequest{Language: tc.lang, Code: tc.code})
			if res.Error != nil || res.Stdout != tc.stdout || mainText(res) != tc.main || res.ExecutionCount != 2 {
				t.Fatalf("got %+v", res)
			}
		})
	}
}

func TestErrorsAndTimeouts(t *testing.T) {
	m := newTestManager(t, Config{})
	res := run(t, m, api.CodeRequest{Code: "def f():\n  return 1/0\nf()"})
	if res.Error == nil || res.Error.Name != "ZeroDivisionError" || !strings.Contains(res.Error.Traceback, "return 1/0") {
		t.Fatalf("error: %+v", res.Error)
	}
	res = run(t, m, api.CodeRequest{Code: "y = 1\nwhile True: pass", TimeoutSeconds: 0.5})
	if !res.TimedOut || res.Restarted || res.Error == nil || res.Error.Name != "TimeoutError" {
		t.Fatalf("timeout: %+v", res)
	}
	if res := run(t, m, api.CodeRequest{Code: "y"}); mainText(res) != "1" {
		t.Fatalf("after timeout: %+v", res)
	}
	// A loop bash cannot break out of on SIGINT: restarted.
	res = run(t, m, api.CodeRequest{Language: "bash", Code: "while :; do :; done", TimeoutSeconds: 0.3})
	if !res.TimedOut || !res.Restarted {
		t.Fatalf("bash timeout: %+v", res)
	}
	if res := run(t, m, api.CodeRequest{Language: "bash", Code: "echo ok"}); res.Stdout != "ok\n" || res.ExecutionCount != 1 {
		t.Fatalf("after restart: %+v", res)
	}
	res = run(t, m, api.CodeRequest{Code: "import os; os._exit(3)"})
	if !res.Restarted || res.Error == nil || res.Error.Name != "KernelDied" {
		t.Fatalf("exit: %+v", res)
	}
}

func TestLimits(t *testing.T) {
	m := newTestManager(t, Config{MaxContexts: 2, MaxItemBytes: 1000})
	if _, err := m.Create(api.CodeContextRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(api.CodeContextRequest{Language: "bash"}); err != nil {
		t.Fatal(err)
	}
	_, err := m.Create(api.CodeContextRequest{})
	if e, ok := err.(*Error); !ok || e.Code != api.CodeLimitExceeded {
		t.Fatalf("third context: %v", err)
	}
	id := m.List()[0].ID
	res := run(t, m, api.CodeRequest{ContextID: id, Code: "'x' * 5000"})
	if len(res.Results) != 1 || res.Results[0].Omitted["text/plain"] == 0 {
		t.Fatalf("big result: %+v", res.Results)
	}
}
