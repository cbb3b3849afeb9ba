package client

import (
	"bytes"
	"context"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// Process is a handle on a background process of a sandbox, obtained from
// Sandbox.Start or Sandbox.Process. The embedded api.Process is the last
// state the daemon reported; Refresh and Wait update it and must not run
// concurrently with each other or with reads of those fields.
type Process struct {
	api.Process

	sb *Sandbox
}

// Sandbox returns the sandbox the process runs in.
func (p *Process) Sandbox() *Sandbox { return p.sb }

func (p *Process) path(segments ...string) string {
	return sandboxPath(p.sb.ID, append([]string{"processes", p.ID}, segments...)...)
}

// Refresh fetches the process's current state into p.Process.
func (p *Process) Refresh(ctx context.Context) error {
	var proc api.Process
	if err := p.sb.c.call(ctx, http.MethodGet, p.path(), nil, nil, &proc); err != nil {
		return err
	}
	p.Process = proc
	return nil
}

// Wait waits up to timeout for the process to exit and returns its state,
// also stored in p.Process. State is still api.ProcessRunning when it did
// not exit in time; otherwise Result holds the exit status. A zero timeout
// lets the daemon pick its default.
func (p *Process) Wait(ctx context.Context, timeout time.Duration) (*api.Process, error) {
	q := url.Values{}
	if timeout > 0 {
		q.Set("timeout_seconds", strconv.FormatFloat(timeout.Seconds(), 'f', -1, 64))
	}
	var proc api.Process
	if err := p.sb.c.call(ctx, http.MethodPost, p.path("wait"), q, nil, &proc); err != nil {
		return nil, err
	}
	p.Process = proc
	return &proc, nil
}

// Output yields the process's output events: what was buffered so far is
// replayed first, then live output, then the exit event. Errors are
// handled as for Sandbox.ExecStream.
func (p *Process) Output(ctx context.Context) iter.Seq2[api.Event, error] {
	return func(yield func(api.Event, error) bool) {
		p.sb.c.stream(ctx, request{method: http.MethodGet, path: p.path("output")}, yield)
	}
}

// WriteStdin writes data to the process's standard input, which must have
// been kept open (api.ExecRequest.KeepStdinOpen); eof closes it afterwards.
func (p *Process) WriteStdin(ctx context.Context, data []byte, eof bool) error {
	var q url.Values
	if eof {
		q = url.Values{"eof": {"true"}}
	}
	resp, err := p.sb.c.send(ctx, request{
		method:      http.MethodPost,
		path:        p.path("stdin"),
		query:       q,
		body:        bytes.NewReader(data),
		contentType: "application/octet-stream",
	})
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// Signal sends a signal such as "SIGTERM" or "SIGINT" to the process. An
// empty name means SIGKILL, which kills the whole process tree.
func (p *Process) Signal(ctx context.Context, sig string) error {
	return p.sb.c.call(ctx, http.MethodPost, p.path("kill"), nil, api.SignalRequest{Signal: sig}, nil)
}

// Kill kills the process and every process it started.
func (p *Process) Kill(ctx context.Context) error {
	return p.Signal(ctx, "SIGKILL")
}
