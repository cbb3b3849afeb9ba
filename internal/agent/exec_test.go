package agent_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/agent"
)

func TestExec(t *testing.T) {
	for _, reaper := range []bool{false, true} {
		t.Run("reaper="+map[bool]string{false: "off", true: "on"}[reaper], func(t *testing.T) {
			testExec(t, newHarness(t, agent.Config{Reaper: reaper}))
		})
	}
}

func testExec(t *testing.T, h *harness) {
	if err := os.MkdirAll(filepath.Join(h.workdir, "sub", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho tool \"$@\"\n"
	if err := os.WriteFile(filepath.Join(h.workdir, "sub", "bin", "mytool"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PADDOCK_TEST_SECRET", "leaked")
	binary := string([]byte{0, 1, 2, 'a', 0xc3, 0xa9, '\n'}) // valid UTF-8 with NULs

	tests := []struct {
		name       string
		req        api.ExecRequest
		exitCode   any // int, or nil when killed by a signal
		signal     any
		stdout     string
		stderrTail string
	}{
		{name: "argv", req: api.ExecRequest{Argv: []string{"echo", "hello", "world"}}, exitCode: 0, stdout: "hello world\n"},
		{name: "shell", req: api.ExecRequest{Command: "echo $FOO; echo oops >&2; exit 7", Env: map[string]string{"FOO": "bar"}},
			exitCode: 7, stdout: "bar\n", stderrTail: "oops\n"},
		{name: "stdin", req: api.ExecRequest{Argv: []string{"cat"}, Stdin: "from stdin"}, exitCode: 0, stdout: "from stdin"},
		{name: "stdin base64", req: api.ExecRequest{Argv: []string{"cat"}, StdinBase64: base64.StdEncoding.EncodeToString([]byte(binary))},
			exitCode: 0, stdout: binary},
		{name: "no stdin reads EOF", req: api.ExecRequest{Argv: []string{"wc", "-c"}}, exitCode: 0, stdout: "0\n"},
		{name: "relative cwd", req: api.ExecRequest{Argv: []string{"pwd"}, Cwd: "sub"}, exitCode: 0, stdout: filepath.Join(h.workdir, "sub") + "\n"},
		{name: "default cwd", req: api.ExecRequest{Argv: []string{"pwd"}}, exitCode: 0, stdout: h.workdir + "\n"},
		{name: "PATH from env", req: api.ExecRequest{Argv: []string{"mytool", "x"}, Env: map[string]string{"PATH": filepath.Join(h.workdir, "sub", "bin") + ":/usr/bin:/bin"}},
			exitCode: 0, stdout: "tool x\n"},
		{name: "relative executable", req: api.ExecRequest{Argv: []string{"./bin/mytool"}, Cwd: "sub"}, exitCode: 0, stdout: "tool\n"},
		{name: "PADDOCK_ variables hidden", req: api.ExecRequest{Argv: []string{"sh", "-c", "echo ${PADDOCK_TEST_SECRET:-hidden}"}}, exitCode: 0, stdout: "hidden\n"},
		{name: "killed by signal", req: api.ExecRequest{Argv: []string{"sh", "-c", "kill -TERM $$"}}, exitCode: nil, signal: "SIGTERM"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := h.exec(tt.req)
			if got := deref(res.ExitCode); got != tt.exitCode {
				t.Errorf("exit_code = %v, want %v", got, tt.exitCode)
			}
			if got := deref(res.Signal); got != tt.signal {
				t.Errorf("signal = %v, want %v", got, tt.signal)
			}
			if res.Stdout != tt.stdout {
				t.Errorf("stdout = %q, want %q", res.Stdout, tt.stdout)
			}
			if !strings.HasSuffix(res.Stderr, tt.stderrTail) {
				t.Errorf("stderr = %q, want it to end in %q", res.Stderr, tt.stderrTail)
			}
			if res.TimedOut || res.StdoutTruncated || res.StdoutBytes != int64(len(tt.stdout)) {
				t.Errorf("flags or counts wrong: %+v", res)
			}
		})
	}
	t.Run("timeout kills the tree", func(t *testing.T) { testTimeoutKillsTree(t, h) })
}

// testTimeoutKillsTree checks that a timeout kills a setsid grandchild and
// a double-forked one along with the command.
func testTimeoutKillsTree(t *testing.T, h *harness) {
	dir := t.TempDir()
	cmd := `setsid sleep 30 & echo $! > setsid.pid
sh -c 'sleep 30 & echo $! > double.pid' &
sleep 30`
	start := time.Now()
	res := h.exec(api.ExecRequest{Command: cmd, Cwd: dir, TimeoutSeconds: 2}) // room for a loaded -race run to write the pid files
	setsidPID, doublePID := readPID(t, filepath.Join(dir, "setsid.pid")), readPID(t, filepath.Join(dir, "double.pid"))
	killLater(t, setsidPID)
	killLater(t, doublePID)
	if !res.TimedOut || res.ExitCode != nil || deref(res.Signal) != "SIGKILL" {
		t.Errorf("want a timed-out result killed by SIGKILL, got %+v", res)
	}
	if d := time.Since(start); d > 10*time.Second || res.DurationMS < 1900 {
		t.Errorf("took %v, duration_ms %d", d, res.DurationMS)
	}
	waitDead(t, setsidPID)
	waitDead(t, doublePID)
}

func TestExecBadRequests(t *testing.T) {
	h := newHarness(t, agent.Config{MaxStdinBytes: 1000})
	if err := os.WriteFile(filepath.Join(h.workdir, "garbage"), []byte("\x7fELF nope"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		body   any
		status int
		msg    string
	}{
		{"argv and command", api.ExecRequest{Argv: []string{"true"}, Command: "true"}, 400, "not both"},
		{"neither", api.ExecRequest{}, 400, "required"},
		{"empty argv0", api.ExecRequest{Argv: []string{""}}, 400, "empty"},
		{"unknown field", `{"argv":["true"],"bogus":1}`, 400, "unknown field"},
		{"bad JSON", `{"argv":`, 400, "invalid JSON"},
		{"trailing data", `{"argv":["true"]} {}`, 400, "trailing"},
		{"empty body", ``, 400, "empty body"},
		{"missing executable", api.ExecRequest{Argv: []string{"no-such-tool-xyz"}}, 400, "executable file not found: no-such-tool-xyz"},
		{"missing relative executable", api.ExecRequest{Argv: []string{"./nope"}}, 400, "executable file not found: ./nope"},
		{"not an executable format", api.ExecRequest{Argv: []string{"./garbage"}}, 400, "exec ./garbage: exec format error"},
		{"missing cwd", api.ExecRequest{Argv: []string{"true"}, Cwd: "/no/such/dir"}, 400, "cwd"},
		{"NUL in argv", api.ExecRequest{Argv: []string{"echo", "a\x00b"}}, 400, "NUL"},
		{"bad env name", api.ExecRequest{Argv: []string{"true"}, Env: map[string]string{"A=B": "c"}}, 400, "environment"},
		{"negative timeout", api.ExecRequest{Argv: []string{"true"}, TimeoutSeconds: -1}, 400, "timeout_seconds"},
		{"timeout too long", api.ExecRequest{Argv: []string{"true"}, TimeoutSeconds: 86401}, 400, "timeout_seconds"},
		{"output cap too large", api.ExecRequest{Argv: []string{"true"}, MaxOutputBytes: 16<<20 + 1}, 400, "max_output_bytes"},
		{"both stdins", api.ExecRequest{Argv: []string{"cat"}, Stdin: "a", StdinBase64: "YQ=="}, 400, "not both"},
		{"bad base64", api.ExecRequest{Argv: []string{"cat"}, StdinBase64: "!!"}, 400, "stdin_base64"},
		{"body too large", strings.Repeat("a", 2<<20), 413, "body larger"},
		{"stdin too large", api.ExecRequest{Argv: []string{"cat"}, Stdin: strings.Repeat("x", 1001)}, 413, "stdin larger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, eb := h.try(http.MethodPost, "/exec", tt.body, nil)
			if st != tt.status || !strings.Contains(eb.Message, tt.msg) {
				t.Errorf("got %d %s %q, want %d with %q", st, eb.Code, eb.Message, tt.status, tt.msg)
			}
			if want := map[int]string{400: api.CodeBadRequest, 413: api.CodeTooLarge}[tt.status]; eb.Code != want {
				t.Errorf("code %q, want %q", eb.Code, want)
			}
		})
	}
	st, eb := h.try(http.MethodGet, "/nope", nil, nil)
	if st != http.StatusNotFound || eb.Code != api.CodeNotFound {
		t.Errorf("unknown route: %d %s", st, eb.Code)
	}
}

func TestExecOutputCap(t *testing.T) {
	h := newHarness(t, agent.Config{})
	tests := []struct {
		name                     string
		req                      api.ExecRequest
		stdoutLen, stderrLen     int
		stdoutBytes, stderrBytes int64
		stdoutTrunc, stderrTrunc bool
	}{
		{"5 MB stdout, cap 1000", api.ExecRequest{Command: "yes | head -c 5000000; echo small >&2", MaxOutputBytes: 1000},
			1000, 6, 5000000, 6, true, false},
		{"5 MB stderr, default cap", api.ExecRequest{Command: "head -c 5000000 /dev/zero >&2; echo small"},
			6, 65536, 6, 5000000, false, true},
		{"exactly the cap", api.ExecRequest{Command: "head -c 4096 /dev/zero", MaxOutputBytes: 4096},
			4096, 0, 4096, 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := h.exec(tt.req)
			if len(res.Stdout) != tt.stdoutLen || len(res.Stderr) != tt.stderrLen ||
				res.StdoutBytes != tt.stdoutBytes || res.StderrBytes != tt.stderrBytes ||
				res.StdoutTruncated != tt.stdoutTrunc || res.StderrTruncated != tt.stderrTrunc {
				t.Errorf("got lens %d/%d bytes %d/%d truncated %v/%v", len(res.Stdout), len(res.Stderr),
					res.StdoutBytes, res.StderrBytes, res.StdoutTruncated, res.StderrTruncated)
			}
			if tt.stdoutTrunc && res.Stdout != strings.Repeat("y\n", tt.stdoutLen/2) {
				t.Errorf("kept stdout is not the start of the output: %q...", res.Stdout[:20])
			}
		})
	}
	t.Run("stream is capped too", func(t *testing.T) {
		evs := h.stream(context.Background(), http.MethodPost, "/exec",
			api.ExecRequest{Command: "yes | head -c 3000000", MaxOutputBytes: 5000}, nil)
		stdout, _, exit := checkEvents(t, evs)
		if len(stdout) != 5000 || !exit.StdoutTruncated || exit.StdoutBytes != 3000000 {
			t.Errorf("streamed %d bytes, exit %+v", len(stdout), exit.ExecResult)
		}
	})
}

func TestExecStream(t *testing.T) {
	h := newHarness(t, agent.Config{})
	start := time.Now()
	var firstOut time.Duration
	evs := h.stream(context.Background(), http.MethodPost, "/exec", api.ExecRequest{
		Command: "echo one; sleep 0.3; echo two >&2; sleep 0.1; echo three; exit 4",
	}, func(ev api.Event) {
		if ev.Type == api.EventStdout && firstOut == 0 {
			firstOut = time.Since(start)
		}
	})
	stdout, stderr, exit := checkEvents(t, evs)
	var order []string
	for _, ev := range evs {
		order = append(order, ev.Type)
	}
	if got := strings.Join(order, ","); got != "start,stdout,stderr,stdout,exit" {
		t.Errorf("events %s", got)
	}
	if stdout != "one\nthree\n" || !strings.HasSuffix(stderr, "two\n") {
		t.Errorf("stdout %q stderr %q", stdout, stderr)
	}
	if deref(exit.ExitCode) != 4 || exit.StdoutBytes != 10 {
		t.Errorf("exit %+v", exit.ExecResult)
	}
	if total := time.Since(start); firstOut == 0 || total-firstOut < 300*time.Millisecond {
		t.Errorf("output not streamed live: first stdout after %v of %v", firstOut, total)
	}
}

// TestExecCancelKillsTree checks that a client going away kills the command
// and what it started.
func TestExecCancelKillsTree(t *testing.T) {
	h := newHarness(t, agent.Config{})
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mainPID int
	go func() { // cancel once the background child runs
		for ctx.Err() == nil {
			if data, _ := os.ReadFile(filepath.Join(dir, "bg.pid")); len(data) > 0 {
				cancel()
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	h.stream(ctx, http.MethodPost, "/exec", api.ExecRequest{
		Command: "sleep 30 & echo $! > bg.pid; sleep 30", Cwd: dir,
	}, func(ev api.Event) {
		if ev.Type == api.EventStart {
			mainPID = ev.PID
		}
	})
	if ctx.Err() == nil {
		t.Fatal("stream ended before the cancel")
	}
	if mainPID <= 0 {
		t.Fatal("no start event with a pid")
	}
	bgPID := readPID(t, filepath.Join(dir, "bg.pid"))
	killLater(t, bgPID)
	waitDead(t, bgPID)
	waitDead(t, mainPID)
}

// TestExecLeavesBackgroundChildren checks that exec returns when the
// command exits even if a background child keeps the output pipes open,
// and that the child keeps running.
func TestExecLeavesBackgroundChildren(t *testing.T) {
	h := newHarness(t, agent.Config{})
	dir := t.TempDir()
	start := time.Now()
	res := h.exec(api.ExecRequest{Command: "sleep 5 & echo $! > bg.pid; echo done", Cwd: dir})
	pid := readPID(t, filepath.Join(dir, "bg.pid"))
	killLater(t, pid)
	if res.Stdout != "done\n" || deref(res.ExitCode) != 0 || time.Since(start) > 3*time.Second {
		t.Errorf("result %+v after %v", res, time.Since(start))
	}
	if !alive(pid) {
		t.Error("background child was killed")
	}
}

// TestExecConcurrentNoLeaks runs commands in parallel and checks that the
// agent holds no more file descriptors afterwards than before.
func TestExecConcurrentNoLeaks(t *testing.T) {
	h := newHarness(t, agent.Config{})
	h.exec(api.ExecRequest{Argv: []string{"true"}}) // warm up connections
	countFDs := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	h.c.CloseIdleConnections()
	time.Sleep(50 * time.Millisecond) // the server closes its side
	before := countFDs()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			want := fmt.Sprintf("run %d\n", i)
			var res api.ExecResult
			if st, eb := h.try(http.MethodPost, "/exec", api.ExecRequest{Argv: []string{"sh", "-c", "cat >/dev/null; echo run " + fmt.Sprint(i)}, Stdin: "x"}, &res); st != 200 || res.Stdout != want {
				t.Errorf("run %d: %d %s %+v", i, st, eb.Message, res)
			}
		})
	}
	wg.Wait()
	h.c.CloseIdleConnections()
	var after int
	for range 100 { // server-side connections close asynchronously
		if after = countFDs(); after <= before {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("%d file descriptors before, %d after", before, after)
}

// TestExecShimPath runs commands under a shim binary of its own
// (Config.ShimPath, as paddock-agent does with paddock-shim).
func TestExecShimPath(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A copy of the test binary (TestMain serves as the shim) under
	// another name, so that the shim's exe tells which binary ran.
	p := filepath.Join(t.TempDir(), "paddock-shim")
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o555); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, agent.Config{ShimPath: p})
	for i := range 3 { // the spare, then shims started after it
		res := h.exec(api.ExecRequest{Command: "readlink /proc/$PPID/exe"})
		if deref(res.ExitCode) != 0 || strings.TrimSpace(res.Stdout) != p {
			t.Fatalf("exec %d: the shim ran %+v, want %s", i, res, p)
		}
	}
}

// TestExecShimPathFallback: a shim binary that cannot be run (here: not a
// program) makes the agent run itself as the shim, and execs still work.
func TestExecShimPathFallback(t *testing.T) {
	p := filepath.Join(t.TempDir(), "paddock-shim")
	if err := os.WriteFile(p, []byte("not a program"), 0o555); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, agent.Config{ShimPath: p})
	for i := range 3 {
		if res := h.exec(api.ExecRequest{Argv: []string{"echo", "ok"}}); res.Stdout != "ok\n" {
			t.Fatalf("exec %d: %+v", i, res)
		}
	}
}
