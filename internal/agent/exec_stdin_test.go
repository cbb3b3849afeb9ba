package agent_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/agent"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// stdinClient is a client of a real agent with cfg; old hides the
// streaming route the way an agent older than it answers (404).
func stdinClient(t testing.TB, cfg agent.Config, old bool) (*agent.Client, string) {
	t.Helper()
	cfg.Workdir = filepath.Join(t.TempDir(), "workspace")
	if err := os.MkdirAll(cfg.Workdir, 0o755); err != nil {
		t.Fatal(err)
	}
	h := agent.NewServer(cfg, nil).Handler()
	if old {
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == agent.ExecStdinPath {
				http.NotFound(w, r)
				return
			}
			inner.ServeHTTP(w, r)
		})
	}
	return newClient(t, h), cfg.Workdir
}

// failingReader gives n bytes of x, then err.
type failingReader struct {
	n   int
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, f.err
	}
	k := min(len(p), f.n)
	copy(p, bytes.Repeat([]byte("x"), k))
	f.n -= k
	return k, nil
}

func TestExecStdin(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	tests := []struct {
		name    string
		old     bool
		req     api.ExecRequest
		stdin   io.Reader
		size    int64
		stdout  string
		timeout bool
	}{
		{name: "1 MiB counted", req: api.ExecRequest{Argv: []string{"wc", "-c"}}, stdin: bytes.NewReader(big), size: int64(len(big)), stdout: "1048576\n"},
		{name: "unknown size", req: api.ExecRequest{Argv: []string{"wc", "-c"}}, stdin: io.MultiReader(bytes.NewReader(big)), size: -1, stdout: "1048576\n"},
		{name: "binary", req: api.ExecRequest{Argv: []string{"od", "-An", "-tx1"}}, stdin: bytes.NewReader([]byte{0, 0xff, '\n'}), size: 3, stdout: " 00 ff 0a\n"},
		{name: "empty", req: api.ExecRequest{Argv: []string{"wc", "-c"}}, stdin: bytes.NewReader(nil), size: 0, stdout: "0\n"},
		{name: "old agent", old: true, req: api.ExecRequest{Argv: []string{"wc", "-c"}}, stdin: bytes.NewReader(big), size: -1, stdout: "1048576\n"},
		{name: "command reads none", req: api.ExecRequest{Command: "echo done"}, stdin: bytes.NewReader(big), size: -1, stdout: "done\n"},
		{name: "command closes stdin early", req: api.ExecRequest{Command: "head -c 3; exec 0<&-; sleep 0.2; echo ."}, stdin: bytes.NewReader(big), size: -1, stdout: "012.\n"},
		{name: "command never reads, times out", req: api.ExecRequest{Argv: []string{"sleep", "30"}, TimeoutSeconds: 0.5},
			stdin: bytes.NewReader(big), size: -1, timeout: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := stdinClient(t, agent.Config{}, tt.old)
			before := runtime.NumGoroutine()
			res, err := c.ExecStdin(context.Background(), "sb", &tt.req, tt.stdin, tt.size)
			if err != nil {
				t.Fatal(err)
			}
			if res.Stdout != tt.stdout || res.TimedOut != tt.timeout {
				t.Fatalf("stdout %q timed_out %v, want %q %v (%+v)", res.Stdout, res.TimedOut, tt.stdout, tt.timeout, res)
			}
			c.CloseIdleConnections()
			waitGoroutines(t, before)
		})
	}
}

// waitGoroutines fails unless the goroutines go back to at most n (plus
// the spare shim's few) within a few seconds.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > n+4 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, had %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestExecStdinStreams checks that the command reads its stdin while the
// rest has not been sent: it answers a first line before the second one
// exists.
func TestExecStdinStreams(t *testing.T) {
	c, _ := stdinClient(t, agent.Config{}, false)
	pr, pw := io.Pipe()
	defer pw.Close()
	evs, err := c.ExecStreamStdin(context.Background(), "sb", &api.ExecRequest{Command: `read a; echo "got $a"; read b; echo "then $b"`}, pr, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer evs.Close()
	if _, err := io.WriteString(pw, "one\n"); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for {
		ev, err := evs.Next()
		if err != nil {
			t.Fatalf("stream ended early: %v (stdout %q)", err, out.String())
		}
		out.Write(ev.Data)
		if out.String() == "got one\n" {
			io.WriteString(pw, "two\n")
			pw.Close()
		}
		if ev.Type == api.EventExit {
			break
		}
	}
	if out.String() != "got one\nthen two\n" {
		t.Fatalf("stdout %q", out.String())
	}
}

// TestExecStdinFails checks that a stdin that breaks off or passes its
// limit kills the command instead of closing its stdin, and is an error.
func TestExecStdinFails(t *testing.T) {
	broken := errors.New("client went away")
	tests := []struct {
		name  string
		cfg   agent.Config
		stdin failingReader
		class error
	}{
		{name: "broken", stdin: failingReader{n: 200 << 10, err: broken}},
		{name: "too large", cfg: agent.Config{MaxStdinBytes: 100 << 10}, stdin: failingReader{n: 300 << 10, err: io.EOF}, class: sandbox.ErrTooLarge},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(tt.name, func(t *testing.T) {
				c, wd := stdinClient(t, tt.cfg, false)
				req := &api.ExecRequest{Command: "cat >/dev/null; touch finished"}
				var err error
				stdin := tt.stdin
				if stream {
					var evs *agent.Events
					if evs, err = c.ExecStreamStdin(context.Background(), "sb", req, &stdin, -1); err == nil {
						err = lastEventError(evs)
					}
				} else {
					_, err = c.ExecStdin(context.Background(), "sb", req, &stdin, -1)
				}
				if err == nil || (tt.class != nil && !errors.Is(err, tt.class)) {
					t.Fatalf("err %v, want one of class %v", err, tt.class)
				}
				time.Sleep(200 * time.Millisecond)
				if _, err := os.Stat(filepath.Join(wd, "finished")); err == nil {
					t.Fatal("the command ran on past its broken stdin")
				}
			})
		}
	}
}

// TestExecStdinRefused checks that a request the agent refuses before
// the start is that refusal, however much stdin follows it.
func TestExecStdinRefused(t *testing.T) {
	c, _ := stdinClient(t, agent.Config{}, false)
	big := bytes.Repeat([]byte("x"), 8<<20)
	for range 5 {
		_, err := c.ExecStdin(context.Background(), "sb", &api.ExecRequest{Argv: []string{"cat"}, Cwd: "/nonexistent"}, bytes.NewReader(big), -1)
		if !errors.Is(err, sandbox.ErrInvalid) {
			t.Fatalf("err %v, want invalid", err)
		}
	}
}

// lastEventError reads evs to their end: the error of an error event or
// of the stream.
func lastEventError(evs *agent.Events) error {
	defer evs.Close()
	for {
		ev, err := evs.Next()
		if err != nil {
			return err
		}
		switch ev.Type {
		case api.EventError:
			return &agent.Error{Code: ev.Error.Code, Message: ev.Error.Message}
		case api.EventExit:
			return nil
		}
	}
}
