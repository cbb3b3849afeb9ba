// Package fakemodel is a local stand-in for hosted model APIs, for tests and
// examples: it speaks the wire formats of Anthropic's Messages API (JSON and
// SSE streaming), OpenAI's Chat Completions API and OpenAI's Responses API,
// validates requests the way those APIs do (a 400 with their error JSON
// otherwise: every tool call answered, tool results first, ids matching)
// and answers with turns decided by a Script, a scripted "model".
//
//	fake := fakemodel.New(fakemodel.Replies(
//		fakemodel.Turn{Calls: []fakemodel.Call{{Name: "run_python", Input: map[string]any{"code": "print(6*7)"}}}},
//		fakemodel.Turn{Text: "The answer is 42."},
//	))
//	srv := httptest.NewServer(fake)
//	// Anthropic SDK: option.WithBaseURL(srv.URL)
//	// OpenAI SDK:    option.WithBaseURL(srv.URL + "/v1")
//
// The Server records every request it received (Requests) together with
// the State it gave the script, so tests can assert on the conversation.
package fakemodel

import (
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/paddock-sandbox/paddock/tooluse"
)

// API names used in Request.API and State.API.
const (
	Anthropic = "anthropic"
	Chat      = "chat"
	Responses = "responses"
)

// Turn is one reply of the scripted model: optional text followed by
// optional tool calls. A turn with calls ends with stop_reason "tool_use"
// (Anthropic), finish_reason "tool_calls" (Chat) or function_call items
// (Responses).
type Turn struct {
	Text  string
	Calls []Call
	// Error, when set, makes the server answer with this API error
	// instead of a reply.
	Error *Error
}

// Call is a tool call of a Turn.
type Call struct {
	Name string
	// Input is marshalled to JSON; nil means {}.
	Input any
}

// Error is an API error the script asks the server to answer with.
type Error struct {
	// Status is the HTTP status (default 500).
	Status int
	// Type is the error type (default "api_error"; for example
	// "overloaded_error" or "rate_limit_error").
	Type    string
	Message string
}

// State is what the scripted model sees when it decides a turn.
type State struct {
	API   string
	Model string
	// Turn counts the assistant turns before this one in the
	// conversation: 0 for the first reply.
	Turn int
	// Prompt is the text of the conversation's first user message.
	Prompt string
	// Tools are the names of the tools the request offers (a response
	// continued with previous_response_id inherits none).
	Tools []string
	// Results are the tool results answering the previous turn's calls,
	// in the order they were sent.
	Results []Result
}

// Result is a tool result the client sent.
type Result struct {
	CallID string
	// Name is the name of the tool call the result answers.
	Name    string
	Content string
	// IsError is the Anthropic is_error flag (always false for OpenAI,
	// whose APIs have none).
	IsError bool
	// Images are the result's image blocks (Anthropic) or input_image
	// items (Responses).
	Images []Image
}

// Exec decodes the result as the JSON a Paddock run_* tool returns. Text
// after the JSON value is ignored: Claude Code appends its own
// <system-reminder> blocks to the tool results of MCP tools.
func (r Result) Exec() (tooluse.ExecOutput, error) {
	var out tooluse.ExecOutput
	err := json.NewDecoder(strings.NewReader(r.Content)).Decode(&out)
	return out, err
}

// Script decides the model's next turn.
type Script func(State) Turn

// Replies returns a script answering turn i with turns[i] whatever the
// tool results say; past the end it answers with a short text.
func Replies(turns ...Turn) Script {
	return func(st State) Turn {
		if st.Turn < len(turns) {
			return turns[st.Turn]
		}
		return Turn{Text: "The script has no more turns."}
	}
}

// Request is one request the server received.
type Request struct {
	API    string
	Path   string
	Header http.Header
	Body   json.RawMessage
	// Stream is set for a streaming request.
	Stream bool
	// Status is the HTTP status the server answered with; Error is the
	// error message it sent, if any.
	Status int
	Error  string
	// State is what the script was given; it is zero when the request
	// was rejected before the script ran.
	State State
}

// Server is the fake API server; it is an http.Handler and safe for
// concurrent use.
type Server struct {
	script Script

	scriptMu sync.Mutex // serializes script calls, so scripts may keep state

	key string // the one API key accepted; "" accepts any

	mu        sync.Mutex
	requests  []Request
	responses map[string]*storedResponse
	issued    map[string]issuedCall // by call id; nil without CheckReplays
}

// New returns a server driven by script.
func New(script Script, opts ...Option) *Server {
	s := &Server{script: script, responses: map[string]*storedResponse{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Requests returns a copy of the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// outcome is what an API handler reports for the record.
type outcome struct {
	status int
	err    string
	stream bool
	state  State
}

// ServeHTTP serves POST /v1/messages, /v1/chat/completions and
// /v1/responses.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	rec := Request{Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	var out outcome
	switch {
	case err != nil:
		out = outcome{status: http.StatusBadRequest, err: err.Error()}
		http.Error(w, err.Error(), out.status)
	case r.URL.Path == "/v1/messages":
		rec.API = Anthropic
		out = s.serveAnthropic(w, r, body)
	case r.URL.Path == "/v1/chat/completions":
		rec.API = Chat
		out = s.serveChat(w, r, body)
	case r.URL.Path == "/v1/responses":
		rec.API = Responses
		out = s.serveResponses(w, r, body)
	default:
		out = writeOpenAIError(w, http.StatusNotFound, "invalid_request_error", "", "unknown_url",
			"Invalid URL ("+r.Method+" "+r.URL.Path+")")
	}
	if out.status == 0 {
		out.status = http.StatusOK
	}
	rec.Status, rec.Error, rec.Stream, rec.State = out.status, out.err, out.stream, out.state
	s.mu.Lock()
	s.requests = append(s.requests, rec)
	s.mu.Unlock()
}

// decide runs the script.
func (s *Server) decide(st State) Turn {
	s.scriptMu.Lock()
	defer s.scriptMu.Unlock()
	return s.script(st)
}

// withDefaults returns the error with its defaults filled in.
func (e *Error) withDefaults() Error {
	out := *e
	if out.Status == 0 {
		out.Status = http.StatusInternalServerError
	}
	if out.Type == "" {
		out.Type = "api_error"
	}
	if out.Message == "" {
		out.Message = "Internal server error"
	}
	return out
}

// inputJSON renders a call's input as a JSON object.
func inputJSON(c Call) json.RawMessage {
	switch v := c.Input.(type) {
	case nil:
		return json.RawMessage("{}")
	case json.RawMessage:
		return v
	case string:
		return json.RawMessage(v)
	}
	b, err := json.Marshal(c.Input)
	if err != nil {
		return json.RawMessage("{}")
	}
	return b
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

const idChars = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newID returns prefix followed by n random base62 characters.
func newID(prefix string, n int) string {
	b := make([]byte, n)
	rand.Read(b)
	for i := range b {
		b[i] = idChars[int(b[i])%len(idChars)]
	}
	return prefix + string(b)
}

// tokens is a rough token count for usage fields.
func tokens(s string) int { return len(s)/4 + 1 }

// textOf returns the text of a content value that is a string or an array
// of parts with a "text" field.
func textOf(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String(), true
}
