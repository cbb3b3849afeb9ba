package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// execDeadline is how long the daemon waits for an exec of req: its
// timeout (the agent's default when unset or invalid, which the agent then
// refuses) plus Grace. Background processes have no timeout of their own.
func execDeadline(req *api.ExecRequest) time.Duration {
	t := req.TimeoutSeconds
	if t <= 0 || t > api.MaxExecTimeoutSeconds {
		t = api.DefaultExecTimeoutSeconds
	}
	return time.Duration(t*float64(time.Second)) + Grace
}

// outputLimit is the answer bound of an exec of req.
func outputLimit(req *api.ExecRequest) int64 {
	m := req.MaxOutputBytes
	if m <= 0 || m > api.MaxOutputBytes {
		m = api.DefaultMaxOutputBytes
	}
	return maxAnswer(m)
}

// Exec runs req to its end and returns its result. The agent validates
// req and applies its defaults (api.DefaultExecTimeoutSeconds, ...).
func (c *Client) Exec(ctx context.Context, id string, req *api.ExecRequest) (*api.ExecResult, error) {
	body, n, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	var res api.ExecResult
	err = c.jsonCall(ctx, id, call{method: http.MethodPost, path: "/exec", body: body, length: n, ctype: "application/json",
		accept: "application/json", timeout: execDeadline(req), ok: []int{http.StatusOK}}, outputLimit(req), &res)
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// ExecStream runs req and returns its events (start, output, then exit or
// error) as they happen. The caller must Close the stream; closing it
// early kills the command.
func (c *Client) ExecStream(ctx context.Context, id string, req *api.ExecRequest) (*Events, error) {
	body, n, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	a, err := c.do(ctx, id, call{method: http.MethodPost, path: "/exec", body: body, length: n, ctype: "application/json",
		accept: api.ContentTypeNDJSON, timeout: execDeadline(req), ok: []int{http.StatusOK}})
	if err != nil {
		return nil, err
	}
	return newEvents(a, outputLimit(req)), nil
}

// Events is a stream of exec or process events read from an agent.
type Events struct {
	a   *answer
	lr  *io.LimitedReader
	dec *json.Decoder
}

func newEvents(a *answer, limit int64) *Events {
	lr := &io.LimitedReader{R: a.Body, N: limit}
	return &Events{a: a, lr: lr, dec: json.NewDecoder(lr)}
}

// ErrStreamTooLarge ends a stream whose events passed their bound.
var ErrStreamTooLarge = fmt.Errorf("%w: agent stream larger than its bound", sandbox.ErrUnavailable)

// decodeEvent reads one event of a bounded agent stream into v: io.EOF at
// its end, ErrStreamTooLarge past its bound, else unavailable naming what.
func decodeEvent(dec *json.Decoder, lr *io.LimitedReader, what string, v any) error {
	err := dec.Decode(v)
	switch {
	case err == nil:
		return nil
	case lr.N <= 0:
		return ErrStreamTooLarge
	case errors.Is(err, io.EOF):
		return io.EOF
	}
	return fmt.Errorf("%w: %s: %v", sandbox.ErrUnavailable, what, err)
}

// Next returns the next event, io.EOF at the end of the stream.
func (e *Events) Next() (api.Event, error) {
	var ev api.Event
	if err := decodeEvent(e.dec, e.lr, "agent stream", &ev); err != nil {
		return ev, err
	}
	switch ev.Type {
	case api.EventStart, api.EventStdout, api.EventStderr, api.EventExit, api.EventError:
		return ev, nil
	}
	return ev, fmt.Errorf("%w: agent sent an event of type %q", sandbox.ErrUnavailable, ev.Type)
}

// Close ends the stream.
func (e *Events) Close() error { return e.a.Close() }

// StartProcess starts req in the background and describes the process.
func (c *Client) StartProcess(ctx context.Context, id string, req *api.ExecRequest) (*api.Process, error) {
	body, n, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	var p api.Process
	err = c.jsonCall(ctx, id, call{method: http.MethodPost, path: "/processes", body: body, length: n, ctype: "application/json",
		timeout: Grace, ok: []int{http.StatusCreated, http.StatusOK}}, maxSmallAnswer, &p)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// ListProcesses lists the agent's processes.
func (c *Client) ListProcesses(ctx context.Context, id string) (*api.ListProcessesResponse, error) {
	var out api.ListProcessesResponse
	err := c.jsonCall(ctx, id, call{method: http.MethodGet, path: "/processes", timeout: Grace, ok: []int{http.StatusOK}},
		maxAnswer(api.MaxOutputBytes), &out)
	if err != nil {
		return nil, err
	}
	if out.Processes == nil {
		out.Processes = []api.Process{}
	}
	return &out, nil
}

func processPath(process, suffix string) string {
	return "/processes/" + url.PathEscape(process) + suffix
}

// GetProcess describes one process, with its output so far.
func (c *Client) GetProcess(ctx context.Context, id, process string) (*api.Process, error) {
	var p api.Process
	err := c.jsonCall(ctx, id, call{method: http.MethodGet, path: processPath(process, ""), timeout: Grace,
		ok: []int{http.StatusOK}}, maxAnswer(api.MaxOutputBytes), &p)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// WaitProcess waits for a process to end, at most timeoutSeconds (nil:
// the agent's default, api.DefaultWaitTimeoutSeconds), and describes it.
func (c *Client) WaitProcess(ctx context.Context, id, process string, timeoutSeconds *float64) (*api.Process, error) {
	q := url.Values{}
	wait := float64(api.DefaultWaitTimeoutSeconds)
	if timeoutSeconds != nil {
		q.Set("timeout_seconds", strconv.FormatFloat(*timeoutSeconds, 'f', -1, 64))
		if t := *timeoutSeconds; t > 0 && t <= api.MaxWaitTimeoutSeconds {
			wait = max(t, wait)
		}
	}
	var p api.Process
	err := c.jsonCall(ctx, id, call{method: http.MethodPost, path: processPath(process, "/wait"), query: q,
		timeout: Grace + time.Duration(wait*float64(time.Second)), ok: []int{http.StatusOK}}, maxAnswer(api.MaxOutputBytes), &p)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// ProcessOutput streams a process's output from its start, to its end.
// The caller must Close the stream.
func (c *Client) ProcessOutput(ctx context.Context, id, process string) (*Events, error) {
	a, err := c.do(ctx, id, call{method: http.MethodGet, path: processPath(process, "/output"),
		accept: api.ContentTypeNDJSON, ok: []int{http.StatusOK}})
	if err != nil {
		return nil, err
	}
	return newEvents(a, maxAnswer(api.MaxOutputBytes)), nil
}

// WriteStdin writes size bytes of r (size -1: unknown) to a process's
// stdin, then closes the stdin if eof.
func (c *Client) WriteStdin(ctx context.Context, id, process string, r io.Reader, size int64, eof bool) error {
	q := url.Values{}
	if eof {
		q.Set("eof", "true")
	}
	return c.jsonCall(ctx, id, call{method: http.MethodPost, path: processPath(process, "/stdin"), query: q,
		body: r, length: size, timeout: stdinTimeout, ok: []int{http.StatusNoContent, http.StatusOK}}, 0, nil)
}

// KillProcess sends signal (a name such as "SIGTERM" or a number; empty:
// SIGKILL) to a process's whole tree.
func (c *Client) KillProcess(ctx context.Context, id, process, signal string) error {
	body, n, err := jsonBody(api.SignalRequest{Signal: signal})
	if err != nil {
		return err
	}
	return c.jsonCall(ctx, id, call{method: http.MethodPost, path: processPath(process, "/kill"), body: body, length: n,
		ctype: "application/json", timeout: Grace, ok: []int{http.StatusNoContent, http.StatusOK}}, 0, nil)
}

// ForgetProcess drops the record of a process that ended (its output
// included); a running process is sandbox.ErrConflict.
func (c *Client) ForgetProcess(ctx context.Context, id, process string) error {
	return c.jsonCall(ctx, id, call{method: http.MethodDelete, path: processPath(process, ""), timeout: Grace,
		ok: []int{http.StatusNoContent}}, 0, nil)
}

// ExecStdin is Exec with the command's stdin read from stdin as the
// command runs, through the agent's streaming route (ExecStdinPath);
// req's own stdin fields must be empty. size is stdin's length, -1 if
// unknown. An error reading stdin aborts the request, which kills the
// command. An agent without the route gets the stdin read whole, through
// Exec.
func (c *Client) ExecStdin(ctx context.Context, id string, req *api.ExecRequest, stdin io.Reader, size int64) (*api.ExecResult, error) {
	body, err := newStdinBody(req, stdin, size)
	if err != nil {
		return nil, err
	}
	var res api.ExecResult
	cl := body.call("application/json", execDeadline(req))
	err = c.jsonCall(ctx, id, cl, outputLimit(req), &res)
	if body.old(err) {
		if req, err = body.whole(); err != nil {
			return nil, err
		}
		return c.Exec(ctx, id, req)
	}
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// ExecStreamStdin is ExecStream with the stdin of ExecStdin.
func (c *Client) ExecStreamStdin(ctx context.Context, id string, req *api.ExecRequest, stdin io.Reader, size int64) (*Events, error) {
	body, err := newStdinBody(req, stdin, size)
	if err != nil {
		return nil, err
	}
	a, err := c.do(ctx, id, body.call(api.ContentTypeNDJSON, execDeadline(req)))
	if body.old(err) {
		if req, err = body.whole(); err != nil {
			return nil, err
		}
		return c.ExecStream(ctx, id, req)
	}
	if err != nil {
		return nil, err
	}
	return newEvents(a, outputLimit(req)), nil
}

// stdinBody is the body of a streaming-stdin exec: the request line, then
// the stdin. It is sent after the agent's 100 Continue, so that an agent
// without the route answers before any of it is read.
type stdinBody struct {
	req     *api.ExecRequest
	head    []byte
	stdin   io.Reader
	size    int64
	started atomic.Bool // the transport has read from it (it may read on after the answer)
	status  int         // of the agent's answer
}

func newStdinBody(req *api.ExecRequest, stdin io.Reader, size int64) (*stdinBody, error) {
	if req.Stdin != "" || req.StdinBase64 != "" {
		return nil, fmt.Errorf("%w: stdin given twice", sandbox.ErrInvalid)
	}
	head, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", sandbox.ErrInvalid, err)
	}
	return &stdinBody{req: req, head: append(head, '\n'), stdin: stdin, size: size}, nil
}

// Read serves the request line, then the stdin. Not a Closer: the stdin
// is the caller's, and stays whole for the fallback until read.
func (b *stdinBody) Read(p []byte) (int, error) {
	b.started.Store(true)
	if len(b.head) > 0 {
		n := copy(p, b.head)
		b.head = b.head[n:]
		return n, nil
	}
	return b.stdin.Read(p)
}

func (b *stdinBody) call(accept string, timeout time.Duration) call {
	n := int64(-1)
	if b.size >= 0 {
		n = int64(len(b.head)) + b.size
	}
	return call{method: http.MethodPost, path: ExecStdinPath, body: b, length: n, ctype: contentTypeExecStdin,
		accept: accept, timeout: timeout, expect: true, status: &b.status, ok: []int{http.StatusOK}}
}

// old reports whether err is the answer of an agent without the route.
func (b *stdinBody) old(err error) bool {
	return err != nil && !b.started.Load() && (b.status == http.StatusNotFound || b.status == http.StatusMethodNotAllowed)
}

// whole is the request with the stdin read whole into it.
func (b *stdinBody) whole() (*api.ExecRequest, error) {
	data, err := io.ReadAll(io.LimitReader(b.stdin, api.MaxStdinBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > api.MaxStdinBytes {
		return nil, fmt.Errorf("%w: stdin larger than %d bytes", sandbox.ErrTooLarge, api.MaxStdinBytes)
	}
	req := *b.req
	req.StdinBase64 = base64.StdEncoding.EncodeToString(data)
	return &req, nil
}
