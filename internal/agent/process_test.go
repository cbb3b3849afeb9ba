package agent_test

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/agent"
)

func (h *harness) startProcess(req api.ExecRequest) api.Process {
	h.t.Helper()
	var p api.Process
	h.must(http.StatusCreated, http.MethodPost, "/processes", req, &p)
	if p.ID == "" || p.PID <= 0 || p.State != api.ProcessRunning || p.StartedAt.IsZero() {
		h.t.Fatalf("bad new process %+v", p)
	}
	return p
}

func (h *harness) waitProcess(id, timeout string) api.Process {
	h.t.Helper()
	var p api.Process
	h.must(http.StatusOK, http.MethodPost, "/processes/"+id+"/wait?timeout_seconds="+timeout, nil, &p)
	return p
}

func TestProcessStdinAndReattach(t *testing.T) {
	h := newHarness(t, agent.Config{})
	p := h.startProcess(api.ExecRequest{Argv: []string{"cat"}, Stdin: "first ", KeepStdinOpen: true})

	var list api.ListProcessesResponse
	h.must(http.StatusOK, http.MethodGet, "/processes", nil, &list)
	if !slices.ContainsFunc(list.Processes, func(x api.Process) bool { return x.ID == p.ID }) {
		t.Fatalf("%s not listed: %+v", p.ID, list)
	}
	if w := h.waitProcess(p.ID, "0.1"); w.State != api.ProcessRunning || w.Result != nil {
		t.Fatalf("cat ended without EOF: %+v", w)
	}
	h.must(http.StatusNoContent, http.MethodPost, "/processes/"+p.ID+"/stdin", []byte("second\n"), nil)
	h.must(http.StatusNoContent, http.MethodPost, "/processes/"+p.ID+"/stdin?eof=true", []byte("third"), nil)
	w := h.waitProcess(p.ID, "10")
	if w.State != api.ProcessExited || w.Result == nil || w.EndedAt == nil {
		t.Fatalf("not exited: %+v", w)
	}
	if w.Result.Stdout != "first second\nthird" || deref(w.Result.ExitCode) != 0 {
		t.Errorf("result %+v", w.Result)
	}
	for _, path := range []string{"/stdin", "/kill"} {
		if st, eb := h.try(http.MethodPost, "/processes/"+p.ID+path, []byte{}, nil); st != http.StatusConflict || eb.Code != api.CodeConflict {
			t.Errorf("%s after exit: %d %s", path, st, eb.Code)
		}
	}
	var got api.Process
	h.must(http.StatusOK, http.MethodGet, "/processes/"+p.ID, nil, &got)
	if got.Result == nil || got.Result.Stdout != w.Result.Stdout {
		t.Errorf("GET after exit: %+v", got)
	}
	// Attaching after the exit replays everything and ends.
	stdout, _, exit := checkEvents(t, h.stream(context.Background(), http.MethodGet, "/processes/"+p.ID+"/output", nil, nil))
	if stdout != "first second\nthird" || deref(exit.ExitCode) != 0 {
		t.Errorf("replay %q, exit %+v", stdout, exit.ExecResult)
	}
}

func TestProcessStdinClosedWithoutKeepOpen(t *testing.T) {
	h := newHarness(t, agent.Config{})
	p := h.startProcess(api.ExecRequest{Argv: []string{"sleep", "5"}})
	if st, eb := h.try(http.MethodPost, "/processes/"+p.ID+"/stdin", []byte("x"), nil); st != http.StatusConflict {
		t.Errorf("stdin to a closed stdin: %d %s", st, eb.Code)
	}
	h.must(http.StatusNoContent, http.MethodPost, "/processes/"+p.ID+"/kill", nil, nil)
	if w := h.waitProcess(p.ID, "10"); deref(w.Result.Signal) != "SIGKILL" {
		t.Errorf("after kill: %+v", w.Result)
	}
}

// TestProcessOutputFollowers attaches two readers at different times: both
// get the whole output in order, live, then the exit.
func TestProcessOutputFollowers(t *testing.T) {
	h := newHarness(t, agent.Config{})
	p := h.startProcess(api.ExecRequest{Command: "for i in 1 2 3 4; do echo $i; sleep 0.15; done; echo end >&2"})
	var wg sync.WaitGroup
	results := make([]string, 2)
	for i, delay := range []time.Duration{0, 300 * time.Millisecond} {
		wg.Go(func() {
			time.Sleep(delay)
			evs := h.stream(context.Background(), http.MethodGet, "/processes/"+p.ID+"/output", nil, nil)
			stdout, stderr, exit := checkEvents(t, evs)
			results[i] = stdout + "|" + stderr + "|" + evs[0].ProcessID
			if deref(exit.ExitCode) != 0 {
				t.Errorf("exit %+v", exit.ExecResult)
			}
		})
	}
	wg.Wait()
	want := "1\n2\n3\n4\n|end\n|" + p.ID
	for i, got := range results {
		if got != want {
			t.Errorf("reader %d got %q, want %q", i, got, want)
		}
	}
}

func TestProcessKill(t *testing.T) {
	h := newHarness(t, agent.Config{})
	tests := []struct {
		name     string
		signal   string
		wantSig  string
		treeDies bool
	}{
		{"default SIGKILL kills the tree", "", "SIGKILL", true},
		{"SIGKILL by number", "9", "SIGKILL", true},
		{"TERM goes to the main process", "TERM", "SIGTERM", false},
		{"sigint lower case", "sigint", "SIGINT", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			p := h.startProcess(api.ExecRequest{Argv: []string{"sh", "-c", "setsid sleep 30 & echo $! > bg.pid; exec sleep 30"}, Cwd: dir})
			bg := readPID(t, filepath.Join(dir, "bg.pid"))
			killLater(t, bg)
			h.must(http.StatusNoContent, http.MethodPost, "/processes/"+p.ID+"/kill", api.SignalRequest{Signal: tt.signal}, nil)
			w := h.waitProcess(p.ID, "10")
			if w.Result == nil || deref(w.Result.Signal) != tt.wantSig || w.Result.ExitCode != nil || w.Result.TimedOut {
				t.Fatalf("result %+v", w.Result)
			}
			if tt.treeDies {
				waitDead(t, bg)
			} else if !alive(bg) {
				t.Error("a non-KILL signal killed the whole tree")
			}
		})
	}
}

func TestProcessTimeout(t *testing.T) {
	h := newHarness(t, agent.Config{})
	p := h.startProcess(api.ExecRequest{Argv: []string{"sleep", "30"}, TimeoutSeconds: 0.3})
	w := h.waitProcess(p.ID, "10")
	if w.Result == nil || !w.Result.TimedOut || deref(w.Result.Signal) != "SIGKILL" {
		t.Errorf("result %+v", w.Result)
	}
}

func TestProcessErrors(t *testing.T) {
	h := newHarness(t, agent.Config{})
	p := h.startProcess(api.ExecRequest{Argv: []string{"sleep", "10"}})
	t.Cleanup(func() { h.try(http.MethodPost, "/processes/"+p.ID+"/kill", nil, nil) })
	tests := []struct {
		method, path string
		body         any
		status       int
		code         string
	}{
		{http.MethodGet, "/processes/nope", nil, 404, api.CodeNotFound},
		{http.MethodPost, "/processes/nope/wait", nil, 404, api.CodeNotFound},
		{http.MethodGet, "/processes/nope/output", nil, 404, api.CodeNotFound},
		{http.MethodPost, "/processes/nope/stdin", []byte("x"), 404, api.CodeNotFound},
		{http.MethodPost, "/processes/nope/kill", nil, 404, api.CodeNotFound},
		{http.MethodPost, "/processes/" + p.ID + "/kill", api.SignalRequest{Signal: "SIGNOPE"}, 400, api.CodeBadRequest},
		{http.MethodPost, "/processes/" + p.ID + "/kill", api.SignalRequest{Signal: "99"}, 400, api.CodeBadRequest},
		{http.MethodPost, "/processes/" + p.ID + "/kill", `{"signal":1}`, 400, api.CodeBadRequest},
		{http.MethodPost, "/processes/" + p.ID + "/wait?timeout_seconds=3601", nil, 400, api.CodeBadRequest},
		{http.MethodPost, "/processes/" + p.ID + "/wait?timeout_seconds=x", nil, 400, api.CodeBadRequest},
		{http.MethodPost, "/processes/" + p.ID + "/stdin?eof=maybe", nil, 400, api.CodeBadRequest},
		{http.MethodPost, "/processes", api.ExecRequest{Argv: []string{"no-such-tool-xyz"}}, 400, api.CodeBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			if st, eb := h.try(tt.method, tt.path, tt.body, nil); st != tt.status || eb.Code != tt.code {
				t.Errorf("got %d %s (%s), want %d %s", st, eb.Code, eb.Message, tt.status, tt.code)
			}
		})
	}
}

// TestProcessTable checks the bound: exited processes are evicted oldest
// first, running ones never.
func TestProcessTable(t *testing.T) {
	h := newHarness(t, agent.Config{MaxProcesses: 2})
	a := h.startProcess(api.ExecRequest{Argv: []string{"true"}})
	b := h.startProcess(api.ExecRequest{Argv: []string{"sleep", "10"}})
	h.waitProcess(a.ID, "10")
	c := h.startProcess(api.ExecRequest{Argv: []string{"sleep", "10"}}) // evicts a
	if st, _ := h.try(http.MethodGet, "/processes/"+a.ID, nil, nil); st != http.StatusNotFound {
		t.Errorf("exited %s not evicted: %d", a.ID, st)
	}
	if st, eb := h.try(http.MethodPost, "/processes", api.ExecRequest{Argv: []string{"true"}}, nil); st != http.StatusTooManyRequests || eb.Code != api.CodeLimitExceeded {
		t.Errorf("full table of running processes: %d %s", st, eb.Code)
	}
	if st, _ := h.try(http.MethodPost, "/exec", api.ExecRequest{Argv: []string{"true"}}, nil); st != http.StatusTooManyRequests {
		t.Errorf("exec with a full table: %d", st)
	}
	for _, p := range []api.Process{b, c} {
		h.must(http.StatusNoContent, http.MethodPost, "/processes/"+p.ID+"/kill", nil, nil)
		h.waitProcess(p.ID, "10")
	}
	if res := h.exec(api.ExecRequest{Argv: []string{"echo", "ok"}}); res.Stdout != "ok\n" {
		t.Errorf("exec after eviction: %+v", res)
	}
}

// TestProcessForget: DELETE /processes/{id} drops the record of a process
// that ended, and refuses one that runs (409); an unknown id is 404.
func TestProcessForget(t *testing.T) {
	h := newHarness(t, agent.Config{})
	p := h.startProcess(api.ExecRequest{Argv: []string{"sleep", "30"}})
	h.must(http.StatusConflict, http.MethodDelete, "/processes/"+p.ID, nil, nil)
	h.must(http.StatusNoContent, http.MethodPost, "/processes/"+p.ID+"/kill", api.SignalRequest{}, nil)
	h.waitProcess(p.ID, "10")
	h.must(http.StatusNoContent, http.MethodDelete, "/processes/"+p.ID, nil, nil)
	h.must(http.StatusNotFound, http.MethodGet, "/processes/"+p.ID, nil, nil)
	h.must(http.StatusNotFound, http.MethodDelete, "/processes/"+p.ID, nil, nil)
	var list api.ListProcessesResponse
	h.must(http.StatusOK, http.MethodGet, "/processes", nil, &list)
	if len(list.Processes) != 0 {
		t.Fatalf("records left: %+v", list.Processes)
	}
}
