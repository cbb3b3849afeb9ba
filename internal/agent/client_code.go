package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// codeAnswerLimit bounds a code answer: the kept output of both streams
// (JSON-escaped) and the results of a cell, with room for escaping.
const codeAnswerLimit = 6*2*api.MaxCodeOutputBytes + 3*api.MaxCodeResultsBytes + (1 << 20)

// codeDeadline is how long the daemon waits for a cell of req: its
// timeout, the interrupt grace and Grace.
func codeDeadline(req *api.CodeRequest) time.Duration {
	t := req.TimeoutSeconds
	if t <= 0 || t > api.MaxExecTimeoutSeconds {
		t = api.DefaultCodeTimeoutSeconds
	}
	return time.Duration(t*float64(time.Second)) + api.CodeInterruptGraceSeconds*time.Second + Grace
}

// RunCode runs a cell in a code context and returns its execution.
func (c *Client) RunCode(ctx context.Context, id string, req *api.CodeRequest) (*api.CodeExecution, error) {
	body, n, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	var res api.CodeExecution
	err = c.jsonCall(ctx, id, call{method: http.MethodPost, path: "/code", body: body, length: n, ctype: "application/json",
		accept: "application/json", timeout: codeDeadline(req), ok: []int{http.StatusOK}}, codeAnswerLimit, &res)
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// RunCodeStream runs a cell and returns its events as they happen. The
// caller must Close the stream; closing it early interrupts the cell.
func (c *Client) RunCodeStream(ctx context.Context, id string, req *api.CodeRequest) (*CodeEvents, error) {
	body, n, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	a, err := c.do(ctx, id, call{method: http.MethodPost, path: "/code", body: body, length: n, ctype: "application/json",
		accept: api.ContentTypeNDJSON, timeout: codeDeadline(req), ok: []int{http.StatusOK}})
	if err != nil {
		return nil, err
	}
	lr := &io.LimitedReader{R: a.Body, N: codeAnswerLimit}
	return &CodeEvents{a: a, lr: lr, dec: json.NewDecoder(lr)}, nil
}

// CodeEvents is the event stream of a running cell.
type CodeEvents struct {
	a   *answer
	lr  *io.LimitedReader
	dec *json.Decoder
}

// Next returns the next event, io.EOF at the end of the stream.
func (e *CodeEvents) Next() (api.CodeEvent, error) {
	var ev api.CodeEvent
	if err := decodeEvent(e.dec, e.lr, "agent code stream", &ev); err != nil {
		return ev, err
	}
	switch ev.Type {
	case api.CodeEventStdout, api.CodeEventStderr, api.CodeEventResult, api.CodeEventError, api.CodeEventEnd:
		return ev, nil
	}
	return ev, fmt.Errorf("%w: agent sent a code event of type %q", sandbox.ErrUnavailable, ev.Type)
}

// Close ends the stream.
func (e *CodeEvents) Close() error { return e.a.Close() }

func contextPath(ctxID, suffix string) string {
	return "/code/contexts/" + url.PathEscape(ctxID) + suffix
}

// CreateCodeContext starts a code context.
func (c *Client) CreateCodeContext(ctx context.Context, id string, req *api.CodeContextRequest) (*api.CodeContext, error) {
	body, n, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	var out api.CodeContext
	err = c.jsonCall(ctx, id, call{method: http.MethodPost, path: "/code/contexts", body: body, length: n, ctype: "application/json",
		timeout: Grace, ok: []int{http.StatusCreated, http.StatusOK}}, maxSmallAnswer, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ListCodeContexts lists the code contexts.
func (c *Client) ListCodeContexts(ctx context.Context, id string) (*api.CodeContextList, error) {
	var out api.CodeContextList
	err := c.jsonCall(ctx, id, call{method: http.MethodGet, path: "/code/contexts", timeout: Grace, ok: []int{http.StatusOK}}, maxSmallAnswer, &out)
	if err != nil {
		return nil, err
	}
	if out.Contexts == nil {
		out.Contexts = []api.CodeContext{}
	}
	return &out, nil
}

// GetCodeContext describes a code context.
func (c *Client) GetCodeContext(ctx context.Context, id, ctxID string) (*api.CodeContext, error) {
	return c.contextCall(ctx, id, http.MethodGet, contextPath(ctxID, ""))
}

// RestartCodeContext restarts a code context.
func (c *Client) RestartCodeContext(ctx context.Context, id, ctxID string) (*api.CodeContext, error) {
	return c.contextCall(ctx, id, http.MethodPost, contextPath(ctxID, "/restart"))
}

// InterruptCodeContext interrupts a code context's running cell.
func (c *Client) InterruptCodeContext(ctx context.Context, id, ctxID string) (*api.CodeContext, error) {
	return c.contextCall(ctx, id, http.MethodPost, contextPath(ctxID, "/interrupt"))
}

// DeleteCodeContext deletes a code context.
func (c *Client) DeleteCodeContext(ctx context.Context, id, ctxID string) error {
	return c.jsonCall(ctx, id, call{method: http.MethodDelete, path: contextPath(ctxID, ""), timeout: Grace,
		ok: []int{http.StatusNoContent, http.StatusOK}}, 0, nil)
}

func (c *Client) contextCall(ctx context.Context, id, method, path string) (*api.CodeContext, error) {
	var out api.CodeContext
	err := c.jsonCall(ctx, id, call{method: method, path: path, timeout: Grace, ok: []int{http.StatusOK}}, maxSmallAnswer, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}
