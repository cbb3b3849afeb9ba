package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// Transport bounds of the daemon's calls to agents. The agent validates
// what it runs; these only keep a slow or hostile agent from holding the
// daemon's goroutines and memory.
const (
	// Grace is added to a call's own duration (an exec's timeout, a
	// wait's timeout) before the daemon gives up on the agent.
	Grace = 30 * time.Second
	// fileTimeout bounds a file upload or download.
	fileTimeout = 30 * time.Minute
	// stdinTimeout bounds writing to a process's stdin.
	stdinTimeout = 5 * time.Minute
	// envTimeout bounds setting the environment.
	envTimeout = 10 * time.Second
	// maxErrorBytes bounds an error answer.
	maxErrorBytes = 64 << 10
	// maxSmallAnswer bounds answers that describe one thing (a file entry,
	// a started process, the port list).
	maxSmallAnswer = 1 << 20
	// expectContinueTimeout is how long a call with Expect: 100-continue
	// waits for the agent's go-ahead before it sends its body anyway.
	expectContinueTimeout = 5 * time.Second
	// maxPorts bounds the ports taken from a listing.
	maxPorts = 1024
)

// maxAnswer bounds an answer that can carry up to maxOutput bytes of each
// output stream (JSON-escaped output can take up to six bytes per byte).
func maxAnswer(maxOutput int64) int64 { return 6*maxOutput + (1 << 20) }

// Dialer connects to the guest agent of sandbox id (sandbox.Backend.Dial).
type Dialer func(ctx context.Context, id string) (net.Conn, error)

// Client is the daemon's one typed client of guest agents: every call the
// daemon makes to the agent of a sandbox (the API's exec, process, file
// and port calls, the warm pool, template builds) goes through it. Its
// methods take the sandbox id and treat the agent's answers as
// untrusted: every read is bounded and every JSON answer is decoded into
// its type. Errors the agent answers come back as *Error, which matches
// (errors.Is) the sandbox error class of its code, so that callers map it
// to the same API error whoever they are. Transport failures match
// sandbox.ErrUnavailable.
//
// A Client is safe for concurrent use.
type Client struct {
	hc   *http.Client
	dial Dialer
}

// NewClient returns a client that reaches agents through dial.
func NewClient(dial Dialer) *Client {
	return &Client{dial: dial, hc: &http.Client{Transport: &http.Transport{
		// The URL host is the sandbox id; dial knows its socket.
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			return dial(ctx, host)
		},
		Proxy:                  nil,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        defaultIdleConnTimeout,
		MaxResponseHeaderBytes: 64 << 10,
		DisableCompression:     true,
		// Only calls with Expect: 100-continue wait (streaming stdin).
		ExpectContinueTimeout: expectContinueTimeout,
	}}}
}

// KeepIdleFor sets how long a connection to an agent is kept for reuse
// (default 30 s); call it before the client's first call.
func (c *Client) KeepIdleFor(d time.Duration) {
	c.hc.Transport.(*http.Transport).IdleConnTimeout = d
}

// IdleConnTimeout is the keep-alive of the daemon's connections to agents
// whose spare shim retires after spareIdle: under half of it, so that
// the client has closed them by the time an agent may hibernate (it never
// hibernates with a connection open; a close from the client's side
// cannot race a call the way a close from the agent's side would), and
// at most 30 s.
func IdleConnTimeout(spareIdle time.Duration) time.Duration {
	if spareIdle <= 0 {
		return defaultIdleConnTimeout
	}
	return min(defaultIdleConnTimeout, max(spareIdle*2/5, 50*time.Millisecond))
}

// defaultIdleConnTimeout is how long the daemon keeps a connection to an
// agent for reuse.
const defaultIdleConnTimeout = 30 * time.Second

// CloseIdleConnections closes the connections to agents kept for reuse.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// NewHTTPClient returns an HTTP client that reaches the agent listening on
// the unix socket socketPath, whatever the URL's host (use for example
// "http://agent/health"). It uses no proxy and no overall timeout, since
// exec and output streams last as long as their commands; bound calls with
// their contexts. Tests of the agent's routes use it.
func NewHTTPClient(socketPath string) *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{Transport: &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", socketPath)
		},
		MaxIdleConns:          16,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}}
}

// Error is an error answered by an agent.
type Error struct {
	Status  int    // HTTP status of the answer
	Code    string // api.Code*
	Message string
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the sandbox error class of e's code: the API answers the
// same code whoever made the call. Codes an agent has no business
// answering are sandbox.ErrUnavailable; internal errors have no class.
func (e *Error) Unwrap() error {
	switch e.Code {
	case api.CodeBadRequest:
		return sandbox.ErrInvalid
	case api.CodeNotFound:
		return sandbox.ErrNotFound
	case api.CodeConflict:
		return sandbox.ErrConflict
	case api.CodeTooLarge:
		return sandbox.ErrTooLarge
	case api.CodeLimitExceeded:
		return sandbox.ErrLimit
	case api.CodeNoSpace:
		return sandbox.ErrNoSpace
	case api.CodeInternal:
		return nil
	}
	return sandbox.ErrUnavailable
}

// call is one request to an agent.
type call struct {
	method, path string
	query        url.Values
	body         io.Reader
	length       int64  // of body; -1 if unknown
	ctype        string // of body; default application/octet-stream
	accept       string
	timeout      time.Duration // 0: bounded by ctx only
	ok           []int         // the success statuses
	// expect sends the body only after the agent's 100 Continue.
	expect bool
	status *int // when not nil, set to the answer's status
}

// answer is a successful response; Close releases it.
type answer struct {
	*http.Response
	cancel context.CancelFunc
}

func (a *answer) Close() error {
	err := a.Body.Close()
	a.cancel()
	return err
}

// do sends c to sandbox id's agent. On success the caller must Close the
// answer; any other status is returned as an error.
func (c *Client) do(ctx context.Context, id string, cl call) (*answer, error) {
	cancel := context.CancelFunc(func() {})
	if cl.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, cl.timeout)
	}
	u := url.URL{Scheme: "http", Host: id, Path: cl.path, RawQuery: cl.query.Encode()}
	req, err := http.NewRequestWithContext(ctx, cl.method, u.String(), cl.body)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("%w: %v", sandbox.ErrInvalid, err)
	}
	if cl.body != nil {
		req.ContentLength = cl.length
		ct := cl.ctype
		if ct == "" {
			ct = "application/octet-stream"
		}
		req.Header.Set("Content-Type", ct)
	}
	if cl.accept != "" {
		req.Header.Set("Accept", cl.accept)
	}
	if cl.expect {
		req.Header.Set("Expect", "100-continue")
	}
	resp, err := c.hc.Do(req)
	if err == nil && cl.status != nil {
		*cl.status = resp.StatusCode
	}
	if err != nil {
		cancel()
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return nil, mbe // the caller's body was too large
		case errors.Is(err, sandbox.ErrUnavailable), errors.Is(err, sandbox.ErrNotFound):
			return nil, err // from dial
		}
		return nil, fmt.Errorf("%w: %v", sandbox.ErrUnavailable, err)
	}
	for _, st := range cl.ok {
		if resp.StatusCode == st {
			return &answer{Response: resp, cancel: cancel}, nil
		}
	}
	defer cancel()
	defer resp.Body.Close()
	return nil, readError(resp)
}

// readError turns an agent's error answer into an *Error, or an
// unavailable error when the answer is not one.
func readError(resp *http.Response) error {
	var e api.ErrorResponse
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	if resp.StatusCode < 400 || json.Unmarshal(b, &e) != nil || e.Error.Code == "" {
		return fmt.Errorf("%w: agent answered %s", sandbox.ErrUnavailable, resp.Status)
	}
	return &Error{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
}

// jsonCall sends c and decodes a JSON answer of at most limit bytes into
// out (when not nil).
func (c *Client) jsonCall(ctx context.Context, id string, cl call, limit int64, out any) error {
	a, err := c.do(ctx, id, cl)
	if err != nil {
		return err
	}
	defer a.Close()
	if out == nil {
		return nil
	}
	return decodeAnswer(a.Body, limit, out)
}

// decodeAnswer decodes exactly one JSON value of at most limit bytes.
func decodeAnswer(r io.Reader, limit int64, out any) error {
	lr := &io.LimitedReader{R: r, N: limit + 1}
	dec := json.NewDecoder(lr)
	if err := dec.Decode(out); err != nil {
		if lr.N <= 0 {
			return fmt.Errorf("%w: agent answer larger than %d bytes", sandbox.ErrUnavailable, limit)
		}
		return fmt.Errorf("%w: bad agent answer: %v", sandbox.ErrUnavailable, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: bad agent answer: trailing data", sandbox.ErrUnavailable)
	}
	return nil
}

// jsonBody encodes v as a request body.
func jsonBody(v any) (io.Reader, int64, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %v", sandbox.ErrInvalid, err)
	}
	return strings.NewReader(string(b)), int64(len(b)), nil
}

// Health checks that sandbox id's agent answers.
func (c *Client) Health(ctx context.Context, id string) error {
	var h struct {
		Status string `json:"status"`
	}
	err := c.jsonCall(ctx, id, call{method: http.MethodGet, path: "/health", timeout: Grace, ok: []int{http.StatusOK}}, maxSmallAnswer, &h)
	if err == nil && h.Status != "ok" {
		err = fmt.Errorf("%w: agent health %q", sandbox.ErrUnavailable, h.Status)
	}
	return err
}

// SetSpareIdle sets how long the agent keeps its spare shim without an
// exec before retiring it (PUT /spare); 0 keeps it.
func (c *Client) SetSpareIdle(ctx context.Context, id string, d time.Duration) error {
	body, n, err := jsonBody(SparePolicy{IdleMS: d.Milliseconds()})
	if err != nil {
		return err
	}
	return c.jsonCall(ctx, id, call{method: http.MethodPut, path: "/spare", body: body, length: n, ctype: "application/json",
		timeout: envTimeout, ok: []int{http.StatusNoContent, http.StatusOK}}, 0, nil)
}

// SetEnv replaces the environment the agent adds to every later command
// (PUT /env); an empty map clears it.
func (c *Client) SetEnv(ctx context.Context, id string, env map[string]string) error {
	if env == nil {
		env = map[string]string{}
	}
	body, n, err := jsonBody(env)
	if err != nil {
		return err
	}
	return c.jsonCall(ctx, id, call{method: http.MethodPut, path: "/env", body: body, length: n, ctype: "application/json",
		timeout: envTimeout, ok: []int{http.StatusNoContent, http.StatusOK}}, 0, nil)
}
