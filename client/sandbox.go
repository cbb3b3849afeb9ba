package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// closeTimeout bounds the DELETE sent by Sandbox.Close.
const closeTimeout = 30 * time.Second

// Sandbox is a handle on one sandbox. The embedded api.Sandbox is the last
// state the daemon reported; Refresh and SetTimeout update it and must not
// run concurrently with each other or with reads of those fields. Every
// other method is safe for concurrent use.
type Sandbox struct {
	api.Sandbox

	c      *Client
	mu     sync.Mutex
	closed bool
}

// Client returns the client the sandbox was obtained from.
func (s *Sandbox) Client() *Client { return s.c }

// Exec runs a command to completion and returns its result. A non-zero
// exit status and a timeout are results, not errors.
func (s *Sandbox) Exec(ctx context.Context, req api.ExecRequest) (*api.ExecResult, error) {
	body, err := execBody(req)
	if err != nil {
		return nil, err
	}
	var res api.ExecResult
	if err := s.c.callBody(ctx, request{method: http.MethodPost, path: sandboxPath(s.ID, "exec"), body: body,
		contentType: "application/json", header: stdinLast}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Run runs command through the sandbox's shell (bash -lc, or sh -c) with the
// daemon's default timeout and output cap.
func (s *Sandbox) Run(ctx context.Context, command string) (*api.ExecResult, error) {
	return s.Exec(ctx, api.ExecRequest{Command: command})
}

// ExecStream runs a command and yields its events as they happen: start,
// stdout and stderr chunks (raw bytes in Event.Data), then exit, whose
// embedded ExecResult has the exit status. An error event, a transport
// failure or a stream that ends without an exit event is yielded as an
// error and ends the iteration. Breaking out of the loop cancels the
// request.
func (s *Sandbox) ExecStream(ctx context.Context, req api.ExecRequest) iter.Seq2[api.Event, error] {
	return func(yield func(api.Event, error) bool) {
		body, err := execBody(req)
		if err != nil {
			yield(api.Event{}, err)
			return
		}
		s.c.stream(ctx, request{method: http.MethodPost, path: sandboxPath(s.ID, "exec"), body: body,
			contentType: "application/json", header: stdinLast}, yield)
	}
}

// Refresh fetches the sandbox's current state into s.Sandbox.
func (s *Sandbox) Refresh(ctx context.Context) error {
	var sb api.Sandbox
	if err := s.c.call(ctx, http.MethodGet, sandboxPath(s.ID), nil, nil, &sb); err != nil {
		return err
	}
	s.Sandbox = sb
	return nil
}

// SetTimeout moves the sandbox's expiry to now + d (rounded up to whole
// seconds) and updates s.Sandbox, ExpiresAt included.
func (s *Sandbox) SetTimeout(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("set timeout: duration %v is not positive", d)
	}
	req := api.SetTimeoutRequest{TimeoutSeconds: int64(math.Ceil(d.Seconds()))}
	var sb api.Sandbox
	if err := s.c.call(ctx, http.MethodPost, sandboxPath(s.ID, "timeout"), nil, req, &sb); err != nil {
		return err
	}
	s.Sandbox = sb
	return nil
}

// Kill deletes the sandbox and everything running in it. Unlike Close it
// reports every error, ErrNotFound included.
func (s *Sandbox) Kill(ctx context.Context) error {
	if err := s.c.call(ctx, http.MethodDelete, sandboxPath(s.ID), nil, nil, nil); err != nil {
		return err
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

// Close deletes the sandbox, using its own 30-second context so that it
// works in a defer after the caller's context is done. It is idempotent: a
// sandbox already closed or killed through s, or already gone on the
// daemon (404), is not an error.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	err := s.c.call(ctx, http.MethodDelete, sandboxPath(s.ID), nil, nil, nil)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("close sandbox %s: %w", s.ID, err)
	}
	s.closed = true
	return nil
}

// Files returns the file operations of the sandbox.
func (s *Sandbox) Files() *Files { return &Files{sb: s} }

// Start starts a command in the background and returns at once. Use
// req.KeepStdinOpen to feed it later with Process.WriteStdin.
func (s *Sandbox) Start(ctx context.Context, req api.ExecRequest) (*Process, error) {
	p := &Process{sb: s}
	if err := s.c.call(ctx, http.MethodPost, sandboxPath(s.ID, "processes"), nil, req, &p.Process); err != nil {
		return nil, err
	}
	return p, nil
}

// Processes lists the background processes of the sandbox, running and
// exited.
func (s *Sandbox) Processes(ctx context.Context) ([]api.Process, error) {
	var resp api.ListProcessesResponse
	if err := s.c.call(ctx, http.MethodGet, sandboxPath(s.ID, "processes"), nil, nil, &resp); err != nil {
		return nil, err
	}
	return resp.Processes, nil
}

// Process returns a handle on the background process id without a request.
func (s *Sandbox) Process(id string) *Process {
	return &Process{Process: api.Process{ID: id}, sb: s}
}
