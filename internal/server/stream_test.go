package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// streamExec starts an NDJSON exec and returns the answer.
func (ts *testServer) streamExec(ctx context.Context, id string, req api.ExecRequest) *http.Response {
	ts.t.Helper()
	body, _ := json.Marshal(req)
	hr, _ := http.NewRequestWithContext(ctx, "POST", ts.url+"/v1/sandboxes/"+id+"/exec", bytes.NewReader(body))
	hr.Header.Set("Authorization", "Bearer "+ts.alice)
	hr.Header.Set("Accept", api.ContentTypeNDJSON)
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		ts.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != api.ContentTypeNDJSON {
		ts.t.Fatalf("stream: %s, Content-Type %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	return resp
}

// TestExecStream: one JSON event per line, starting with start and
// ending with exit, the output in between.
func TestExecStream(t *testing.T) {
	ts := newTestServer(t)
	sb := ts.create(ts.alice)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp := ts.streamExec(ctx, sb.ID, api.ExecRequest{Argv: []string{"sh", "-c", "echo one; echo two >&2; echo three; exit 3"}})
	defer resp.Body.Close()
	var events []api.Event
	var stdout, stderr bytes.Buffer
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev api.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %q is not one JSON event: %v", sc.Text(), err)
		}
		events = append(events, ev)
		switch ev.Type {
		case api.EventStdout:
			stdout.Write(ev.Data)
		case api.EventStderr:
			stderr.Write(ev.Data)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(events) < 2 || events[0].Type != api.EventStart || events[len(events)-1].Type != api.EventExit {
		t.Fatalf("events %+v, want start ... exit", events)
	}
	last := events[len(events)-1]
	if last.ExecResult == nil || last.ExitCode == nil || *last.ExitCode != 3 {
		t.Errorf("exit event %+v, want exit code 3", last)
	}
	if stdout.String() != "one\nthree\n" || stderr.String() != "two\n" {
		t.Errorf("streamed stdout %q stderr %q", stdout.String(), stderr.String())
	}
}

// TestExecStreamFlushAndDisconnect: events reach the client while the
// command runs, and a client that goes away ends the command.
func TestExecStreamFlushAndDisconnect(t *testing.T) {
	ts := newTestServer(t)
	sb := ts.create(ts.alice)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The command reports its pid and then blocks far past the test.
	resp := ts.streamExec(ctx, sb.ID, api.ExecRequest{Argv: []string{"sh", "-c", "echo $$; exec sleep 3600"}})
	sc := bufio.NewScanner(resp.Body)
	pid := 0
	for pid == 0 && sc.Scan() {
		var ev api.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if ev.Type == api.EventStdout {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(ev.Data)))
		}
	}
	if pid <= 0 {
		t.Fatalf("no pid streamed before the command ended (not flushed?): %v", sc.Err())
	}
	cancel() // the client goes away
	resp.Body.Close()
	// The agent kills the command's tree; ask from a second command.
	eventually(t, "the command outlived its client", func() bool {
		res := ts.exec(ts.alice, sb.ID, api.ExecRequest{Argv: []string{"sh", "-c", "kill -0 " + strconv.Itoa(pid)}})
		return res.ExitCode != nil && *res.ExitCode != 0
	})
}

// TestExecResult: the plain JSON answer carries the result; a timeout is
// a result, not an error.
func TestExecResult(t *testing.T) {
	ts := newTestServer(t)
	sb := ts.create(ts.alice)
	res := ts.exec(ts.alice, sb.ID, api.ExecRequest{Command: "printf hi; exit 7"})
	if res.ExitCode == nil || *res.ExitCode != 7 || res.Stdout != "hi" {
		t.Errorf("result %+v, want exit 7 and stdout hi", res)
	}
	res = ts.exec(ts.alice, sb.ID, api.ExecRequest{Argv: []string{"sleep", "3600"}, TimeoutSeconds: 0.2})
	if !res.TimedOut || res.ExitCode != nil || res.Signal == nil {
		t.Errorf("result %+v, want timed_out with a signal", res)
	}
	// Files go through the same proxy, both ways.
	ts.json("PUT", "/v1/sandboxes/"+sb.ID+"/files?path=dir/a.txt", ts.alice, "contents", http.StatusOK, nil)
	r := ts.do("GET", "/v1/sandboxes/"+sb.ID+"/files?path=dir/a.txt", ts.alice, nil)
	if r.status != http.StatusOK || string(r.body) != "contents" {
		t.Errorf("file read back: %d %q", r.status, r.body)
	}
}
