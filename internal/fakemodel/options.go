package fakemodel

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
)

// Option configures a Server.
type Option func(*Server)

// APIKey makes the server accept only key (Anthropic: x-api-key or a
// bearer token; OpenAI: a bearer token), as the real APIs refuse a wrong
// key with 401. Without it any non-empty key is accepted.
func APIKey(key string) Option { return func(s *Server) { s.key = key } }

// CheckReplays makes the server refuse a conversation that hands back a
// tool call the model never sent, or sends one back changed (another name
// or input): a client must return the model's turns as they came. The
// real APIs do not check this; clients that rebuild the history by hand
// get it wrong, so the fake does.
func CheckReplays() Option {
	return func(s *Server) { s.issued = map[string]issuedCall{} }
}

// issuedCall is a tool call the server sent, for CheckReplays.
type issuedCall struct {
	name  string
	input any // the decoded JSON input
}

// keyOK reports whether got is an acceptable API key.
func (s *Server) keyOK(got string) bool {
	return got != "" && (s.key == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.key)) == 1)
}

// bearerToken returns r's bearer token, or "".
func bearerToken(r *http.Request) string {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if tok == r.Header.Get("Authorization") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// issue records a tool call the server is sending, when CheckReplays is on.
func (s *Server) issue(id, name string, input json.RawMessage) {
	if s.issued == nil {
		return
	}
	var v any
	json.Unmarshal(input, &v)
	s.mu.Lock()
	s.issued[id] = issuedCall{name: name, input: v}
	s.mu.Unlock()
}

// replayed reports whether a tool call handed back by a client is one the
// server sent, unchanged; always true without CheckReplays.
func (s *Server) replayed(id, name string, input json.RawMessage) bool {
	if s.issued == nil {
		return true
	}
	var v any
	if json.Unmarshal(input, &v) != nil {
		return false
	}
	s.mu.Lock()
	c, ok := s.issued[id]
	s.mu.Unlock()
	return ok && c.name == name && reflect.DeepEqual(c.input, v)
}

// replayError is the message of a request that fails CheckReplays.
func replayError(at, id string) string {
	return at + ": fakemodel: tool call " + id + " is not one the model sent, or was changed (send the model's turns back as they came)"
}
