package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// TestAgentErrorsPassThrough: the agent's own error answers reach the
// client with their status and code.
func TestAgentErrorsPassThrough(t *testing.T) {
	ts := newTestServer(t)
	sb := ts.create(ts.alice)
	base := "/v1/sandboxes/" + sb.ID
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		{"missing file", "GET", base + "/files?path=no-such-file", nil, 404, api.CodeNotFound},
		{"stat of a missing file", "GET", base + "/files/stat?path=no-such-file", nil, 404, api.CodeNotFound},
		{"bad cwd", "POST", base + "/exec", api.ExecRequest{Argv: []string{"true"}, Cwd: "no-such-dir"}, 400, api.CodeBadRequest},
		{"unknown program", "POST", base + "/exec", api.ExecRequest{Argv: []string{"no-such-program-paddock"}}, 400, api.CodeBadRequest},
		{"unknown process", "GET", base + "/processes/p999", nil, 404, api.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ts.do(tc.method, tc.path, ts.alice, tc.body)
			if r.status != tc.status {
				t.Fatalf("%d %s, want %d", r.status, r.body, tc.status)
			}
			if e := r.errBody(t); e.Code != tc.code {
				t.Errorf("code %q, want %q", e.Code, tc.code)
			}
		})
	}
}

// TestProcesses: a background process is listed, its output replays as
// NDJSON ending with exit, and wait returns its result.
func TestProcesses(t *testing.T) {
	ts := newTestServer(t)
	sb := ts.create(ts.alice)
	base := "/v1/sandboxes/" + sb.ID
	var p api.Process
	ts.json("POST", base+"/processes", ts.alice, api.ExecRequest{Argv: []string{"sh", "-c", "echo out; exit 4"}}, http.StatusCreated, &p)
	if p.ID == "" || p.PID <= 0 {
		t.Fatalf("process %+v", p)
	}
	var list api.ListProcessesResponse
	ts.json("GET", base+"/processes", ts.alice, nil, http.StatusOK, &list)
	if len(list.Processes) != 1 || list.Processes[0].ID != p.ID {
		t.Errorf("listed %+v", list.Processes)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.url+base+"/processes/"+p.ID+"/output", nil)
	req.Header.Set("Authorization", "Bearer "+ts.alice)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != api.ContentTypeNDJSON {
		t.Errorf("Content-Type %q", resp.Header.Get("Content-Type"))
	}
	var out string
	var last api.Event
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if last.Type == api.EventStdout {
			out += string(last.Data)
		}
	}
	if last.Type != api.EventExit || last.ExitCode == nil || *last.ExitCode != 4 || out != "out\n" {
		t.Errorf("output stream: stdout %q, last event %+v", out, last)
	}

	var done api.Process
	ts.json("POST", base+"/processes/"+p.ID+"/wait?timeout_seconds=30", ts.alice, nil, http.StatusOK, &done)
	if done.State != api.ProcessExited || done.Result == nil || *done.Result.ExitCode != 4 {
		t.Errorf("waited process %+v", done)
	}
}
