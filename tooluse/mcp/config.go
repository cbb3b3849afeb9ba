package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// MetaKey is the key under which a client passes its SessionConfig in the
// initialize request: in params._meta or in
// params.capabilities.experimental (which most client SDKs let callers set):
//
//	{"method": "initialize", "params": {"capabilities": {"experimental": {"paddock": {"template": "python", "sandbox_timeout": 3600}}}, ...}}
const MetaKey = "paddock"

// ConfigHeader is the HTTP header of an initialize request that carries a
// SessionConfig as JSON. paddockd sets it from the query of /v1/mcp
// (see ParseQuery); a client may send it itself.
const ConfigHeader = "Paddock-Mcp-Config"

// maxSessionTimeout bounds SessionConfig.Timeout (per call) and
// SessionConfig.SandboxTimeout (the lease), like the REST API does.
const maxSessionTimeout = api.MaxExecTimeoutSeconds

// SessionConfig is what one MCP session may choose for itself when
// Options.ClientConfig allows it: an existing sandbox to attach to, or the
// options its own sandbox is created with. Zero fields keep the server's
// options.
type SessionConfig struct {
	// Sandbox is the id of an existing sandbox of the session's key to run
	// every call in. The session never deletes it (nor replaces it when it
	// is gone). Exclusive with the create options below.
	Sandbox string `json:"sandbox,omitempty"`
	// Template of the session's sandbox.
	Template string `json:"template,omitempty"`
	// SandboxTimeout is the lease of the session's sandbox, in seconds.
	SandboxTimeout int64 `json:"sandbox_timeout,omitempty"`
	// Timeout bounds each tool call's command, in seconds.
	Timeout float64 `json:"timeout,omitempty"`
	// Network is the egress policy of the session's sandbox.
	Network *api.NetworkPolicy `json:"network,omitempty"`
}

// UnmarshalJSON also accepts "network" as a mode string ("off", "full").
func (c *SessionConfig) UnmarshalJSON(b []byte) error {
	type plain SessionConfig
	var raw struct {
		plain
		Network json.RawMessage `json:"network,omitempty"`
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return fmt.Errorf("paddock session config: %w", err)
	}
	*c = SessionConfig(raw.plain)
	if len(raw.Network) == 0 || string(raw.Network) == "null" {
		return nil
	}
	var mode string
	if json.Unmarshal(raw.Network, &mode) == nil {
		c.Network = &api.NetworkPolicy{Mode: mode}
		return nil
	}
	c.Network = &api.NetworkPolicy{}
	if err := json.Unmarshal(raw.Network, c.Network); err != nil {
		return fmt.Errorf("paddock session config: network: %w", err)
	}
	return nil
}

// ParseQuery reads a SessionConfig from URL query parameters:
//
//	sandbox=ID               attach to an existing sandbox
//	template=NAME
//	sandbox_timeout=SECONDS  the lease; also a duration like 1h
//	timeout=SECONDS          per tool call; also a duration like 2m
//	network=off|allowlist|full
//	allow=HOST,...           with network=allowlist (repeatable)
//
// It returns nil when none is set, and an error naming the parameter for a
// bad value.
func ParseQuery(q url.Values) (*SessionConfig, error) {
	c := &SessionConfig{Sandbox: q.Get("sandbox"), Template: q.Get("template")}
	if v := q.Get("sandbox_timeout"); v != "" {
		d, err := parseSeconds("sandbox_timeout", v)
		if err != nil {
			return nil, err
		}
		if d != float64(int64(d)) {
			return nil, errors.New("sandbox_timeout must be whole seconds")
		}
		c.SandboxTimeout = int64(d)
	}
	if v := q.Get("timeout"); v != "" {
		d, err := parseSeconds("timeout", v)
		if err != nil {
			return nil, err
		}
		c.Timeout = d
	}
	var allow []string
	for _, v := range q["allow"] {
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				allow = append(allow, h)
			}
		}
	}
	if m := q.Get("network"); m != "" || len(allow) > 0 {
		if m == "" {
			m = api.NetworkAllowlist
		}
		c.Network = &api.NetworkPolicy{Mode: m, Allow: allow}
	}
	if *c == (SessionConfig{}) {
		return nil, nil
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// parseSeconds reads seconds ("90", "1.5") or a Go duration ("2m").
func parseSeconds(name, v string) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		d, derr := time.ParseDuration(v)
		if derr != nil {
			return 0, fmt.Errorf("%s must be seconds or a duration like 1h, got %q", name, v)
		}
		f = d.Seconds()
	}
	if f <= 0 || f > maxSessionTimeout {
		return 0, fmt.Errorf("%s must be more than 0 and at most %d seconds, got %q", name, maxSessionTimeout, v)
	}
	return f, nil
}

// Validate checks c's values; the daemon checks the rest (template names,
// network policies) when the sandbox is created.
func (c *SessionConfig) Validate() error {
	if c == nil {
		return nil
	}
	if c.Sandbox != "" && (c.Template != "" || c.SandboxTimeout != 0 || c.Network != nil) {
		return errors.New("sandbox (attach to an existing sandbox) excludes template, sandbox_timeout and network")
	}
	if len(c.Sandbox) > 128 || strings.ContainsAny(c.Sandbox, "/?#% ") {
		return fmt.Errorf("sandbox %q is not a sandbox id", c.Sandbox)
	}
	if c.SandboxTimeout < 0 || c.SandboxTimeout > maxSessionTimeout {
		return fmt.Errorf("sandbox_timeout must be from 1 to %d seconds", maxSessionTimeout)
	}
	if c.Timeout < 0 || c.Timeout > maxSessionTimeout {
		return fmt.Errorf("timeout must be more than 0 and at most %d seconds", maxSessionTimeout)
	}
	if c.Network != nil {
		switch c.Network.Mode {
		case api.NetworkOff, api.NetworkAllowlist, api.NetworkFull:
		default:
			return fmt.Errorf("network must be off, allowlist or full, got %q", c.Network.Mode)
		}
	}
	return nil
}

// apply returns the create request req changed by c (req is not modified).
func (c *SessionConfig) apply(req api.CreateSandboxRequest) api.CreateSandboxRequest {
	if c == nil {
		return req
	}
	if c.Template != "" {
		req.Template = c.Template
	}
	if c.SandboxTimeout > 0 {
		req.TimeoutSeconds = c.SandboxTimeout
	}
	if c.Network != nil {
		n := *c.Network
		req.Network = &n
	}
	return req
}

// merge returns c with the fields of o that are set on top.
func (c *SessionConfig) merge(o *SessionConfig) *SessionConfig {
	if o == nil {
		return c
	}
	if c == nil {
		return o
	}
	out := *c
	if o.Sandbox != "" {
		out.Sandbox = o.Sandbox
	}
	if o.Template != "" {
		out.Template = o.Template
	}
	if o.SandboxTimeout != 0 {
		out.SandboxTimeout = o.SandboxTimeout
	}
	if o.Timeout != 0 {
		out.Timeout = o.Timeout
	}
	if o.Network != nil {
		out.Network = o.Network
	}
	return &out
}
