package kernel

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

const (
	// markerWait is how long the output markers may trail "done" (a cell
	// that closed its stdout never writes one).
	markerWait = time.Second
	// exitWait is how long the pipes may stay open after the interpreter
	// exited (a child it left behind may hold them).
	exitWait = 200 * time.Millisecond
	// maxErrorText bounds each field of a cell's error.
	maxErrorText = 64 << 10
)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Emit receives the events of a running cell as they happen; nil for
// none. It must not keep ev past its return.
type Emit func(ev api.CodeEvent)

// Run runs one cell in its context (the language's default context when
// req.ContextID is empty) and returns its execution. Exceptions, timeouts
// and interrupts are results; errors are for invalid requests, a busy or
// missing context and interpreters that cannot start.
func (m *Manager) Run(ctx context.Context, req api.CodeRequest, emit Emit) (*api.CodeExecution, error) {
	timeout, err := m.validate(&req)
	if err != nil {
		return nil, err
	}
	var c *Context
	if req.ContextID != "" {
		if c, err = m.get(req.ContextID); err != nil {
			return nil, err
		}
		if req.Language != "" {
			lang, err := lookupLanguage(req.Language)
			if err != nil {
				return nil, err
			}
			if lang != c.lang {
				return nil, badRequest("context %s runs %s, not %s", c.id, c.lang.name, lang.name)
			}
		}
	} else if c, err = m.defaultContext(req.Language); err != nil {
		return nil, err
	}
	return c.execute(ctx, req, timeout, emit)
}

// validate checks req and returns its timeout.
func (m *Manager) validate(req *api.CodeRequest) (time.Duration, error) {
	switch {
	case len(req.Code) > api.MaxCodeBytes:
		return 0, errorf(api.CodeTooLarge, "code larger than %d bytes", api.MaxCodeBytes)
	case hasNUL(req.Code):
		return 0, badRequest("code must not contain NUL bytes")
	case len(req.Env) > api.MaxExecEnv:
		return 0, badRequest("at most %d env vars", api.MaxExecEnv)
	}
	for k, v := range req.Env {
		if !envName.MatchString(k) || hasNUL(v) {
			return 0, badRequest("invalid environment variable %q", k)
		}
	}
	switch t := req.TimeoutSeconds; {
	case math.IsNaN(t) || t < 0 || t > api.MaxExecTimeoutSeconds:
		return 0, badRequest("timeout_seconds must be between 0 and %d", api.MaxExecTimeoutSeconds)
	case t == 0:
		return api.DefaultCodeTimeoutSeconds * time.Second, nil
	default:
		return max(time.Duration(t*float64(time.Second)), time.Millisecond), nil
	}
}

// execute runs one cell in c.
func (c *Context) execute(ctx context.Context, req api.CodeRequest, timeout time.Duration, emit Emit) (*api.CodeExecution, error) {
	r, p, err := c.begin()
	if err != nil {
		return nil, err
	}
	defer c.end(r)
	c.mu.Lock()
	c.count++
	res := &api.CodeExecution{ContextID: c.id, Language: c.lang.name, ExecutionCount: c.count, Results: []api.CodeResult{}}
	c.mu.Unlock()
	if emit == nil {
		emit = func(api.CodeEvent) {}
	}
	acc := &collector{res: res, emit: emit, maxOut: c.m.cfg.MaxOutputBytes, maxItem: c.m.cfg.MaxItemBytes, budget: c.m.cfg.MaxResultsBytes}
	start := time.Now()

	died := p.send(c.lang.encode(wireReq{Code: req.Code, Env: req.Env})) != nil
	restart := false
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var grace, doneWait, exitDeadline <-chan time.Time
	exited, ctxDone := p.exited, ctx.Done()
	// SIGINT waits for the driver to start the cell: earlier, it would
	// hit the driver's own loop and the cell would run on.
	started, pendingInt := false, false
	startGrace := func() {
		if !started {
			pendingInt = true
		} else {
			p.interrupt()
		}
		if grace == nil {
			grace = time.After(c.m.cfg.Grace)
		}
	}
	done, markOut, markErr := false, false, false
loop:
	for !died && !(done && markOut && markErr) && p.eofs < 3 {
		select {
		case mg := <-p.msgs:
			switch mg.kind {
			case msgMarkOut:
				markOut = true
			case msgMarkErr:
				markErr = true
			case msgEOF:
				p.eofs++
			case msgEvent:
				switch mg.ev.Type {
				case "started":
					started = true
					if pendingInt {
						p.interrupt()
					}
				case "done":
					done = true
					doneWait = time.After(markerWait)
				default:
					acc.event(mg.ev)
				}
			default:
				acc.message(mg)
			}
		case <-exited:
			exited, exitDeadline = nil, time.After(exitWait)
		case <-exitDeadline:
			died = true
		case <-doneWait:
			break loop
		case <-timer.C:
			res.TimedOut, res.Interrupted = true, true
			startGrace()
		case <-r.interrupt:
			res.Interrupted = true
			startGrace()
		case <-ctxDone: // the client went away: stop the cell, keep the context
			ctxDone = nil
			startGrace()
		case <-grace:
			restart = true
			break loop
		case <-r.restart:
			restart = true
			res.Error = &api.CodeError{Name: "Restarted", Value: "the context was restarted while the cell ran"}
			break loop
		}
	}
	if p.eofs >= 3 && !done {
		died = true
	}
	if died || restart {
		res.Restarted = true
		if died && res.Error == nil {
			res.Error = &api.CodeError{Name: "KernelDied", Value: "the " + c.lang.name + " interpreter exited; the context was restarted and lost its state"}
		}
		if err := c.replace(p); err != nil {
			acc.note(fmt.Sprintf("[paddock: the context could not be restarted: %v]\n", err))
		}
	}
	switch {
	case res.TimedOut:
		state := "the context was interrupted and keeps its state"
		if res.Restarted {
			state = "the context did not stop on SIGINT and was restarted: it lost its state"
		}
		res.Error = &api.CodeError{Name: "TimeoutError", Value: fmt.Sprintf("the cell exceeded its timeout of %ss; %s", strconv.FormatFloat(timeout.Seconds(), 'f', -1, 64), state)}
	case res.Interrupted && res.Restarted:
		res.Error = &api.CodeError{Name: "KeyboardInterrupt", Value: "the cell did not stop on SIGINT; the context was restarted and lost its state"}
	case res.Interrupted && res.Error == nil:
		res.Error = &api.CodeError{Name: "KeyboardInterrupt", Value: "interrupted"}
	}
	if res.Error != nil && (res.TimedOut || res.Restarted) {
		emit(api.CodeEvent{Type: api.CodeEventError, Error: res.Error})
	}
	res.DurationMS = time.Since(start).Milliseconds()
	return res, nil
}
