package client

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/paddock-sandbox/paddock/api"
)

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// APIError is an error answer of paddockd: its HTTP status, the api.Code*
// code and the human message. Compare it with the Err* sentinels through
// errors.Is:
//
//	if errors.Is(err, client.ErrNotFound) { ... }
type APIError struct {
	StatusCode int
	Code       string
	Message    string
}

// Sentinel errors, one per api.Code* constant. errors.Is(err, ErrNotFound)
// reports whether err is an *APIError with that code.
var (
	ErrBadRequest      = sentinel(api.CodeBadRequest)
	ErrUnauthorized    = sentinel(api.CodeUnauthorized)
	ErrNotFound        = sentinel(api.CodeNotFound)
	ErrConflict        = sentinel(api.CodeConflict)
	ErrTooLarge        = sentinel(api.CodeTooLarge)
	ErrUnknownTemplate = sentinel(api.CodeUnknownTemplate)
	ErrLimitExceeded   = sentinel(api.CodeLimitExceeded)
	ErrNoCapacity      = sentinel(api.CodeNoCapacity)
	ErrInternal        = sentinel(api.CodeInternal)
	ErrUnavailable     = sentinel(api.CodeUnavailable)
	ErrNoSpace         = sentinel(api.CodeNoSpace)
	ErrNotSupported    = sentinel(api.CodeNotSupported)
)

// sentinel is the *APIError of a code, with the status it travels with
// (api.StatusOf, generated from api/openapi.yaml).
func sentinel(code string) *APIError {
	return &APIError{StatusCode: api.StatusOf(code), Code: code}
}

// Error returns the server's message followed by the code, for example
// "sandbox sb_1 not found (not_found)".
func (e *APIError) Error() string {
	code := e.Code
	if code == "" {
		code = fmt.Sprintf("HTTP %d", e.StatusCode)
	}
	if e.Message == "" {
		if text := http.StatusText(e.StatusCode); text != "" {
			return fmt.Sprintf("%s (%s)", strings.ToLower(text), code)
		}
		return code
	}
	return fmt.Sprintf("%s (%s)", e.Message, code)
}

// Is reports whether target is an *APIError with the same code. When e has
// a code this package does not know (a newer daemon), the HTTP status is
// compared instead, so errors.Is(err, ErrNotFound) still holds for any 404.
func (e *APIError) Is(target error) bool {
	t, ok := target.(*APIError)
	if !ok || t == nil {
		return false
	}
	if api.KnownCode(e.Code) && t.Code != "" {
		return e.Code == t.Code
	}
	return t.StatusCode != 0 && e.StatusCode == t.StatusCode
}

// parseError builds the *APIError of a non-2xx response from at most
// maxErrorBody bytes of its body. Bodies that are not the JSON error format
// (a proxy's HTML page, plain text) fall back on the status code.
func parseError(resp *http.Response) *APIError {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return errorFromBody(resp.StatusCode, body)
}

func errorFromBody(status int, body []byte) *APIError {
	e := &APIError{StatusCode: status}
	var er api.ErrorResponse
	if json.Unmarshal(body, &er) == nil && er.Error.Code != "" {
		e.Code = er.Error.Code
		e.Message = er.Error.Message
		return e
	}
	e.Code = api.CodeOf(status)
	e.Message = plainMessage(body)
	return e
}

// plainMessage turns a non-JSON error body into a one-line message, or ""
// when it is empty, binary or HTML.
func plainMessage(body []byte) string {
	s := strings.TrimSpace(string(body))
	if s == "" || !utf8.ValidString(s) || strings.HasPrefix(s, "<") {
		return ""
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	const max = 200
	if len(s) > max {
		s = s[:max] + "..."
	}
	return s
}

// eventError turns the error of an error stream event into an *APIError.
func eventError(b *api.ErrorBody) *APIError {
	if b == nil {
		return &APIError{StatusCode: api.StatusOf(api.CodeInternal), Code: api.CodeInternal, Message: "stream error event without details"}
	}
	return &APIError{StatusCode: api.StatusOf(b.Code), Code: b.Code, Message: b.Message}
}
