package agent_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/agent"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// newClient serves handler on a temporary unix socket and returns a
// client whose every sandbox id reaches it.
func newClient(t testing.TB, handler http.Handler) *agent.Client {
	t.Helper()
	dir, err := os.MkdirTemp("", "pc") // short: socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	c := agent.NewClient(func(ctx context.Context, id string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	})
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// realClient is a client of a real agent with workdir dir.
func realClient(t *testing.T) (*agent.Client, string) {
	wd := filepath.Join(t.TempDir(), "workspace")
	if err := os.MkdirAll(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	srv := agent.NewServer(agent.Config{Workdir: wd}, nil)
	return newClient(t, srv.Handler()), wd
}

func TestClientExec(t *testing.T) {
	c, _ := realClient(t)
	ctx := context.Background()
	if err := c.Health(ctx, "sb1"); err != nil {
		t.Fatalf("Health: %v", err)
	}
	res, err := c.Exec(ctx, "sb1", &api.ExecRequest{Command: "echo hi; echo oops >&2; exit 3"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "hi\n" || res.Stderr != "oops\n" || res.ExitCode == nil || *res.ExitCode != 3 {
		t.Fatalf("result %+v", res)
	}
	evs, err := c.ExecStream(ctx, "sb1", &api.ExecRequest{Argv: []string{"echo", "streamed"}})
	if err != nil {
		t.Fatal(err)
	}
	defer evs.Close()
	var out strings.Builder
	for {
		ev, err := evs.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out.Write(ev.Data)
		if ev.Type == api.EventExit && (ev.ExecResult == nil || *ev.ExitCode != 0) {
			t.Fatalf("exit event %+v", ev)
		}
	}
	if out.String() != "streamed\n" {
		t.Fatalf("streamed %q", out.String())
	}
}

// TestClientErrors checks that the agent's refusals come back as errors of
// the sandbox class of their code, whichever call made them.
func TestClientErrors(t *testing.T) {
	c, wd := realClient(t)
	ctx := context.Background()
	missing := filepath.Join(wd, "missing")
	blocked := filepath.Join(wd, "file")
	if err := os.WriteFile(blocked, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call func() error
		want error
		code string
	}{
		{"read missing", func() error { _, err := c.ReadFile(ctx, "sb", missing, 1<<20); return err }, sandbox.ErrNotFound, api.CodeNotFound},
		{"stat missing", func() error { _, err := c.StatFile(ctx, "sb", missing); return err }, sandbox.ErrNotFound, api.CodeNotFound},
		{"write where mkdir finds nothing", func() error {
			// procfs answers ENOENT to mkdir.
			_, err := c.WriteFile(ctx, "sb", "/proc/paddock-missing/f", "", strings.NewReader("x"), 1)
			return err
		}, sandbox.ErrNotFound, api.CodeNotFound},
		{"mkdir over file", func() error { _, err := c.Mkdir(ctx, "sb", blocked, ""); return err }, sandbox.ErrConflict, api.CodeConflict},
		{"bad mode", func() error { _, err := c.Mkdir(ctx, "sb", missing, "999"); return err }, sandbox.ErrInvalid, api.CodeBadRequest},
		{"exec timeout too long", func() error {
			_, err := c.Exec(ctx, "sb", &api.ExecRequest{Command: "true", TimeoutSeconds: api.MaxExecTimeoutSeconds + 1})
			return err
		}, sandbox.ErrInvalid, api.CodeBadRequest},
		{"exec too many args", func() error {
			_, err := c.Exec(ctx, "sb", &api.ExecRequest{Argv: make([]string, api.MaxExecArgs+1)})
			return err
		}, sandbox.ErrInvalid, api.CodeBadRequest},
		{"unknown process", func() error { _, err := c.GetProcess(ctx, "sb", "nope"); return err }, sandbox.ErrNotFound, api.CodeNotFound},
		{"kill bad signal", func() error {
			p, err := c.StartProcess(ctx, "sb", &api.ExecRequest{Command: "sleep 5"})
			if err != nil {
				return err
			}
			defer c.KillProcess(ctx, "sb", p.ID, "")
			return c.KillProcess(ctx, "sb", p.ID, "SIGNOPE")
		}, sandbox.ErrInvalid, api.CodeBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var ae *agent.Error
			if !errors.Is(err, tt.want) || !errors.As(err, &ae) || ae.Code != tt.code {
				t.Fatalf("err = %v (%T), want class %v, code %s", err, err, tt.want, tt.code)
			}
		})
	}
}

func TestClientFilesAndProcesses(t *testing.T) {
	c, wd := realClient(t)
	ctx := context.Background()
	p := filepath.Join(wd, "a", "b.txt")
	e, err := c.WriteFile(ctx, "sb", p, "0600", strings.NewReader("hello"), 5)
	if err != nil || e.Size != 5 || e.Mode != "0600" {
		t.Fatalf("WriteFile: %+v, %v", e, err)
	}
	f, err := c.ReadFile(ctx, "sb", p, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if string(b) != "hello" || f.Size != 5 {
		t.Fatalf("ReadFile: %q size %d", b, f.Size)
	}
	if _, err := c.ReadFile(ctx, "sb", p, 4); !errors.Is(err, sandbox.ErrTooLarge) {
		t.Fatalf("ReadFile over the bound: %v", err)
	}
	ls, err := c.ListFiles(ctx, "sb", "", 3)
	if err != nil || len(ls.Entries) != 2 {
		t.Fatalf("ListFiles: %+v, %v", ls, err)
	}
	if err := c.DeleteFile(ctx, "sb", filepath.Join(wd, "a"), true); err != nil {
		t.Fatal(err)
	}
	proc, err := c.StartProcess(ctx, "sb", &api.ExecRequest{Command: "read x; echo got $x", KeepStdinOpen: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WriteStdin(ctx, "sb", proc.ID, strings.NewReader("it\n"), 3, true); err != nil {
		t.Fatal(err)
	}
	wait := 10.0
	done, err := c.WaitProcess(ctx, "sb", proc.ID, &wait)
	if err != nil || done.State != api.ProcessExited || done.Result == nil || done.Result.Stdout != "got it\n" {
		t.Fatalf("WaitProcess: %+v, %v", done, err)
	}
	list, err := c.ListProcesses(ctx, "sb")
	if err != nil || len(list.Processes) != 1 {
		t.Fatalf("ListProcesses: %+v, %v", list, err)
	}
}

func TestClientPorts(t *testing.T) {
	c, _ := realClient(t)
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err == nil {
			conn.Write([]byte("pong"))
			conn.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	ports, err := c.Ports(ctx, "sb")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range ports {
		found = found || p.Port == port
	}
	if !found {
		t.Fatalf("port %d not in %+v", port, ports)
	}
	conn, err := c.DialPort(ctx, "sb", port)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	b, _ := io.ReadAll(conn)
	conn.Close()
	if string(b) != "pong" {
		t.Fatalf("read %q through the port", b)
	}
	if _, err := c.DialPort(ctx, "sb", 1); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("DialPort to a closed port: %v", err)
	}
}

// TestClientHostileAgent checks that answers an agent has no business
// giving are unavailable errors and that reads are bounded.
func TestClientHostileAgent(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"teapot", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }},
		{"error without body", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotFound) }},
		{"unknown code", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"code":"unknown_template","message":"x"}}`)
		}},
		{"not JSON", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "<html>") }},
		{"trailing data", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"stdout":"a"} {}`) }},
		{"endless", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"stdout":"`)
			chunk := strings.Repeat("a", 1<<16)
			for i := 0; i < 1<<10; i++ {
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, tt.handler)
			_, err := c.Exec(ctx, "sb", &api.ExecRequest{Command: "true"})
			if !errors.Is(err, sandbox.ErrUnavailable) {
				t.Fatalf("err = %v, want unavailable", err)
			}
		})
	}
}
