package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
	"github.com/paddock-sandbox/paddock/tooluse"
)

// configureOnce runs configure on the session's first request (initialize,
// or server/discover, or the first call of a stateless client) and returns
// its error for that and every later request.
func (se *session) configureOnce(ctx context.Context, req sdk.Request) error {
	se.once.Do(func() { se.cfgErr = se.configure(ctx, req) })
	return se.cfgErr
}

// configure sets the session's SessionConfig from the server's options and,
// when Options.ClientConfig allows it, from the session's first request
// req: its ConfigHeader, the initialize request's
// capabilities.experimental[MetaKey], the capabilities a stateless client
// sends in _meta, and _meta[MetaKey] (later ones win field by field). A
// session attached to a sandbox checks at once that the sandbox exists and
// belongs to its key, so a wrong id fails the session's first request.
func (se *session) configure(ctx context.Context, req sdk.Request) error {
	cfg := se.srv.base
	if se.srv.opts.ClientConfig {
		fromClient, err := clientConfig(req)
		if err != nil {
			return err
		}
		cfg = cfg.merge(fromClient)
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("paddock session config: %w", err)
	}
	if cfg != nil && cfg.Sandbox != "" && se.srv.opts.PerCall {
		return errors.New("paddock session config: sandbox (attach) and per-call sandboxes exclude each other")
	}
	se.mu.Lock()
	se.cfg = cfg
	se.mu.Unlock()
	if cfg == nil || cfg.Sandbox == "" {
		return nil
	}
	_, _, err := se.current(ctx, req.GetExtra())
	return err
}

// clientConfig reads the SessionConfig a client sent with req, or nil.
func clientConfig(req sdk.Request) (*SessionConfig, error) {
	var sources []any
	if extra := req.GetExtra(); extra != nil && extra.Header != nil {
		if h := extra.Header.Get(ConfigHeader); h != "" {
			sources = append(sources, json.RawMessage(h))
		}
	}
	p := req.GetParams()
	if p == nil || reflect.ValueOf(p).IsNil() {
		return decodeConfigs(sources)
	}
	if ip, ok := p.(*sdk.InitializeParams); ok && ip.Capabilities != nil && ip.Capabilities.Experimental != nil {
		sources = append(sources, ip.Capabilities.Experimental[MetaKey])
	}
	if meta := p.GetMeta(); meta != nil {
		if caps, ok := meta[sdk.MetaKeyClientCapabilities].(map[string]any); ok {
			if exp, ok := caps["experimental"].(map[string]any); ok {
				sources = append(sources, exp[MetaKey])
			}
		}
		sources = append(sources, meta[MetaKey])
	}
	return decodeConfigs(sources)
}

// decodeConfigs decodes and merges the SessionConfigs in sources (JSON
// values; nil ones are skipped).
func decodeConfigs(sources []any) (*SessionConfig, error) {
	var cfg *SessionConfig
	for _, v := range sources {
		if v == nil {
			continue
		}
		b, ok := v.(json.RawMessage)
		if !ok {
			var err error
			if b, err = json.Marshal(v); err != nil {
				return nil, fmt.Errorf("paddock session config: %w", err)
			}
		}
		m := &SessionConfig{}
		if err := json.Unmarshal(b, m); err != nil {
			return nil, err
		}
		cfg = cfg.merge(m)
	}
	return cfg, nil
}

// toolOptions returns the tool options of the session: the server's, with
// the session's per-call timeout.
func (se *session) toolOptions() tooluse.Options {
	o := se.srv.opts.Tools
	if se.cfg != nil && se.cfg.Timeout > 0 {
		o.Timeout = time.Duration(se.cfg.Timeout * float64(time.Second))
	}
	return o
}

// attach returns a tool session running every call in the existing
// sandbox id, which it never deletes. The caller holds se.mu and has set
// se.c. The sandbox must be running: the session neither creates nor
// resumes sandboxes it does not own.
func (se *session) attach(ctx context.Context, id string) (*tooluse.Session, *client.Sandbox, error) {
	sb, err := se.c.Get(ctx, id)
	if err != nil {
		return nil, nil, fmt.Errorf("attaching to sandbox %s: %w", id, err)
	}
	if sb.State != api.StateRunning {
		return nil, nil, fmt.Errorf("attaching to sandbox %s: it is %s, not running", id, sb.State)
	}
	return tooluse.NewSession(se.c, se.toolOptions(), tooluse.WithSandbox(sb)), sb, nil
}

// attached reports whether the session runs in a sandbox it does not own.
func (se *session) attached() bool {
	return se.cfg != nil && se.cfg.Sandbox != ""
}
