// Package mcp serves the Paddock tools (run_python, run_command, write_file,
// read_file; see package tooluse) as a Model Context Protocol server, built
// on the official Go SDK (github.com/modelcontextprotocol/go-sdk/mcp).
//
// Each MCP session gets its own tooluse.Session and so its own sandbox,
// created on the session's first tool call and deleted when the session
// ends (the client disconnects, the session is closed, an idle timeout
// fires) or when the Server is closed. A sandbox whose lease ran out, or
// that was deleted behind the session's back, is replaced on the next call,
// whose result says so. Sandboxes carry the metadata MetadataKey = the MCP
// session's id.
//
// Over stdio (one session per process):
//
//	s := mcp.New(client.New("", ""), mcp.Options{})
//	err := s.Run(ctx, &sdk.StdioTransport{})
//	s.Close(context.Background())
//
// Over streamable HTTP, behind the caller's own authentication:
//
//	http.Handle("/mcp", s.HTTPHandler(&sdk.StreamableHTTPOptions{SessionTimeout: 5 * time.Minute}))
//
// A session may instead be attached to an existing sandbox (Options.Attach,
// or SessionConfig.Sandbox from the client when Options.ClientConfig allows
// it), which it never deletes; see config.go for the options a client may
// choose.
package mcp

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
	"github.com/paddock-sandbox/paddock/tooluse"
)

// MetadataKey is the sandbox metadata key whose value is the id of the MCP
// session the sandbox belongs to.
const MetadataKey = "paddock.mcp_session"

// DefaultMaxSessions bounds the concurrent MCP sessions of a Server when
// Options.MaxSessions is 0.
const DefaultMaxSessions = 256

// ErrTooManySessions is returned to a client whose session would exceed
// Options.MaxSessions.
var ErrTooManySessions = errors.New("too many MCP sessions on this server; close one or retry later")

// methodDiscover is the stateless discovery request of newer clients.
const methodDiscover = "server/discover"

// ErrTooManyKeySessions refuses a session past Options.MaxSessionsPerKey.
var ErrTooManyKeySessions = errors.New("too many MCP sessions for this API key; close one or retry later")

// ClientFunc returns the Paddock client that a new MCP session's tools act
// with. It is called once per session, on its first tool call; extra holds
// the HTTP headers and bearer token info of that request (nil fields over
// stdio).
type ClientFunc func(ctx context.Context, extra *sdk.RequestExtra) (*client.Client, error)

// Options configure a Server. Zero values take defaults.
type Options struct {
	// Tools configures the tool definitions and their execution (timeout
	// per call, output budget, tool selection).
	Tools tooluse.Options
	// Sandbox is the request each session's sandboxes are created with;
	// MetadataKey is added to its metadata.
	Sandbox *api.CreateSandboxRequest
	// PerCall gives every tool call a fresh sandbox, deleted afterwards,
	// instead of one sandbox per session.
	PerCall bool
	// Attach is the id of an existing sandbox every session runs its calls
	// in, instead of a sandbox of its own; it is never deleted, nor
	// replaced when it is gone. Exclusive with PerCall.
	Attach string
	// ClientConfig lets each session choose its SessionConfig (an existing
	// sandbox to attach to, template, lease, per-call timeout, network)
	// with its initialize request: _meta[MetaKey], and the HTTP header
	// ConfigHeader. Off, both are ignored.
	ClientConfig bool
	// MaxSessions bounds the concurrent MCP sessions (DefaultMaxSessions
	// when 0); a session past it is refused.
	MaxSessions int
	// MaxSessionsPerKey bounds the concurrent sessions of one key, as
	// SessionKey names it (0: MaxSessions only).
	MaxSessionsPerKey int
	// SessionKey names the key (an API key id) a session counts against
	// for MaxSessionsPerKey, from its first request.
	SessionKey func(extra *sdk.RequestExtra) string
	// Client, when set, picks each session's client; otherwise every
	// session uses the client given to New.
	Client ClientFunc
	// Version is reported to clients as the server's version.
	Version string
	// Logger receives warnings (failed sandbox deletions); nil discards.
	Logger *slog.Logger
}

// Server is an MCP server of the Paddock tools. It is safe for concurrent
// use by many MCP sessions.
type Server struct {
	srv  *sdk.Server
	opts Options
	base *SessionConfig // from Options.Attach; nil: none
	c    *client.Client
	log  *slog.Logger

	mu       sync.Mutex
	sessions map[*sdk.ServerSession]*session
	closed   bool
	wg       sync.WaitGroup // one per session: waits for its end, then releases it
}

// New returns a Server whose sessions act with c (unless opts.Client is
// set).
func New(c *client.Client, opts Options) *Server {
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.Version == "" {
		opts.Version = client.Version
	}
	s := &Server{opts: opts, c: c, log: opts.Logger, sessions: map[*sdk.ServerSession]*session{}}
	if opts.Attach != "" {
		s.base = &SessionConfig{Sandbox: opts.Attach}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.srv = sdk.NewServer(&sdk.Implementation{Name: "paddock", Title: "Paddock sandbox", Version: opts.Version}, &sdk.ServerOptions{
		Instructions: "Tools that run code in a Paddock sandbox: an isolated Linux machine kept for this session. " +
			"Files written by one call are there for the next; the working directory is /workspace.",
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}},
	})
	s.srv.AddReceivingMiddleware(s.track)
	for _, t := range tooluse.Tools(opts.Tools) {
		s.srv.AddTool(&sdk.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}, s.handler(t.Name))
	}
	return s
}

// MCP returns the underlying go-sdk server, for transports other than the
// ones Run and HTTPHandler cover.
func (s *Server) MCP() *sdk.Server { return s.srv }

// Run serves one MCP session over t (for example &sdk.StdioTransport{})
// until the client disconnects or ctx is done, then closes the Server,
// deleting the session's sandbox, before returning. It suits a server with
// a single session, such as one on stdio.
func (s *Server) Run(ctx context.Context, t sdk.Transport) error {
	err := s.srv.Run(ctx, t)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		err = nil
	}
	return errors.Join(err, s.Close(context.WithoutCancel(ctx)))
}

// HTTPHandler returns a streamable HTTP handler (GET, POST and DELETE on
// one endpoint) serving this server's tools. Authentication is the
// caller's business: wrap the handler. opts.SessionTimeout should be set so
// that abandoned sessions end and release their sandboxes.
func (s *Server) HTTPHandler(opts *sdk.StreamableHTTPOptions) http.Handler {
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.srv }, opts)
}

// Sessions returns the number of live MCP sessions.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// Close ends every MCP session, deletes their sandboxes and refuses new
// sessions. It waits for the deletions until ctx is done.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	live := make([]*sdk.ServerSession, 0, len(s.sessions))
	for ss := range s.sessions {
		live = append(live, ss)
	}
	s.mu.Unlock()
	for _, ss := range live {
		ss.Close()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("mcp: closing sessions: %w", ctx.Err())
	}
}

// track is a receiving middleware that registers a session on its first
// request (initialize, or a call) and refuses sessions past MaxSessions.
//
// The stateless server/discover probe (SEP-2575) is refused as not found
// before anything is counted: clients then fall back to initialize, as the
// spec says. Counted, each probe was a session of its own that ended a
// moment later, so a client's initialize right after it could be refused
// for a session the same client was already done with.
func (s *Server) track(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if method == methodDiscover {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "server/discover is not supported; use initialize"}
		}
		if ss, ok := req.GetSession().(*sdk.ServerSession); ok {
			key := ""
			if s.opts.SessionKey != nil {
				key = s.opts.SessionKey(req.GetExtra())
			}
			se, err := s.sessionOf(ss, key)
			if err != nil {
				return nil, err
			}
			if err := se.configureOnce(ctx, req); err != nil {
				return nil, err
			}
		}
		return next(ctx, method, req)
	}
}

// session returns the state of ss, registering it (and a goroutine that
// releases it when ss ends) the first time.
func (s *Server) session(ss *sdk.ServerSession) (*session, error) { return s.sessionOf(ss, "") }

// sessionOf is session for a session counted against key.
func (s *Server) sessionOf(ss *sdk.ServerSession, key string) (*session, error) {
	if ss == nil {
		return nil, errors.New("no MCP session")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if se, ok := s.sessions[ss]; ok {
		return se, nil
	}
	if s.closed {
		return nil, errors.New("the MCP server is shutting down")
	}
	if len(s.sessions) >= s.opts.MaxSessions {
		return nil, ErrTooManySessions
	}
	if n := s.opts.MaxSessionsPerKey; n > 0 && key != "" {
		held := 0
		for _, se := range s.sessions {
			if se.key == key {
				held++
			}
		}
		if held >= n {
			return nil, ErrTooManyKeySessions
		}
	}
	id := ss.ID()
	if id == "" {
		id = "mcp_" + rand.Text()[:16]
	}
	se := &session{srv: s, id: id, key: key}
	s.sessions[ss] = se
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ss.Wait()
		s.mu.Lock()
		delete(s.sessions, ss)
		s.mu.Unlock()
		if err := se.close(); err != nil {
			s.log.Warn("mcp: deleting the session's sandbox failed", "session", se.id, "err", err)
		}
	}()
	return se, nil
}

// handler returns the tools/call handler of the tool name.
func (s *Server) handler(name string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		se, err := s.session(req.Session)
		if err != nil {
			return errorResult(err.Error()), nil
		}
		var args json.RawMessage
		if req.Params != nil {
			args = req.Params.Arguments
		}
		note, res := se.call(ctx, req.Extra, name, args)
		out := &sdk.CallToolResult{IsError: res.IsError}
		if note != "" {
			out.Content = append(out.Content, &sdk.TextContent{Text: note})
		}
		out.Content = append(out.Content, &sdk.TextContent{Text: res.Text})
		for _, img := range res.Images { // run_code figures
			if data, err := base64.StdEncoding.DecodeString(img.Data); err == nil {
				out.Content = append(out.Content, &sdk.ImageContent{MIMEType: img.MediaType, Data: data})
			}
		}
		return out, nil
	}
}

func errorResult(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "error: " + msg}}}
}
