package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"

	"github.com/paddock-sandbox/paddock/api"
)

// Templates lists the templates the key can use: base ones, the daemon's
// shared ones and the key's own.
func (c *Client) Templates(ctx context.Context) ([]api.Template, error) {
	var resp api.ListTemplatesResponse
	if err := c.call(ctx, http.MethodGet, "/templates", nil, nil, &resp); err != nil {
		return nil, err
	}
	return resp.Templates, nil
}

// Template fetches one template by "name[:tag]".
func (c *Client) Template(ctx context.Context, name string) (*api.Template, error) {
	var t api.Template
	if err := c.call(ctx, http.MethodGet, "/templates/"+url.PathEscape(name), nil, nil, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// DeleteTemplate deletes one of the key's templates. A template a sandbox
// uses answers ErrConflict.
func (c *Client) DeleteTemplate(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodDelete, "/templates/"+url.PathEscape(name), nil, nil, nil)
}

// CreateTemplate imports or builds a template and waits for it.
func (c *Client) CreateTemplate(ctx context.Context, req api.CreateTemplateRequest) (*api.Template, error) {
	var t api.Template
	if err := c.call(ctx, http.MethodPost, "/templates", nil, req, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// BuildTemplate imports or builds a template and yields its progress: step,
// output and cached events, then a done event carrying the template. A
// failed build yields its error (an *APIError) last.
func (c *Client) BuildTemplate(ctx context.Context, req api.CreateTemplateRequest) iter.Seq2[api.BuildEvent, error] {
	return func(yield func(api.BuildEvent, error) bool) {
		body, err := jsonBody(req)
		if err != nil {
			yield(api.BuildEvent{}, err)
			return
		}
		c.buildStream(ctx, request{method: http.MethodPost, path: "/templates", body: body, contentType: "application/json"}, yield)
	}
}

// BuildOptions name a template built from a tar build context.
type BuildOptions struct {
	// Name is the template's "name[:tag]".
	Name string
	// Dockerfile is the Dockerfile's path in the context (default
	// "Dockerfile").
	Dockerfile string
	// BuildArgs are the values of the Dockerfile's ARGs.
	BuildArgs map[string]string
	// NoCache rebuilds every step.
	NoCache bool
	// StepTimeoutSeconds bounds each step (0: the daemon's default).
	StepTimeoutSeconds int64
}

// BuildContext builds a template from a Dockerfile in a build context sent
// as a tar stream, yielding progress as BuildTemplate does.
func (c *Client) BuildContext(ctx context.Context, opts BuildOptions, tarball io.Reader) iter.Seq2[api.BuildEvent, error] {
	return func(yield func(api.BuildEvent, error) bool) {
		q := url.Values{"name": {opts.Name}}
		if opts.Dockerfile != "" {
			q.Set("dockerfile", opts.Dockerfile)
		}
		for k, v := range opts.BuildArgs {
			q.Add("build_arg", k+"="+v)
		}
		if opts.NoCache {
			q.Set("no_cache", "true")
		}
		if opts.StepTimeoutSeconds > 0 {
			q.Set("step_timeout_seconds", strconv.FormatInt(opts.StepTimeoutSeconds, 10))
		}
		c.buildStream(ctx, request{method: http.MethodPost, path: "/templates", query: q, body: tarball,
			contentType: "application/x-tar"}, yield)
	}
}

// errNoDone is wrapped when a build stream ends before its done event.
var errNoDone = errors.New("build stream ended without a done event")

// buildStream sends r asking for NDJSON and yields its BuildEvents until
// done or error.
func (c *Client) buildStream(ctx context.Context, r request, yield func(api.BuildEvent, error) bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.accept = api.ContentTypeNDJSON
	resp, err := c.send(ctx, r)
	if err != nil {
		yield(api.BuildEvent{}, err)
		return
	}
	defer resp.Body.Close()
	if isJSON(resp.Header.Get("Content-Type")) {
		var t api.Template
		if err := json.NewDecoder(resp.Body).Decode(&t); err != nil {
			yield(api.BuildEvent{}, fmt.Errorf("decode template: %w", err))
			return
		}
		yield(api.BuildEvent{Type: api.BuildEventDone, Template: &t}, nil)
		return
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var ev api.BuildEvent
		if err := dec.Decode(&ev); err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			} else if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = fmt.Errorf("%w: %w", errNoDone, io.ErrUnexpectedEOF)
			}
			yield(api.BuildEvent{}, fmt.Errorf("read build stream: %w", err))
			return
		}
		switch ev.Type {
		case api.BuildEventError:
			yield(ev, eventError(ev.Error))
			return
		case api.BuildEventDone:
			yield(ev, nil)
			return
		}
		if !yield(ev, nil) {
			return
		}
	}
}

// Snapshot freezes the sandbox (if running), saves its files as a new
// template of the key named "name[:tag]" on top of the sandbox's template,
// and thaws it.
func (s *Sandbox) Snapshot(ctx context.Context, name string) (*api.Template, error) {
	var t api.Template
	if err := s.c.call(ctx, http.MethodPost, sandboxPath(s.ID, "snapshot"), nil, api.SnapshotRequest{Name: name}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}
