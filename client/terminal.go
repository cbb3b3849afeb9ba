package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/coder/websocket"
	"github.com/paddock-sandbox/paddock/api"
)

// maxTerminalMessage bounds one message read from a terminal WebSocket
// (the daemon sends at most 32 KiB of output per message).
const maxTerminalMessage = 1 << 20

// PTYOptions configures Sandbox.OpenPTY. Zero values take the daemon's
// defaults: a login shell, /workspace, 80×24.
type PTYOptions struct {
	// Argv or Command is the program; neither means a login shell.
	Argv    []string
	Command string
	Cwd     string
	// Env adds environment variables; TERM defaults to xterm-256color.
	Env        map[string]string
	Cols, Rows int
}

func (o PTYOptions) query() url.Values {
	q := url.Values{}
	if len(o.Argv) > 0 {
		q["argv"] = o.Argv
	}
	if o.Command != "" {
		q.Set("command", o.Command)
	}
	if o.Cwd != "" {
		q.Set("cwd", o.Cwd)
	}
	for k, v := range o.Env {
		q.Add("env", k+"="+v)
	}
	if o.Cols > 0 {
		q.Set("cols", strconv.Itoa(o.Cols))
	}
	if o.Rows > 0 {
		q.Set("rows", strconv.Itoa(o.Rows))
	}
	return q
}

// Terminal is a command running on a pseudo-terminal in a sandbox, reached
// over a WebSocket (GET /v1/sandboxes/{id}/pty). Read returns its output
// and io.EOF once the command exited (then Exit tells how); Write sends
// keyboard input. Read and Write may be used from different goroutines;
// Close kills the command.
type Terminal struct {
	// ID is the terminal id (for Sandbox.KillPTY); PID the command's pid.
	ID  string
	PID int

	conn *websocket.Conn
	ctx  context.Context
	stop context.CancelFunc
	rest []byte

	mu   sync.Mutex
	exit *api.PtyMessage
}

// OpenPTY starts a command on a new terminal. It returns once the command
// runs; errors found before (a bad cwd, too many terminals) are *APIError.
func (s *Sandbox) OpenPTY(ctx context.Context, opts PTYOptions) (*Terminal, error) {
	c := s.c
	u := c.endpoint(sandboxPath(s.ID, "pty"), opts.query())
	h := http.Header{}
	if key := c.apiKey(); key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	ua := c.UserAgent
	if ua == "" {
		ua = "paddock-go/" + Version
	}
	h.Set("User-Agent", ua)
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c.httpClient(), HTTPHeader: h})
	if err != nil {
		if resp != nil && resp.StatusCode >= 300 {
			return nil, parseError(resp)
		}
		return nil, fmt.Errorf("open terminal: %w", err)
	}
	conn.SetReadLimit(maxTerminalMessage)
	tctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	t := &Terminal{conn: conn, ctx: tctx, stop: stop}
	for t.ID == "" { // the first text message says which terminal this is
		typ, data, err := conn.Read(ctx)
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("open terminal: %w", err)
		}
		if typ == websocket.MessageBinary {
			t.rest = append(t.rest, data...)
			continue
		}
		var m api.PtyMessage
		if err := json.Unmarshal(data, &m); err != nil || m.Type != api.PtyMsgStarted {
			t.Close()
			if m.Type == api.PtyMsgError {
				return nil, eventError(m.Error)
			}
			return nil, fmt.Errorf("open terminal: unexpected message %q", data)
		}
		t.ID, t.PID = m.PtyID, m.PID
	}
	return t, nil
}

// Read reads the terminal's output; io.EOF once the command exited.
func (t *Terminal) Read(p []byte) (int, error) {
	for len(t.rest) == 0 {
		if t.Exit() != nil {
			return 0, io.EOF
		}
		typ, data, err := t.conn.Read(t.ctx)
		if err != nil {
			if websocket.CloseStatus(err) == websocket.StatusNormalClosure && t.Exit() != nil {
				return 0, io.EOF
			}
			return 0, fmt.Errorf("terminal: %w", err)
		}
		if typ == websocket.MessageBinary {
			t.rest = data
			continue
		}
		var m api.PtyMessage
		if err := json.Unmarshal(data, &m); err != nil {
			return 0, fmt.Errorf("terminal: bad message %q", data)
		}
		switch m.Type {
		case api.PtyMsgExit:
			t.mu.Lock()
			t.exit = &m
			t.mu.Unlock()
		case api.PtyMsgError:
			return 0, eventError(m.Error)
		}
	}
	n := copy(p, t.rest)
	t.rest = t.rest[n:]
	return n, nil
}

// Write sends keyboard input.
func (t *Terminal) Write(p []byte) (int, error) {
	for off := 0; off < len(p); {
		n := min(len(p)-off, 32<<10)
		if err := t.conn.Write(t.ctx, websocket.MessageBinary, p[off:off+n]); err != nil {
			return off, fmt.Errorf("terminal: %w", err)
		}
		off += n
	}
	return len(p), nil
}

// Resize sets the terminal's size; the command gets SIGWINCH.
func (t *Terminal) Resize(ctx context.Context, cols, rows int) error {
	b, _ := json.Marshal(api.PtyMessage{Type: api.PtyMsgResize, Cols: cols, Rows: rows})
	if err := t.conn.Write(ctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("terminal resize: %w", err)
	}
	return nil
}

// Exit is the command's exit message (ExitCode, or Signal) once Read
// returned io.EOF; nil before.
func (t *Terminal) Exit() *api.PtyMessage {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.exit
}

// Wait reads and discards output until the command exits.
func (t *Terminal) Wait() (*api.PtyMessage, error) {
	if _, err := io.Copy(io.Discard, t); err != nil {
		return nil, err
	}
	return t.Exit(), nil
}

// Close closes the WebSocket, which kills the command if it still runs.
func (t *Terminal) Close() error {
	defer t.stop()
	if t.Exit() != nil {
		return t.conn.Close(websocket.StatusNormalClosure, "")
	}
	return t.conn.CloseNow()
}

// PTYs lists the terminals open in the sandbox.
func (s *Sandbox) PTYs(ctx context.Context) ([]api.PtyInfo, error) {
	var out api.ListPtysResponse
	if err := s.c.call(ctx, http.MethodGet, sandboxPath(s.ID, "pty", "list"), nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Ptys, nil
}

// KillPTY kills the command of terminal id (Terminal.ID).
func (s *Sandbox) KillPTY(ctx context.Context, id string) error {
	return s.c.call(ctx, http.MethodPost, sandboxPath(s.ID, "pty", id, "kill"), nil, nil, nil)
}

// Watch is an open file watch; Next returns its events. Close ends it.
type Watch struct {
	body io.ReadCloser
	dec  *json.Decoder
}

// Watch watches directory path (and with recursive, its subdirectories)
// for changes. It returns once the watch is in place: a change made after
// it returned is reported.
func (s *Sandbox) Watch(ctx context.Context, path string, recursive bool) (*Watch, error) {
	q := url.Values{"path": {path}}
	if recursive {
		q.Set("recursive", "true")
	}
	resp, err := s.c.send(ctx, request{method: http.MethodGet, path: sandboxPath(s.ID, "files", "watch"), query: q,
		accept: api.ContentTypeNDJSON})
	if err != nil {
		return nil, err
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, api.ContentTypeNDJSON) {
		resp.Body.Close()
		return nil, fmt.Errorf("watch: unexpected content type %q", ct)
	}
	return &Watch{body: resp.Body, dec: json.NewDecoder(resp.Body)}, nil
}

// Next returns the next event. It blocks until one comes, the watch's
// context ends or Close is called.
func (w *Watch) Next() (api.WatchEvent, error) {
	var ev api.WatchEvent
	if err := w.dec.Decode(&ev); err != nil {
		return ev, fmt.Errorf("watch: %w", err)
	}
	return ev, nil
}

// Close ends the watch.
func (w *Watch) Close() error { return w.body.Close() }
