package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/paddock-sandbox/paddock/api"
)

// errNoExit is wrapped when an event stream ends before its exit event.
var errNoExit = errors.New("event stream ended without an exit event")

// isJSON reports whether a Content-Type is application/json.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// readEvents decodes NDJSON events from r and yields them until the exit
// event, which is yielded last with a non-nil ExecResult. An error event is
// yielded with its *APIError; a read failure or a stream that ends early is
// yielded as an error. Nothing is yielded after an error or once yield
// returns false.
func readEvents(ctx context.Context, r io.Reader, yield func(api.Event, error) bool) {
	dec := json.NewDecoder(r)
	for {
		var ev api.Event
		if err := dec.Decode(&ev); err != nil {
			switch {
			case ctx.Err() != nil:
				err = fmt.Errorf("read event stream: %w", ctx.Err())
			case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
				err = fmt.Errorf("%w: %w", errNoExit, io.ErrUnexpectedEOF)
			default:
				err = fmt.Errorf("read event stream: %w", err)
			}
			yield(api.Event{}, err)
			return
		}
		switch ev.Type {
		case api.EventError:
			yield(ev, eventError(ev.Error))
			return
		case api.EventExit:
			if ev.ExecResult == nil {
				ev.ExecResult = &api.ExecResult{}
			}
			yield(ev, nil)
			return
		}
		if !yield(ev, nil) {
			return
		}
	}
}

// resultEvents yields the events equivalent to a complete ExecResult: its
// output as one stdout and one stderr event, then the exit event.
func resultEvents(res *api.ExecResult, yield func(api.Event, error) bool) {
	if res.Stdout != "" {
		if !yield(api.Event{Type: api.EventStdout, Data: []byte(res.Stdout)}, nil) {
			return
		}
	}
	if res.Stderr != "" {
		if !yield(api.Event{Type: api.EventStderr, Data: []byte(res.Stderr)}, nil) {
			return
		}
	}
	exit := *res
	exit.Stdout, exit.Stderr = "", ""
	yield(api.Event{Type: api.EventExit, ExecResult: &exit}, nil)
}

// stream sends r with Accept: application/x-ndjson and yields the events
// of the answer. The request is cancelled when the iteration ends.
func (c *Client) stream(ctx context.Context, r request, yield func(api.Event, error) bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.accept = api.ContentTypeNDJSON
	resp, err := c.send(ctx, r)
	if err != nil {
		yield(api.Event{}, err)
		return
	}
	defer resp.Body.Close()
	if isJSON(resp.Header.Get("Content-Type")) {
		// A daemon that ignores Accept answers an exec with one ExecResult.
		var res api.ExecResult
		if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
			yield(api.Event{}, fmt.Errorf("decode exec result: %w", err))
			return
		}
		resultEvents(&res, yield)
		return
	}
	readEvents(ctx, resp.Body, yield)
}

// jsonBody encodes v for a request body.
func jsonBody(v any) (io.Reader, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	return bytes.NewReader(b), nil
}

// postStream is stream for a POST with a JSON body.
func (c *Client) postStream(ctx context.Context, path string, in any, yield func(api.Event, error) bool) {
	body, err := jsonBody(in)
	if err != nil {
		yield(api.Event{}, err)
		return
	}
	c.stream(ctx, request{method: http.MethodPost, path: path, body: body, contentType: "application/json"}, yield)
}
