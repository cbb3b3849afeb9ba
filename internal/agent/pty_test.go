package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/agent"
)

// term is a test client of one terminal WebSocket.
type term struct {
	t   testing.TB
	c   *websocket.Conn
	out bytes.Buffer
	msg []api.PtyMessage
}

func (h *harness) openPTY(ctx context.Context, query string) (*term, error) {
	c, _, err := websocket.Dial(ctx, "ws://agent/pty?"+query, &websocket.DialOptions{HTTPClient: h.c})
	if err != nil {
		return nil, err
	}
	return &term{t: h.t, c: c}, nil
}

func (tm *term) send(ctx context.Context, s string) {
	tm.t.Helper()
	if err := tm.c.Write(ctx, websocket.MessageBinary, []byte(s)); err != nil {
		tm.t.Fatal(err)
	}
}

func (tm *term) resize(ctx context.Context, cols, rows int) {
	tm.t.Helper()
	b, _ := json.Marshal(api.PtyMessage{Type: api.PtyMsgResize, Cols: cols, Rows: rows})
	if err := tm.c.Write(ctx, websocket.MessageText, b); err != nil {
		tm.t.Fatal(err)
	}
}

// until reads until the output contains want (or the socket ends); it
// reports whether want was seen.
func (tm *term) until(ctx context.Context, want string) bool {
	for !strings.Contains(tm.out.String(), want) {
		typ, data, err := tm.c.Read(ctx)
		if err != nil {
			return false
		}
		if typ == websocket.MessageBinary {
			tm.out.Write(data)
			continue
		}
		var m api.PtyMessage
		if err := json.Unmarshal(data, &m); err != nil {
			tm.t.Fatalf("bad text message %q", data)
		}
		tm.msg = append(tm.msg, m)
	}
	return true
}

// started reads up to the started message.
func (tm *term) started(ctx context.Context) api.PtyMessage {
	tm.t.Helper()
	for len(tm.msg) == 0 {
		typ, data, err := tm.c.Read(ctx)
		if err != nil {
			tm.t.Fatalf("no started message: %v", err)
		}
		if typ == websocket.MessageText {
			var m api.PtyMessage
			_ = json.Unmarshal(data, &m)
			tm.msg = append(tm.msg, m)
		}
	}
	return tm.msg[0]
}

// exit reads to the end and returns the exit message.
func (tm *term) exit(ctx context.Context) api.PtyMessage {
	tm.t.Helper()
	tm.until(ctx, "\x00never")
	if len(tm.msg) == 0 || tm.msg[len(tm.msg)-1].Type != api.PtyMsgExit {
		tm.t.Fatalf("no exit message; messages %+v, output %q", tm.msg, tm.out.String())
	}
	return tm.msg[len(tm.msg)-1]
}

func TestPTYShell(t *testing.T) {
	h := newHarness(t, agent.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tm, err := h.openPTY(ctx, "argv=/bin/sh&cols=100&rows=30&env=PS1=ready%3E%20")
	if err != nil {
		t.Fatal(err)
	}
	tm.send(ctx, "tty; stty size\n")
	if !tm.until(ctx, "30 100") {
		t.Fatalf("no stty size 30 100 in %q", tm.out.String())
	}
	if len(tm.msg) == 0 || tm.msg[0].Type != api.PtyMsgStarted || tm.msg[0].PtyID == "" || tm.msg[0].PID <= 0 {
		t.Fatalf("first message %+v, want started", tm.msg)
	}
	if !strings.Contains(tm.out.String(), "/dev/pts/") {
		t.Errorf("tty output %q, want a /dev/pts path", tm.out.String())
	}
	tm.resize(ctx, 132, 40)
	tm.send(ctx, "stty size\n")
	if !tm.until(ctx, "40 132") {
		t.Fatalf("no 40 132 after resize in %q", tm.out.String())
	}
	var list api.ListPtysResponse
	if st, e := h.try(http.MethodGet, "/pty/list", nil, &list); st != http.StatusOK {
		t.Fatalf("list: %d %v", st, e)
	}
	if len(list.Ptys) != 1 || list.Ptys[0].Cols != 132 || list.Ptys[0].Rows != 40 {
		t.Fatalf("list %+v", list)
	}
	tm.send(ctx, "exit 7\n")
	m := tm.exit(ctx)
	if m.ExitCode == nil || *m.ExitCode != 7 {
		t.Fatalf("exit %+v, want code 7", m)
	}
}

func TestPTYKillAndClose(t *testing.T) {
	h := newHarness(t, agent.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tm, err := h.openPTY(ctx, "argv=sleep&argv=1000")
	if err != nil {
		t.Fatal(err)
	}
	tm.started(ctx)
	var list api.ListPtysResponse
	h.try(http.MethodGet, "/pty/list", nil, &list)
	if len(list.Ptys) != 1 {
		t.Fatalf("list %+v", list)
	}
	if st, e := h.try(http.MethodPost, "/pty/"+list.Ptys[0].ID+"/kill", nil, nil); st != http.StatusNoContent {
		t.Fatalf("kill: %d %v", st, e)
	}
	m := tm.exit(ctx)
	if m.Signal == nil || *m.Signal != "SIGKILL" {
		t.Fatalf("exit %+v, want SIGKILL", m)
	}
	if st, e := h.try(http.MethodPost, "/pty/t_999/kill", nil, nil); st != http.StatusNotFound {
		t.Fatalf("kill unknown: %d %v", st, e)
	}
}

func TestPTYLimits(t *testing.T) {
	h := newHarness(t, agent.Config{MaxPTYs: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 2; i++ {
		tm, err := h.openPTY(ctx, "argv=sleep&argv=1000")
		if err != nil {
			t.Fatal(err)
		}
		defer tm.c.CloseNow()
		tm.started(ctx)
	}
	cases := []struct {
		name, query string
		status      int
	}{
		{"third terminal", "argv=sleep&argv=1", http.StatusTooManyRequests},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, resp, err := websocket.Dial(ctx, "ws://agent/pty?"+tc.query, &websocket.DialOptions{HTTPClient: h.c})
			if err == nil || resp == nil || resp.StatusCode != tc.status {
				t.Fatalf("err %v resp %v, want status %d", err, resp, tc.status)
			}
		})
	}
}

func TestPTYBadRequests(t *testing.T) {
	h := newHarness(t, agent.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, q := range []string{"cwd=/nonexistent", "argv=no-such-program", "cols=0", "rows=5000", "env=NOEQUALS", "argv=sh&command=true"} {
		t.Run(q, func(t *testing.T) {
			_, resp, err := websocket.Dial(ctx, "ws://agent/pty?"+q, &websocket.DialOptions{HTTPClient: h.c})
			if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("err %v resp %v, want 400", err, resp)
			}
		})
	}
	tm, err := h.openPTY(ctx, "argv=/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	tm.started(ctx)
	tm.resize(ctx, 0, 5000) // out of range: the agent closes the socket
	var err2 error
	for err2 == nil {
		_, _, err2 = tm.c.Read(ctx)
	}
	if websocket.CloseStatus(err2) != websocket.StatusPolicyViolation {
		t.Fatalf("read after a bad resize: %v", err2)
	}
}
