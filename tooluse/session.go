package tooluse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// Result is what a tool call returns to the model. Text is the content of
// the tool result (JSON for run_* tools); IsError marks a failed call
// (non-zero exit, timeout, or a bad request) so adapters can flag it.
type Result struct {
	Text    string
	IsError bool
	// Images are the images the call produced (run_code figures), within
	// Options.ImageBudget.
	Images []Image
}

// ExecOutput is the JSON the run_* tools return to the model.
type ExecOutput struct {
	ExitCode        *int   `json:"exit_code"`
	TimedOut        bool   `json:"timed_out"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
}

// Executor executes tool calls. *Session implements it; any other
// implementation (a wrapper adding tools, a test double) works with the
// model-API adapters too.
type Executor interface {
	// Tools returns the definitions offered to the model.
	Tools() []Tool
	// Call executes one tool call; failures are results with IsError set.
	Call(ctx context.Context, name string, input json.RawMessage) Result
	// Close releases the executor's sandbox.
	Close() error
}

var _ Executor = (*Session)(nil)

// Session executes tool calls against sandboxes of one conversation. It is
// safe for concurrent use; Close deletes the sandbox.
type Session struct {
	client  *client.Client
	create  *api.CreateSandboxRequest
	perCall bool
	opts    Options

	mu       sync.Mutex
	sb       *client.Sandbox
	borrowed bool // sb came from WithSandbox: Close leaves it running
	closed   bool
	n        int
}

// SessionOption configures a Session.
type SessionOption func(*Session)

// WithCreateRequest sets the request used to create sandboxes.
func WithCreateRequest(req *api.CreateSandboxRequest) SessionOption {
	return func(s *Session) { s.create = req }
}

// WithSandbox makes the session run every call in sb, an existing
// sandbox, instead of creating one. Close does not delete it.
func WithSandbox(sb *client.Sandbox) SessionOption {
	return func(s *Session) { s.sb, s.borrowed = sb, true }
}

// PerCall makes every tool call use a fresh sandbox, deleted afterwards.
func PerCall() SessionOption { return func(s *Session) { s.perCall = true } }

// NewSession returns a session; no sandbox exists until the first call.
func NewSession(c *client.Client, opts Options, sopts ...SessionOption) *Session {
	s := &Session{client: c, opts: opts.withDefaults()}
	for _, o := range sopts {
		o(s)
	}
	return s
}

// Tools returns the session's tool definitions.
func (s *Session) Tools() []Tool { return Tools(s.opts) }

// Sandbox returns the conversation's sandbox, creating it on first use.
func (s *Session) Sandbox(ctx context.Context) (*client.Sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("tool session is closed")
	}
	if s.sb == nil {
		sb, err := s.client.Create(ctx, s.create)
		if err != nil {
			return nil, err
		}
		s.sb = sb
	}
	return s.sb, nil
}

// Close deletes the session's sandbox, unless it came from WithSandbox.
// It is idempotent.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.sb == nil || s.borrowed {
		s.sb = nil
		return nil
	}
	err := s.sb.Close()
	s.sb = nil
	return err
}

// Call executes the tool name with the JSON input. Every failure is
// returned as a Result with IsError set, so the model can react to it.
func (s *Session) Call(ctx context.Context, name string, input json.RawMessage) Result {
	var args struct {
		Code    *string `json:"code"`
		Command *string `json:"command"`
		Path    *string `json:"path"`
		Content *string `json:"content"`
	}
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	if err := json.Unmarshal(input, &args); err != nil {
		return errResult("invalid tool input: %v", err)
	}
	known := false
	for _, t := range s.opts.Tools {
		known = known || t == name
	}
	if !known {
		return errResult("unknown tool %q", name)
	}
	need := func(p *string, field string) (string, error) {
		if p == nil {
			return "", fmt.Errorf("%s: missing required field %q", name, field)
		}
		return *p, nil
	}
	sb, release, err := s.sandboxForCall(ctx)
	if err != nil {
		return errResult("sandbox unavailable: %v", err)
	}
	defer release()
	if name == RunCode {
		return s.runCode(ctx, sb, input)
	}
	switch name {
	case RunPython:
		code, err := need(args.Code, "code")
		if err != nil {
			return errResult("%v", err)
		}
		s.mu.Lock()
		s.n++
		path := fmt.Sprintf("/tmp/run_python_%d.py", s.n)
		s.mu.Unlock()
		if _, err := sb.Files().Write(ctx, path, []byte(code), 0o644); err != nil {
			return errResult("writing the code failed: %v", err)
		}
		return s.exec(ctx, sb, api.ExecRequest{Argv: []string{"python3", path}})
	case RunCommand:
		cmd, err := need(args.Command, "command")
		if err != nil {
			return errResult("%v", err)
		}
		return s.exec(ctx, sb, api.ExecRequest{Command: cmd})
	case WriteFile:
		p, err := need(args.Path, "path")
		if err != nil {
			return errResult("%v", err)
		}
		content, err := need(args.Content, "content")
		if err != nil {
			return errResult("%v", err)
		}
		e, err := sb.Files().Write(ctx, p, []byte(content), 0)
		if err != nil {
			return errResult("write_file failed: %v", err)
		}
		return Result{Text: fmt.Sprintf("wrote %d bytes to %s", len(content), e.Path)}
	case ReadFile:
		p, err := need(args.Path, "path")
		if err != nil {
			return errResult("%v", err)
		}
		st, err := sb.Files().Stat(ctx, p)
		if err != nil {
			return errResult("read_file failed: %v", err)
		}
		if st.Size > int64(s.opts.MaxFileBytes) {
			return errResult("%s is %d bytes, more than the %d this tool returns; use run_command with head, tail or grep", st.Path, st.Size, s.opts.MaxFileBytes)
		}
		data, err := sb.Files().Read(ctx, p)
		if err != nil {
			return errResult("read_file failed: %v", err)
		}
		if !utf8.Valid(data) {
			return errResult("%s is not UTF-8 text (%d bytes); inspect it with run_command (for example xxd | head)", st.Path, len(data))
		}
		return Result{Text: string(data)}
	}
	return errResult("unknown tool %q", name)
}

// sandboxForCall returns the sandbox to use and a release function that
// deletes it in per-call mode.
func (s *Session) sandboxForCall(ctx context.Context) (*client.Sandbox, func(), error) {
	if !s.perCall {
		sb, err := s.Sandbox(ctx)
		return sb, func() {}, err
	}
	sb, err := s.client.Create(ctx, s.create)
	if err != nil {
		return nil, nil, err
	}
	return sb, func() { sb.Close() }, nil
}

func (s *Session) exec(ctx context.Context, sb *client.Sandbox, req api.ExecRequest) Result {
	req.TimeoutSeconds = s.opts.Timeout.Seconds()
	req.MaxOutputBytes = int64(max(s.opts.OutputBudget, 1024))
	res, err := sb.Exec(ctx, req)
	if err != nil {
		return errResult("the sandbox could not run the command: %v", err)
	}
	return FormatExec(res, s.opts.OutputBudget)
}

// FormatExec renders an exec result as the JSON text the model sees,
// keeping stdout plus stderr within budget characters (head and tail of
// each kept, the middle cut with a marker). Failure (non-zero exit, signal
// or timeout) sets IsError.
func FormatExec(res *api.ExecResult, budget int) Result {
	if budget <= 0 {
		budget = 20000
	}
	out := ExecOutput{
		ExitCode: res.ExitCode, TimedOut: res.TimedOut,
		StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated,
	}
	// Split the budget between the streams, giving unused share to the other.
	so, se := strings.ToValidUTF8(res.Stdout, "\uFFFD"), strings.ToValidUTF8(res.Stderr, "\uFFFD")
	bs := budget / 2
	if len(se) < bs {
		bs = budget - len(se)
	}
	be := budget - min(len(so), bs)
	var cut bool
	out.Stdout, cut = truncateMiddle(so, bs)
	out.StdoutTruncated = out.StdoutTruncated || cut
	out.Stderr, cut = truncateMiddle(se, be)
	out.StderrTruncated = out.StderrTruncated || cut
	if res.Signal != nil && out.Stderr == "" {
		out.Stderr = "killed by " + *res.Signal
	}
	b, _ := json.Marshal(out)
	failed := res.TimedOut || res.ExitCode == nil || *res.ExitCode != 0
	return Result{Text: string(b), IsError: failed}
}

func errResult(format string, a ...any) Result {
	return Result{Text: "error: " + fmt.Sprintf(format, a...), IsError: true}
}
