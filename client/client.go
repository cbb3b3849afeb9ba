package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/paddock-sandbox/paddock/api"
)

// Version is the version of this SDK, sent in the default User-Agent.
const Version = "0.1.0"

// DefaultURL is the address of a local paddockd, used when neither
// Client.BaseURL nor PADDOCK_URL is set.
const DefaultURL = "http://127.0.0.1:7419"

// Environment variables read by a Client whose fields are empty.
const (
	EnvURL    = "PADDOCK_URL"
	EnvAPIKey = "PADDOCK_API_KEY"
)

// Client talks to one paddockd. Its zero value works: an empty BaseURL
// means $PADDOCK_URL or DefaultURL, an empty APIKey means $PADDOCK_API_KEY,
// a nil HTTPClient means http.DefaultClient. A Client is safe for
// concurrent use as long as its fields are not changed.
type Client struct {
	// BaseURL is the daemon's address, for example "http://host:7419".
	// A trailing "/v1" is accepted and ignored; "http://" is assumed when
	// no scheme is given.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <APIKey>".
	APIKey string
	// HTTPClient sends the requests. It should have no overall Timeout:
	// exec, wait and output streams last as long as the command does.
	HTTPClient *http.Client
	// UserAgent defaults to "paddock-go/<Version>".
	UserAgent string
}

// New returns a Client for baseURL with apiKey; empty arguments take the
// environment's values as for the zero Client.
func New(baseURL, apiKey string) *Client {
	return &Client{BaseURL: baseURL, APIKey: apiKey}
}

// ResolvedURL returns the base URL requests go to, after the defaults.
func (c *Client) ResolvedURL() string {
	base := c.BaseURL
	if base == "" {
		base = os.Getenv(EnvURL)
	}
	if base == "" {
		base = DefaultURL
	}
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	base = strings.TrimRight(base, "/")
	base = strings.TrimSuffix(base, "/"+api.Version)
	return base
}

// apiKey returns the key to send, without surrounding white space (a key
// read from a file often ends with a newline).
func (c *Client) apiKey() string {
	if c.APIKey != "" {
		return strings.TrimSpace(c.APIKey)
	}
	return strings.TrimSpace(os.Getenv(EnvAPIKey))
}

func (c *Client) httpClient() *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	return http.DefaultClient
}

// endpoint builds the URL of an API path such as "/sandboxes/x/exec".
// Callers escape path segments with url.PathEscape.
func (c *Client) endpoint(path string, query url.Values) string {
	u := c.ResolvedURL() + "/" + api.Version + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	return u
}

// request describes one API call.
type request struct {
	method      string
	path        string // below /v1, segments already escaped
	query       url.Values
	body        io.Reader
	contentType string
	accept      string
	header      http.Header // more headers
}

// send performs r and returns the response when its status is 2xx; any
// other status becomes an *APIError. The caller closes the body.
func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, r.method, c.endpoint(r.path, r.query), r.body)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	accept := r.accept
	if accept == "" {
		accept = "application/json"
	}
	req.Header.Set("Accept", accept)
	if key := c.apiKey(); key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	ua := c.UserAgent
	if ua == "" {
		ua = "paddock-go/" + Version
	}
	req.Header.Set("User-Agent", ua)

	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, fmt.Errorf("request failed: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, parseError(resp)
	}
	return resp, nil
}

// call sends in (when not nil) as JSON and decodes the answer into out
// (when not nil).
func (c *Client) call(ctx context.Context, method, path string, query url.Values, in, out any) error {
	r := request{method: method, path: path, query: query}
	if in != nil {
		body, err := jsonBody(in)
		if err != nil {
			return err
		}
		r.body = body
		r.contentType = "application/json"
	}
	return c.callBody(ctx, r, out)
}

// callBody sends r and decodes the answer into out (when not nil).
func (c *Client) callBody(ctx context.Context, r request, out any) error {
	resp, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode %s %s response: %w", r.method, r.path, err)
	}
	return nil
}

// sandboxPath returns "/sandboxes/<id>" followed by the given segments,
// each escaped.
func sandboxPath(id string, segments ...string) string {
	var b strings.Builder
	b.WriteString("/sandboxes/")
	b.WriteString(url.PathEscape(id))
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// Health reports the daemon's status and version. It needs no API key.
func (c *Client) Health(ctx context.Context) (*api.Health, error) {
	var h api.Health
	if err := c.call(ctx, http.MethodGet, "/health", nil, nil, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// Create starts a sandbox. A nil request takes every default.
func (c *Client) Create(ctx context.Context, req *api.CreateSandboxRequest) (*Sandbox, error) {
	if req == nil {
		req = &api.CreateSandboxRequest{}
	}
	sb := &Sandbox{c: c}
	if err := c.call(ctx, http.MethodPost, "/sandboxes", nil, req, &sb.Sandbox); err != nil {
		return nil, err
	}
	return sb, nil
}

// Get fetches the sandbox with the given id.
func (c *Client) Get(ctx context.Context, id string) (*Sandbox, error) {
	sb := c.Sandbox(id)
	if err := sb.Refresh(ctx); err != nil {
		return nil, err
	}
	return sb, nil
}

// Sandbox returns a handle on the sandbox id without a request. Only its ID
// is set until Refresh is called.
func (c *Client) Sandbox(id string) *Sandbox {
	return &Sandbox{Sandbox: api.Sandbox{ID: id}, c: c}
}

// ListOptions filter and page a sandbox listing. Zero fields are left out.
type ListOptions struct {
	// Limit is the page size; the daemon picks one when it is 0.
	Limit int
	// Cursor is the NextCursor of the previous page.
	Cursor string
	// State keeps only sandboxes in that state (api.StateRunning, ...).
	State string
	// Metadata keeps only sandboxes whose metadata has all these pairs.
	Metadata map[string]string
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	if o.State != "" {
		q.Set("state", o.State)
	}
	for k, v := range o.Metadata {
		q.Set("metadata."+k, v)
	}
	return q
}

// List returns one page of sandboxes.
func (c *Client) List(ctx context.Context, opts ListOptions) (*api.ListSandboxesResponse, error) {
	var resp api.ListSandboxesResponse
	if err := c.call(ctx, http.MethodGet, "/sandboxes", opts.query(), nil, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// All iterates over every sandbox matching opts, following next_cursor
// from opts.Cursor on. An error is yielded once and ends the iteration.
func (c *Client) All(ctx context.Context, opts ListOptions) iter.Seq2[api.Sandbox, error] {
	return func(yield func(api.Sandbox, error) bool) {
		seen := map[string]bool{}
		for {
			page, err := c.List(ctx, opts)
			if err != nil {
				yield(api.Sandbox{}, err)
				return
			}
			for _, sb := range page.Sandboxes {
				if !yield(sb, nil) {
					return
				}
			}
			if page.NextCursor == "" {
				return
			}
			if seen[page.NextCursor] {
				yield(api.Sandbox{}, fmt.Errorf("list sandboxes: cursor %q repeated", page.NextCursor))
				return
			}
			seen[page.NextCursor] = true
			opts.Cursor = page.NextCursor
		}
	}
}
