package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// Pause freezes every process of the sandbox; memory and files are kept
// and CPU billing stops. The sandbox is terminated if it stays paused
// longer than the daemon's pause retention (see PauseFor).
func (s *Sandbox) Pause(ctx context.Context) error {
	return s.lifecycle(ctx, "pause", struct{}{})
}

// PauseFor pauses the sandbox and keeps it for keepFor (0: the daemon's
// default; at most its --max-pause-retention). With thenStopAfter > 0 the
// daemon stops it (files kept, processes ended) that long after the pause,
// so its files outlive a host reboot; keepFor then counts from the pause
// and must be longer.
func (s *Sandbox) PauseFor(ctx context.Context, keepFor, thenStopAfter time.Duration) error {
	return s.lifecycle(ctx, "pause", api.PauseRequest{
		KeepForSeconds: seconds(keepFor), ThenStopAfterSeconds: seconds(thenStopAfter)})
}

// Resume continues a paused sandbox (or boots a stopped one) with a new
// lease of its original length.
func (s *Sandbox) Resume(ctx context.Context) error {
	return s.lifecycle(ctx, "resume", struct{}{})
}

// Stop ends every process of the sandbox and keeps its files for keepFor
// (0: the daemon's default; at most its --max-stop-retention). Only
// storage is billed while it is stopped; Boot starts it again. (Kill
// deletes it.)
func (s *Sandbox) Stop(ctx context.Context, keepFor time.Duration) error {
	return s.lifecycle(ctx, "stop", api.StopRequest{KeepForSeconds: seconds(keepFor)})
}

// Boot starts a stopped sandbox again from its files (POST .../start):
// fresh processes, the same id, network policy and resources. A paused
// one is resumed. (Start runs a process in a running sandbox.)
func (s *Sandbox) Boot(ctx context.Context) error {
	return s.lifecycle(ctx, "start", struct{}{})
}

// seconds rounds d up to whole seconds.
func seconds(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }

func (s *Sandbox) lifecycle(ctx context.Context, verb string, body any) error {
	var sb api.Sandbox
	if err := s.c.call(ctx, http.MethodPost, sandboxPath(s.ID, verb), nil, body, &sb); err != nil {
		return err
	}
	s.Sandbox = sb
	return nil
}

// Metrics returns the sandbox's resource accounting.
func (s *Sandbox) Metrics(ctx context.Context) (*api.Metrics, error) {
	var m api.Metrics
	if err := s.c.call(ctx, http.MethodGet, sandboxPath(s.ID, "metrics"), nil, nil, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// Usage returns the calling key's consumption by sandboxes alive during
// [from, to). Zero times take the daemon's defaults (the last 24 hours).
func (c *Client) Usage(ctx context.Context, from, to time.Time) (*api.Usage, error) {
	q := url.Values{}
	if !from.IsZero() {
		q.Set("from", from.UTC().Format(time.RFC3339))
	}
	if !to.IsZero() {
		q.Set("to", to.UTC().Format(time.RFC3339))
	}
	var u api.Usage
	if err := c.call(ctx, http.MethodGet, "/usage", q, nil, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// Ports lists the TCP ports processes in the sandbox listen on, with URLs
// that reach them through the daemon (API key or signed URL).
func (s *Sandbox) Ports(ctx context.Context) ([]api.Port, error) {
	var out api.ListPortsResponse
	if err := s.c.call(ctx, http.MethodGet, sandboxPath(s.ID, "ports"), nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Ports, nil
}

// SetNetwork replaces the sandbox's network policy; it applies at once,
// cutting connections that are no longer allowed. Any mode change works on
// a running sandbox: from off it gets its interface, to off every
// connection is cut and the interface removed.
func (s *Sandbox) SetNetwork(ctx context.Context, p api.NetworkPolicy) error {
	var sb api.Sandbox
	if err := s.c.call(ctx, http.MethodPatch, sandboxPath(s.ID, "network"), nil, p, &sb); err != nil {
		return err
	}
	s.Sandbox = sb
	return nil
}

// CreateSecret stores a secret for this API key. Sandboxes created with
// its name in Secrets see only a placeholder; the egress proxy puts the
// value in its place in requests to the secret's hosts.
func (c *Client) CreateSecret(ctx context.Context, req api.CreateSecretRequest) (*api.Secret, error) {
	var s api.Secret
	if err := c.call(ctx, http.MethodPost, "/secrets", nil, req, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Secrets lists this key's secrets (names and hosts, never values).
func (c *Client) Secrets(ctx context.Context) ([]api.Secret, error) {
	var out api.ListSecretsResponse
	if err := c.call(ctx, http.MethodGet, "/secrets", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Secrets, nil
}

// DeleteSecret removes one of this key's secrets.
func (c *Client) DeleteSecret(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodDelete, "/secrets/"+url.PathEscape(name), nil, nil, nil)
}
