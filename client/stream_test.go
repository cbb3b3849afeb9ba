package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// collect runs readEvents over input and returns the event types, the
// concatenated data and the error.
func collect(t *testing.T, input string) (types []string, data string, err error) {
	t.Helper()
	readEvents(context.Background(), strings.NewReader(input), func(ev api.Event, e error) bool {
		if e != nil {
			err = e
			return false
		}
		types = append(types, ev.Type)
		data += string(ev.Data)
		if ev.Type == api.EventExit && ev.ExecResult == nil {
			t.Error("exit event without ExecResult")
		}
		return true
	})
	return types, data, err
}

func TestReadEvents(t *testing.T) {
	tests := []struct {
		name      string
		input     string
		wantTypes string
		wantData  string
		wantErr   error
	}{
		{
			name: "full stream",
			input: `{"type":"start","pid":7}` + "\n" +
				`{"type":"stdout","data":"aGVsbG8K"}` + "\n" +
				`{"type":"stderr","data":"/wA="}` + "\n" +
				`{"type":"exit","exit_code":0,"stdout_bytes":6}` + "\n",
			wantTypes: "start,stdout,stderr,exit",
			wantData:  "hello\n\xff\x00",
		},
		{
			name:      "exit without result fields",
			input:     `{"type":"exit"}`,
			wantTypes: "exit",
		},
		{
			name:      "nothing after exit is read",
			input:     `{"type":"exit","exit_code":1}` + "\n" + `garbage`,
			wantTypes: "exit",
		},
		{
			name:      "unknown event types pass through",
			input:     `{"type":"heartbeat"}` + "\n" + `{"type":"exit","exit_code":0}`,
			wantTypes: "heartbeat,exit",
		},
		{
			name:      "error event",
			input:     `{"type":"stdout","data":"YQ=="}` + "\n" + `{"type":"error","error":{"code":"unavailable","message":"agent died"}}` + "\n",
			wantTypes: "stdout",
			wantData:  "a",
			wantErr:   ErrUnavailable,
		},
		{
			name:      "error event without body",
			input:     `{"type":"error"}`,
			wantErr:   ErrInternal,
			wantTypes: "",
		},
		{
			name:      "ends without exit",
			input:     `{"type":"stdout","data":"YQ=="}` + "\n",
			wantTypes: "stdout",
			wantData:  "a",
			wantErr:   io.ErrUnexpectedEOF,
		},
		{
			name:      "truncated line",
			input:     `{"type":"stdout","da`,
			wantErr:   io.ErrUnexpectedEOF,
			wantTypes: "",
		},
		{
			name:    "empty",
			input:   "",
			wantErr: errNoExit,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			types, data, err := collect(t, tt.input)
			if got := strings.Join(types, ","); got != tt.wantTypes {
				t.Errorf("types = %q, want %q", got, tt.wantTypes)
			}
			if data != tt.wantData {
				t.Errorf("data = %q, want %q", data, tt.wantData)
			}
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestReadEventsMalformed(t *testing.T) {
	_, _, err := collect(t, "{\"type\":\"start\"}\nnot json\n")
	if err == nil || errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("err = %v, want a decode error", err)
	}
}

func TestExecStreamHTTP(t *testing.T) {
	tests := []struct {
		name      string
		ctype     string
		status    int
		body      string
		wantTypes string
		wantData  string
		wantErr   error
	}{
		{"ndjson", api.ContentTypeNDJSON, 200, `{"type":"stdout","data":"b2sK"}` + "\n" + `{"type":"exit","exit_code":3}` + "\n", "stdout,exit", "ok\n", nil},
		{"json fallback", "application/json; charset=utf-8", 200, `{"exit_code":0,"stdout":"out","stderr":"err"}`, "stdout,stderr,exit", "outerr", nil},
		{"api error", "application/json", 404, `{"error":{"code":"not_found","message":"no sandbox"}}`, "", "", ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost || r.URL.Path != "/v1/sandboxes/sb1/exec" || r.Header.Get("Accept") != api.ContentTypeNDJSON {
					http.Error(w, "wrong request "+r.Method+" "+r.URL.Path+" "+r.Header.Get("Accept"), 400)
					return
				}
				w.Header().Set("Content-Type", tt.ctype)
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			var types []string
			var data string
			var gotErr error
			var exit *api.ExecResult
			for ev, err := range New(srv.URL, "").Sandbox("sb1").ExecStream(context.Background(), api.ExecRequest{Argv: []string{"true"}}) {
				if err != nil {
					gotErr = err
					break
				}
				types = append(types, ev.Type)
				data += string(ev.Data)
				if ev.Type == api.EventExit {
					exit = ev.ExecResult
				}
			}
			if got := strings.Join(types, ","); got != tt.wantTypes || data != tt.wantData {
				t.Errorf("types %q data %q, want %q %q", got, data, tt.wantTypes, tt.wantData)
			}
			if tt.wantErr == nil && gotErr != nil || tt.wantErr != nil && !errors.Is(gotErr, tt.wantErr) {
				t.Errorf("err = %v, want %v", gotErr, tt.wantErr)
			}
			if tt.wantErr == nil && (exit == nil || exit.ExitCode == nil || exit.Stdout != "") {
				t.Errorf("exit result = %+v", exit)
			}
		})
	}
}

func TestProcessOutputBreakCancels(t *testing.T) {
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		if r.URL.Path != "/v1/sandboxes/sb1/processes/p1/output" || r.Method != http.MethodGet {
			http.Error(w, "wrong path", 400)
			return
		}
		w.Header().Set("Content-Type", api.ContentTypeNDJSON)
		for {
			if _, err := io.WriteString(w, `{"type":"stdout","data":"eA=="}`+"\n"); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}))
	defer srv.Close()
	p := New(srv.URL, "").Sandbox("sb1").Process("p1")
	n := 0
	for ev, err := range p.Output(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if string(ev.Data) != "x" {
			t.Fatalf("data = %q", ev.Data)
		}
		if n++; n == 3 {
			break
		}
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("breaking out of Output did not end the request")
	}
}

func TestProcessRequests(t *testing.T) {
	rec := &recorder{status: http.StatusOK, body: `{"id":"p1","state":"exited","result":{"exit_code":0}}`}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	p := New(srv.URL, "").Sandbox("sb1").Process("p1")
	ctx := context.Background()
	proc, err := p.Wait(ctx, 2500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if proc.State != api.ProcessExited || p.State != api.ProcessExited || proc.Result == nil {
		t.Errorf("Wait = %+v", proc)
	}
	rec.set(http.StatusNoContent, "")
	if err := p.WriteStdin(ctx, []byte("input"), true); err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ method, path, query, body string }{
		{"POST", "/v1/sandboxes/sb1/processes/p1/wait", "timeout_seconds=2.5", ""},
		{"POST", "/v1/sandboxes/sb1/processes/p1/stdin", "eof=true", "input"},
		{"POST", "/v1/sandboxes/sb1/processes/p1/kill", "", `{"signal":"SIGKILL"}`},
	}
	for i, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			r := rec.reqs[i]
			if r.Method != tt.method || r.URL.Path != tt.path || r.URL.RawQuery != tt.query || rec.bodies[i] != tt.body {
				t.Errorf("got %s %s?%s %q", r.Method, r.URL.Path, r.URL.RawQuery, rec.bodies[i])
			}
		})
	}
}
