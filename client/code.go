package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"

	"github.com/paddock-sandbox/paddock/api"
)

// RunCode runs a cell of code in a code context of the sandbox (the
// default context of req.Language when req.ContextID is empty) and returns
// its execution: output, rich results (the last expression's value,
// figures) and the cell's error, if any. An exception or a timeout is a
// result, not an error.
func (sb *Sandbox) RunCode(ctx context.Context, req *api.CodeRequest) (*api.CodeExecution, error) {
	var res api.CodeExecution
	if err := sb.c.call(ctx, http.MethodPost, sandboxPath(sb.ID, "code"), nil, req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// RunCodeStream runs a cell and yields its events as they happen: stdout
// and stderr text, results, the cell's error, then the end event with the
// execution's summary. A request or stream failure is yielded as an error
// and ends the iteration; stopping the iteration interrupts the cell.
func (sb *Sandbox) RunCodeStream(ctx context.Context, req *api.CodeRequest) iter.Seq2[api.CodeEvent, error] {
	return func(yield func(api.CodeEvent, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		body, err := jsonBody(req)
		if err != nil {
			yield(api.CodeEvent{}, err)
			return
		}
		resp, err := sb.c.send(ctx, request{method: http.MethodPost, path: sandboxPath(sb.ID, "code"), body: body,
			contentType: "application/json", accept: api.ContentTypeNDJSON})
		if err != nil {
			yield(api.CodeEvent{}, err)
			return
		}
		defer resp.Body.Close()
		dec := json.NewDecoder(resp.Body)
		for {
			var ev api.CodeEvent
			if err := dec.Decode(&ev); err != nil {
				if errors.Is(err, io.EOF) {
					err = fmt.Errorf("%w: %w", errNoExit, io.ErrUnexpectedEOF)
				}
				yield(api.CodeEvent{}, fmt.Errorf("read code event stream: %w", err))
				return
			}
			if !yield(ev, nil) || ev.Type == api.CodeEventEnd {
				return
			}
		}
	}
}

// CreateCodeContext starts a new code context (a fresh interpreter).
func (sb *Sandbox) CreateCodeContext(ctx context.Context, req *api.CodeContextRequest) (*api.CodeContext, error) {
	if req == nil {
		req = &api.CodeContextRequest{}
	}
	var c api.CodeContext
	if err := sb.c.call(ctx, http.MethodPost, sandboxPath(sb.ID, "code", "contexts"), nil, req, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// CodeContexts lists the sandbox's code contexts, oldest first.
func (sb *Sandbox) CodeContexts(ctx context.Context) ([]api.CodeContext, error) {
	var out api.CodeContextList
	if err := sb.c.call(ctx, http.MethodGet, sandboxPath(sb.ID, "code", "contexts"), nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Contexts, nil
}

// CodeContext describes one code context.
func (sb *Sandbox) CodeContext(ctx context.Context, id string) (*api.CodeContext, error) {
	return sb.contextCall(ctx, http.MethodGet, id)
}

// RestartCodeContext restarts a code context: its state is lost and its
// execution count starts again.
func (sb *Sandbox) RestartCodeContext(ctx context.Context, id string) (*api.CodeContext, error) {
	return sb.contextCall(ctx, http.MethodPost, id, "restart")
}

// InterruptCodeContext interrupts the cell running in a code context.
func (sb *Sandbox) InterruptCodeContext(ctx context.Context, id string) (*api.CodeContext, error) {
	return sb.contextCall(ctx, http.MethodPost, id, "interrupt")
}

// DeleteCodeContext deletes a code context and kills its interpreter.
func (sb *Sandbox) DeleteCodeContext(ctx context.Context, id string) error {
	return sb.c.call(ctx, http.MethodDelete, sandboxPath(sb.ID, "code", "contexts", id), nil, nil, nil)
}

func (sb *Sandbox) contextCall(ctx context.Context, method, id string, suffix ...string) (*api.CodeContext, error) {
	var c api.CodeContext
	path := sandboxPath(sb.ID, append([]string{"code", "contexts", id}, suffix...)...)
	if err := sb.c.call(ctx, method, path, nil, nil, &c); err != nil {
		return nil, err
	}
	return &c, nil
}
