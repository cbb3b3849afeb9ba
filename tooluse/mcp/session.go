package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
	"github.com/paddock-sandbox/paddock/tooluse"
)

// checkTimeout bounds the request that checks whether a session's sandbox
// still exists.
const checkTimeout = 10 * time.Second

// session is the state of one MCP session: the client it acts with and
// the tooluse.Session holding its sandbox, both made on the first call.
type session struct {
	srv *Server
	id  string
	key string // what the session counts against (Options.SessionKey)

	once   sync.Once
	cfgErr error // configure's error, answered to every request

	mu     sync.Mutex
	cfg    *SessionConfig // set by configure on the first request; nil: the server's options
	c      *client.Client
	ts     *tooluse.Session
	sb     *client.Sandbox // ts's sandbox once known; nil in per-call mode
	closed bool
}

// call runs the tool name with args in the session's sandbox. note is set
// when the call had to replace a sandbox that is gone; it tells the model
// that earlier files are lost.
func (se *session) call(ctx context.Context, extra *sdk.RequestExtra, name string, args json.RawMessage) (note string, res tooluse.Result) {
	ts, sb, err := se.current(ctx, extra)
	if err != nil {
		return "", errResult("sandbox unavailable: %v", err)
	}
	if sb != nil && !time.Now().Before(sb.ExpiresAt) {
		// The lease has run out (unless someone extended it): check before
		// sending a call that would fail.
		if why := se.gone(ctx, sb); why != "" {
			if ts, sb, note, err = se.replace(ctx, ts, sb, why); err != nil {
				return note, errResult("sandbox unavailable: %v", err)
			}
		}
	}
	res = ts.Call(ctx, name, args)
	if !res.IsError || sb == nil || note != "" {
		return note, res
	}
	// A failure may come from a sandbox that was deleted or expired early.
	why := se.gone(ctx, sb)
	if why == "" {
		return "", res
	}
	if ts, _, note, err = se.replace(ctx, ts, sb, why); err != nil {
		return note, errResult("sandbox unavailable: %v", err)
	}
	return note, ts.Call(ctx, name, args)
}

// current returns the session's tool session and sandbox, making them on
// first use. The sandbox is nil in per-call mode.
func (se *session) current(ctx context.Context, extra *sdk.RequestExtra) (*tooluse.Session, *client.Sandbox, error) {
	se.mu.Lock()
	defer se.mu.Unlock()
	if se.closed {
		return nil, nil, errors.New("the MCP session has ended")
	}
	if se.c == nil {
		c := se.srv.c
		if se.srv.opts.Client != nil {
			var err error
			if c, err = se.srv.opts.Client(ctx, extra); err != nil {
				return nil, nil, err
			}
		}
		if c == nil {
			return nil, nil, errors.New("no Paddock client configured")
		}
		se.c = c
	}
	if se.ts == nil && se.attached() {
		ts, sb, err := se.attach(ctx, se.cfg.Sandbox)
		if err != nil {
			return nil, nil, err
		}
		se.ts, se.sb = ts, sb
	}
	if se.ts == nil {
		se.ts = se.newToolSession()
	}
	if se.srv.opts.PerCall {
		return se.ts, nil, nil
	}
	if se.sb == nil {
		sb, err := se.ts.Sandbox(ctx)
		if err != nil {
			return nil, nil, err
		}
		se.sb = sb
	}
	return se.ts, se.sb, nil
}

// replace swaps the tool session old, whose sandbox sb is gone for the
// reason why, for a new one with a new sandbox, unless a concurrent call
// did it already. It returns the note for the model.
func (se *session) replace(ctx context.Context, old *tooluse.Session, sb *client.Sandbox, why string) (*tooluse.Session, *client.Sandbox, string, error) {
	se.mu.Lock()
	defer se.mu.Unlock()
	if se.closed {
		return nil, nil, "", errors.New("the MCP session has ended")
	}
	if se.attached() {
		return nil, nil, "", fmt.Errorf("sandbox %s, which this session is attached to, is gone (%s)", sb.ID, why)
	}
	note := fmt.Sprintf("note: the sandbox of this session (%s) is gone (%s), so this call ran in a new, empty sandbox: "+
		"files written by earlier calls are lost.", sb.ID, why)
	if se.ts != old && se.sb != nil {
		return se.ts, se.sb, note, nil
	}
	if err := old.Close(); err != nil {
		se.srv.log.Warn("mcp: deleting a gone sandbox failed", "session", se.id, "sandbox", sb.ID, "err", err)
	}
	se.ts, se.sb = se.newToolSession(), nil
	nsb, err := se.ts.Sandbox(ctx)
	if err != nil {
		return nil, nil, note, err
	}
	se.sb = nsb
	return se.ts, nsb, note, nil
}

// gone reports why the sandbox sb can no longer run commands ("expired",
// "deleted", ...), or "" when it still can or when that is unknown.
func (se *session) gone(ctx context.Context, sb *client.Sandbox) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkTimeout)
	defer cancel()
	cur, err := sb.Client().Get(ctx, sb.ID)
	switch {
	case errors.Is(err, client.ErrNotFound):
		return "deleted"
	case err != nil:
		return ""
	case cur.State == api.StateRunning || cur.State == api.StateCreating:
		return ""
	case cur.Reason != "":
		return cur.Reason
	}
	return cur.State
}

// newToolSession returns a tool session whose sandboxes are tagged with
// the MCP session id. The caller holds se.mu and has set se.c.
func (se *session) newToolSession() *tooluse.Session {
	req := api.CreateSandboxRequest{}
	if se.srv.opts.Sandbox != nil {
		req = *se.srv.opts.Sandbox
	}
	req = se.cfg.apply(req)
	req.Metadata = maps.Clone(req.Metadata)
	if req.Metadata == nil {
		req.Metadata = map[string]string{}
	}
	req.Metadata[MetadataKey] = se.id
	sopts := []tooluse.SessionOption{tooluse.WithCreateRequest(&req)}
	if se.srv.opts.PerCall {
		sopts = append(sopts, tooluse.PerCall())
	}
	return tooluse.NewSession(se.c, se.toolOptions(), sopts...)
}

// close deletes the session's sandbox and refuses further calls.
func (se *session) close() error {
	se.mu.Lock()
	defer se.mu.Unlock()
	se.closed = true
	if se.ts == nil {
		return nil
	}
	return se.ts.Close()
}

func errResult(format string, a ...any) tooluse.Result {
	return tooluse.Result{Text: "error: " + fmt.Sprintf(format, a...), IsError: true}
}
