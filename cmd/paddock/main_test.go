package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// fakeDaemon is a minimal paddockd for driving whole commands.
type fakeDaemon struct {
	t       *testing.T
	mu      sync.Mutex
	created []api.CreateSandboxRequest
	deleted []string
	files   map[string][]byte
	// exec answers an exec request; nil streams "hello\n" and exit 0.
	exec func(w http.ResponseWriter, r *http.Request, req api.ExecRequest)
}

func newFakeDaemon(t *testing.T) (*fakeDaemon, string) {
	d := &fakeDaemon{t: t, files: map[string][]byte{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		var req api.CreateSandboxRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		d.mu.Lock()
		d.created = append(d.created, req)
		d.mu.Unlock()
		writeTestJSON(w, http.StatusCreated, api.Sandbox{ID: "sb_new", State: api.StateRunning})
	})
	mux.HandleFunc("GET /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("cursor") == "" {
			writeTestJSON(w, 200, api.ListSandboxesResponse{Sandboxes: []api.Sandbox{{ID: "sb_1", State: "running"}, {ID: "sb_old", State: "terminated"}}, NextCursor: "p2"})
			return
		}
		writeTestJSON(w, 200, api.ListSandboxesResponse{Sandboxes: []api.Sandbox{{ID: "sb_2", State: "paused"}}})
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		writeTestJSON(w, 404, api.ErrorResponse{Error: api.ErrorBody{Code: api.CodeNotFound, Message: "no sandbox " + r.PathValue("id")}})
	})
	mux.HandleFunc("DELETE /v1/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		d.deleted = append(d.deleted, r.PathValue("id"))
		d.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/sandboxes/{id}/exec", func(w http.ResponseWriter, r *http.Request) {
		var req api.ExecRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		if d.exec != nil {
			d.exec(w, r, req)
			return
		}
		writeEvents(w, api.Event{Type: api.EventStdout, Data: []byte("hello\n")}, exitEvent(0))
	})
	mux.HandleFunc("PUT /v1/sandboxes/{id}/files", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		d.mu.Lock()
		d.files[r.URL.Query().Get("path")] = b
		d.mu.Unlock()
		writeTestJSON(w, 200, api.FileEntry{Path: r.URL.Query().Get("path"), Type: api.FileTypeFile, Mode: r.URL.Query().Get("mode")})
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/files", func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		defer d.mu.Unlock()
		_, _ = w.Write(d.files[r.URL.Query().Get("path")])
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/files/stat", func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Query().Get("path")
		d.mu.Lock()
		_, ok := d.files[p]
		d.mu.Unlock()
		switch {
		case ok:
			writeTestJSON(w, 200, api.FileEntry{Path: p, Type: api.FileTypeFile, Mode: "0600"})
		case p == "/workspace" || strings.HasSuffix(p, "dir"):
			writeTestJSON(w, 200, api.FileEntry{Path: p, Type: api.FileTypeDir, Mode: "0755"})
		default:
			writeTestJSON(w, 404, api.ErrorResponse{Error: api.ErrorBody{Code: api.CodeNotFound, Message: "no file " + p}})
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return d, srv.URL
}

func writeTestJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeEvents(w http.ResponseWriter, evs ...api.Event) {
	w.Header().Set("Content-Type", api.ContentTypeNDJSON)
	enc := json.NewEncoder(w)
	for _, ev := range evs {
		_ = enc.Encode(ev)
	}
}

func exitEvent(code int) api.Event {
	return api.Event{Type: api.EventExit, ExecResult: &api.ExecResult{ExitCode: &code}}
}

// runCLI runs the command line and returns the exit status, stdout and
// stderr.
func runCLI(ctx context.Context, c *cli, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	c.stdout, c.stderr = &stdout, &stderr
	if c.stdin == nil {
		c.stdin = strings.NewReader("")
	}
	c.now = func() time.Time { return testNow }
	code := c.main(ctx, args)
	return code, stdout.String(), stderr.String()
}

func TestMainUsage(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"no arguments", nil, 2, "", "Commands:"},
		{"help flag", []string{"-h"}, 0, "Commands:", ""},
		{"help command", []string{"help"}, 0, "Commands:", ""},
		{"help for run", []string{"help", "run"}, 0, "Usage: paddock run", ""},
		{"help for alias", []string{"help", "rm"}, 0, "Usage: paddock kill", ""},
		{"command -h", []string{"exec", "-h"}, 0, "--shell", ""},
		{"unknown command", []string{"frobnicate"}, 2, "", "paddock: unknown command \"frobnicate\" (see 'paddock help')\n"},
		{"help unknown", []string{"help", "nope"}, 2, "", "unknown command"},
		{"missing id", []string{"get"}, 2, "", "(see 'paddock help get')\n"},
		{"unknown flag", []string{"ls", "--bogus"}, 2, "", "paddock: unknown flag --bogus (see 'paddock help ls')\n"},
		{"run without command", []string{"run", "--template", "x"}, 2, "", "no command given"},
		{"exec without command", []string{"exec", "sb_1"}, 2, "", "no command given"},
		{"cp two local", []string{"cp", "a", "b"}, 2, "", "one of SRC and DST"},
		{"files without ls", []string{"files", "sb_1"}, 2, "", "unknown subcommand"},
		{"timeout bad seconds", []string{"timeout", "sb_1", "soon"}, 2, "", "invalid SECONDS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(context.Background(), &cli{}, tt.args...)
			if code != tt.wantCode || !strings.Contains(stdout, tt.wantStdout) || !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, %q", code, stdout, stderr, tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
			if tt.wantStdout == "" && stdout != "" {
				t.Errorf("unexpected stdout %q", stdout)
			}
		})
	}
}

func TestRunCommand(t *testing.T) {
	sig := "SIGKILL"
	tests := []struct {
		name       string
		args       []string
		events     []api.Event
		wantCode   int
		wantStdout string
		wantStderr string
		check      func(t *testing.T, create api.CreateSandboxRequest, exec api.ExecRequest)
	}{
		{
			name:     "streams binary output and exit status",
			args:     []string{"run", "--template", "python", "--env", "A=1", "--memory", "256", "--", "sh", "-c", "exit 3"},
			events:   []api.Event{{Type: api.EventStart}, {Type: api.EventStdout, Data: []byte{0, 0xff}}, {Type: api.EventStderr, Data: []byte("err\n")}, exitEvent(3)},
			wantCode: 3, wantStdout: "\x00\xff", wantStderr: "err\n",
			check: func(t *testing.T, create api.CreateSandboxRequest, exec api.ExecRequest) {
				if create.Template != "python" || create.Env["A"] != "1" || create.Resources == nil || create.Resources.MemoryMiB != 256 {
					t.Errorf("create request %+v", create)
				}
				if strings.Join(exec.Argv, "|") != "sh|-c|exit 3" || exec.MaxOutputBytes != maxStreamOutput {
					t.Errorf("exec request %+v", exec)
				}
			},
		},
		{
			name:     "timeout",
			args:     []string{"run", "--exec-timeout", "2", "sleep", "9"},
			events:   []api.Event{{Type: api.EventExit, ExecResult: &api.ExecResult{TimedOut: true, Signal: &sig, DurationMS: 2000}}},
			wantCode: 124, wantStderr: "paddock: command timed out after 2.0s",
			check: func(t *testing.T, create api.CreateSandboxRequest, exec api.ExecRequest) {
				if exec.TimeoutSeconds != 2 || create.TimeoutSeconds != 62 {
					t.Errorf("timeouts: exec %v, sandbox %v", exec.TimeoutSeconds, create.TimeoutSeconds)
				}
			},
		},
		{
			name:     "signal",
			args:     []string{"run", "--shell", "kill -9 $$"},
			events:   []api.Event{{Type: api.EventExit, ExecResult: &api.ExecResult{Signal: &sig}}},
			wantCode: 137,
			check: func(t *testing.T, create api.CreateSandboxRequest, exec api.ExecRequest) {
				if exec.Command != "kill -9 $$" || exec.Argv != nil {
					t.Errorf("exec request %+v", exec)
				}
			},
		},
		{
			name:     "error event",
			args:     []string{"run", "true"},
			events:   []api.Event{{Type: api.EventError, Error: &api.ErrorBody{Code: api.CodeUnavailable, Message: "agent gone"}}},
			wantCode: 1, wantStderr: "paddock: agent gone (unavailable)\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, url := newFakeDaemon(t)
			var execReq api.ExecRequest
			d.exec = func(w http.ResponseWriter, r *http.Request, req api.ExecRequest) {
				execReq = req
				writeEvents(w, tt.events...)
			}
			code, stdout, stderr := runCLI(context.Background(), &cli{}, append([]string{"--url", url}, tt.args...)...)
			if code != tt.wantCode || stdout != tt.wantStdout || !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, %q", code, stdout, stderr, tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
			if len(d.deleted) != 1 || d.deleted[0] != "sb_new" {
				t.Errorf("deleted %v, want [sb_new]", d.deleted)
			}
			if tt.check != nil && len(d.created) == 1 {
				tt.check(t, d.created[0], execReq)
			}
		})
	}
}

// interruptWriter records output and, on the first write, does what
// main's signal handler does on Ctrl-C.
type interruptWriter struct {
	bytes.Buffer
	c      *cli
	cancel context.CancelFunc
}

func (w *interruptWriter) Write(p []byte) (int, error) {
	w.c.signal.Store(2)
	w.cancel()
	return w.Buffer.Write(p)
}

func TestRunInterruptedDeletes(t *testing.T) {
	d, url := newFakeDaemon(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d.exec = func(w http.ResponseWriter, r *http.Request, req api.ExecRequest) {
		writeEvents(w, api.Event{Type: api.EventStdout, Data: []byte("working\n")})
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
	c := &cli{stdin: strings.NewReader(""), now: time.Now}
	stdout := &interruptWriter{c: c, cancel: cancel}
	var stderr bytes.Buffer
	c.stdout, c.stderr = stdout, &stderr
	code := c.main(ctx, []string{"run", "--url", url, "--", "sleep", "100"})
	if code != 130 || stdout.String() != "working\n" || stderr.String() != "paddock: interrupted\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.deleted) != 1 {
		t.Errorf("sandbox not deleted after the interrupt: %v", d.deleted)
	}
}

func TestSandboxCommands(t *testing.T) {
	_, url := newFakeDaemon(t)
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"create", []string{"create", "--meta", "k=v"}, 0, "sb_new\n", ""},
		{"ls hides ended", []string{"ls"}, 0, "sb_1", ""},
		{"ls all pages", []string{"ls", "--json", "--all"}, 0, `"id": "sb_old"`, ""},
		{"get not found", []string{"get", "sb_x"}, 1, "", "paddock: get sb_x: no sandbox sb_x (not_found)\n"},
		{"kill several", []string{"kill", "sb_1", "sb_2"}, 0, "sb_1\nsb_2\n", ""},
		{"exec streams", []string{"exec", "sb_1", "echo", "hello"}, 0, "hello\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Global flags go anywhere before the command line of exec.
			args := append([]string{tt.args[0], "--url", url}, tt.args[1:]...)
			code, stdout, stderr := runCLI(context.Background(), &cli{}, args...)
			if code != tt.wantCode || !strings.Contains(stdout, tt.wantStdout) || stderr != tt.wantStderr {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, %q", code, stdout, stderr, tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
			if tt.name == "ls hides ended" && (strings.Contains(stdout, "sb_old") || !strings.Contains(stdout, "sb_2")) {
				t.Errorf("ls output:\n%s", stdout)
			}
		})
	}
}

func TestCp(t *testing.T) {
	d, url := newFakeDaemon(t)
	dir := t.TempDir()
	local := filepath.Join(dir, "in.bin")
	data := []byte{1, 2, 0, 0xfe}
	if err := os.WriteFile(local, data, 0o640); err != nil {
		t.Fatal(err)
	}
	steps := [][]string{
		{"cp", local, "sb_1:/workspace"},                // into a directory: keeps the name
		{"cp", "sb_1:/workspace/in.bin", dir + "/out/"}, // fails: no such local directory
		{"cp", "sb_1:/workspace/in.bin", filepath.Join(dir, "out.bin")},
	}
	wantCodes := []int{0, 1, 0}
	for i, args := range steps {
		code, _, stderr := runCLI(context.Background(), &cli{}, append([]string{"--url", url}, args...)...)
		if code != wantCodes[i] {
			t.Fatalf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
	if got := d.files["/workspace/in.bin"]; !bytes.Equal(got, data) {
		t.Errorf("uploaded %v, want %v", got, data)
	}
	got, err := os.ReadFile(filepath.Join(dir, "out.bin"))
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("downloaded %v, %v; want %v", got, err, data)
	}
	c := &cli{stdin: strings.NewReader("from stdin")}
	if code, _, stderr := runCLI(context.Background(), c, "--url", url, "cp", "-", "sb_1:note.txt"); code != 0 {
		t.Fatalf("cp from stdin: exit %d, %q", code, stderr)
	}
	if code, stdout, _ := runCLI(context.Background(), &cli{}, "--url", url, "cp", "sb_1:note.txt", "-"); code != 0 || stdout != "from stdin" {
		t.Errorf("cp to stdout: exit %d, %q", code, stdout)
	}
}
