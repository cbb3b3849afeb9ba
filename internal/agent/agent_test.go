package agent_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/agent"
	"github.com/paddock-sandbox/paddock/internal/shim"
	"golang.org/x/sys/unix"
)

// TestMain lets the test binary act as the shim (Config.ShimPath defaults
// to /proc/self/exe) and as a standalone agent for the PID 1 test.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "shim":
			os.Exit(shim.Run(os.Args[2:]))
		case "serve-test":
			os.Exit(serveTest(os.Args[2], os.Args[3]))
		}
	}
	// Shims and commands start with the stop signals' default actions, as
	// under a real agent, even when this test runs with one ignored (under
	// nohup, or in the background of a shell without job control): a
	// signal this process handles is reset in its children, an ignored one
	// stays ignored.
	for _, sig := range []os.Signal{unix.SIGHUP, unix.SIGINT, unix.SIGTERM} {
		if signal.Ignored(sig) {
			signal.Notify(make(chan os.Signal, 1), sig)
		}
	}
	// Commands run with `bash -l`, whose profile may start pyenv and the
	// like from $HOME (and hang on their locks): give them an empty HOME.
	home, err := os.MkdirTemp("", "agent-home")
	if err == nil {
		os.Setenv("HOME", home)
	}
	code := m.Run()
	if err == nil {
		os.RemoveAll(home)
	}
	os.Exit(code)
}

// serveTest is a minimal agent main: serve-test SOCKET WORKDIR.
func serveTest(sock, workdir string) int {
	runtime.GOMAXPROCS(1) // as paddock-agent serve
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return 1
	}
	srv := agent.NewServer(agent.Config{Workdir: workdir, Reaper: os.Getpid() == 1}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // end when the test closes our stdin
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	if err := srv.Serve(ctx, ln); err != nil {
		return 1
	}
	return 0
}

// harness is an agent served in-process on a temporary unix socket.
type harness struct {
	t       testing.TB
	c       *http.Client
	workdir string
	since   int64 // clock ticks since boot when the harness started
}

func newHarness(t *testing.T, cfg agent.Config) *harness {
	t.Helper()
	sockDir, err := os.MkdirTemp("", "pa") // short: socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "agent.sock")
	since := uptimeTicks(t)
	cfg.Workdir = filepath.Join(t.TempDir(), "workspace")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := agent.NewServer(cfg, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	h := &harness{t: t, c: agent.NewHTTPClient(sock), workdir: cfg.Workdir, since: since}
	h.waitHealthy()
	return h
}

func (h *harness) waitHealthy() {
	h.t.Helper()
	for i := 0; i < 100; i++ {
		// The socket's file exists from bind, a moment before listen: a
		// refused connection is retried too.
		if resp, err := h.c.Get("http://agent/health"); err == nil {
			var out map[string]string
			err = json.NewDecoder(resp.Body).Decode(&out)
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusOK && out["status"] == "ok" {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.t.Fatal("agent did not become healthy")
}

// try sends a request. body is sent raw if it is []byte, else as JSON. out
// receives a 2xx JSON answer; the api.ErrorResponse of a failure is
// returned.
func (h *harness) try(method, path string, body, out any) (int, api.ErrorBody) {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, "http://agent"+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	resp, err := h.c.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	if resp.StatusCode >= 300 {
		var er api.ErrorResponse
		if err := json.Unmarshal(data, &er); err != nil || er.Error.Code == "" {
			h.t.Fatalf("%s %s: %d with a body that is no ErrorResponse: %q", method, path, resp.StatusCode, data)
		}
		return resp.StatusCode, er.Error
	}
	switch o := out.(type) {
	case nil:
	case *[]byte:
		*o = data
	default:
		if err := json.Unmarshal(data, out); err != nil {
			h.t.Fatalf("%s %s: decode %q: %v", method, path, data, err)
		}
	}
	return resp.StatusCode, api.ErrorBody{}
}

// must is try that fails the test unless the answer has status want.
func (h *harness) must(want int, method, path string, body, out any) {
	h.t.Helper()
	if st, eb := h.try(method, path, body, out); st != want {
		h.t.Fatalf("%s %s: status %d (%s: %s), want %d", method, path, st, eb.Code, eb.Message, want)
	}
}

func (h *harness) exec(req api.ExecRequest) api.ExecResult {
	h.t.Helper()
	var res api.ExecResult
	h.must(http.StatusOK, http.MethodPost, "/exec", req, &res)
	return res
}

// stream sends a request asking for NDJSON and returns the events read
// until the stream ends.
func (h *harness) stream(ctx context.Context, method, path string, body any, each func(api.Event)) []api.Event {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://agent"+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Accept", api.ContentTypeNDJSON)
	resp, err := h.c.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != api.ContentTypeNDJSON {
		h.t.Fatalf("%s %s: status %d, content type %q", method, path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var evs []api.Event
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev api.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			h.t.Fatalf("bad event %q: %v", sc.Bytes(), err)
		}
		evs = append(evs, ev)
		if each != nil {
			each(ev)
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		h.t.Fatalf("read stream: %v", err)
	}
	return evs
}

// checkEvents checks the shape of a complete stream and returns its
// stdout and stderr and the exit event.
func checkEvents(t *testing.T, evs []api.Event) (stdout, stderr string, exit api.Event) {
	t.Helper()
	if len(evs) < 2 || evs[0].Type != api.EventStart || evs[len(evs)-1].Type != api.EventExit {
		t.Fatalf("stream must go from start to exit: %+v", evs)
	}
	if evs[0].PID <= 0 || evs[0].ProcessID == "" {
		t.Errorf("start event without pid or process id: %+v", evs[0])
	}
	var o, e strings.Builder
	for _, ev := range evs[1 : len(evs)-1] {
		switch ev.Type {
		case api.EventStdout:
			o.Write(ev.Data)
		case api.EventStderr:
			e.Write(ev.Data)
		default:
			t.Errorf("unexpected event %+v", ev)
		}
	}
	exit = evs[len(evs)-1]
	if exit.ExecResult == nil || exit.Stdout != "" || exit.Stderr != "" {
		t.Errorf("exit event must carry the result without output: %+v", exit.ExecResult)
	}
	return o.String(), e.String(), exit
}

// readPID waits for a pid file written by a test command.
func readPID(t *testing.T, path string) int {
	t.Helper()
	for i := 0; i < 300; i++ {
		data, err := os.ReadFile(path)
		if s := strings.TrimSpace(string(data)); err == nil && s != "" {
			pid, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("pid file %s: %q", path, data)
			}
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("pid file %s never appeared", path)
	return 0
}

// alive reports whether pid runs (a zombie does not count).
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(data, ')')
	return i < 0 || i+2 >= len(data) || data[i+2] != 'Z'
}

// waitDead fails the test unless pid is gone within two seconds.
func waitDead(t *testing.T, pid int) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if !alive(pid) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = unix.Kill(pid, unix.SIGKILL)
	t.Errorf("process %d survived", pid)
}

// killLater makes sure a process a test left running is gone at the end.
func killLater(t *testing.T, pid int) {
	t.Cleanup(func() { _ = unix.Kill(pid, unix.SIGKILL) })
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
