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
	ErrBadRequest      = &APIError{StatusCode: http.StatusBadRequest, Code: api.CodeBadRequest}
	ErrUnauthorized    = &APIError{StatusCode: http.StatusUnauthorized, Code: api.CodeUnauthorized}
	ErrNotFound        = &APIError{StatusCode: http.StatusNotFound, Code: api.CodeNotFound}
	ErrConflict        = &APIError{StatusCode: http.StatusConflict, Code: api.CodeConflict}
	ErrTooLarge        = &APIError{StatusCode: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge}
	ErrUnknownTemplate = &APIError{StatusCode: http.StatusUnprocessableEntity, Code: api.CodeUnknownTemplate}
	ErrLimitExceeded   = &APIError{StatusCode: http.StatusTooManyRequests, Code: api.CodeLimitExceeded}
	ErrNoCapacity      = &APIError{StatusCode: http.StatusServiceUnavailable, Code: api.CodeNoCapacity}
	ErrInternal        = &APIError{StatusCode: http.StatusInternalServerError, Code: api.CodeInternal}
	ErrUnavailable     = &APIError{StatusCode: http.StatusBadGateway, Code: api.CodeUnavailable}
	ErrNoSpace         = &APIError{StatusCode: http.StatusInsufficientStorage, Code: api.CodeNoSpace}
	ErrNotSupported    = &APIError{StatusCode: http.StatusNotImplemented, Code: api.CodeNotSupported}
)

// statusForCode is the HTTP status an error code travels with; ok is false
// for codes this package does not know.
func statusForCode(code string) (status int, ok bool) {
	switch code {
	case api.CodeBadRequest:
		return http.StatusBadRequest, true
	case api.CodeUnauthorized:
		return http.StatusUnauthorized, true
	case api.CodeNotFound:
		return http.StatusNotFound, true
	case api.CodeConflict:
		return http.StatusConflict, true
	case api.CodeTooLarge:
		return http.StatusRequestEntityTooLarge, true
	case api.CodeUnknownTemplate:
		return http.StatusUnprocessableEntity, true
	case api.CodeLimitExceeded:
		return http.StatusTooManyRequests, true
	case api.CodeNoCapacity:
		return http.StatusServiceUnavailable, true
	case api.CodeInternal:
		return http.StatusInternalServerError, true
	case api.CodeUnavailable:
		return http.StatusBadGateway, true
	case api.CodeNoSpace:
		return http.StatusInsufficientStorage, true
	case api.CodeNotSupported:
		return http.StatusNotImplemented, true
	}
	return 0, false
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
	if _, known := statusForCode(e.Code); known && t.Code != "" {
		return e.Code == t.Code
	}
	return t.StatusCode != 0 && e.StatusCode == t.StatusCode
}

// codeForStatus is the error code of a status when the body carries none.
func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return api.CodeBadRequest
	case http.StatusUnauthorized, http.StatusForbidden:
		return api.CodeUnauthorized
	case http.StatusNotFound:
		return api.CodeNotFound
	case http.StatusConflict:
		return api.CodeConflict
	case http.StatusRequestEntityTooLarge:
		return api.CodeTooLarge
	case http.StatusUnprocessableEntity:
		return api.CodeUnknownTemplate
	case http.StatusTooManyRequests:
		return api.CodeLimitExceeded
	case http.StatusServiceUnavailable:
		return api.CodeNoCapacity
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		return api.CodeUnavailable
	case http.StatusInsufficientStorage:
		return api.CodeNoSpace
	case http.StatusNotImplemented:
		return api.CodeNotSupported
	}
	if status >= 500 {
		return api.CodeInternal
	}
	return ""
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
	e.Code = codeForStatus(status)
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
		return &APIError{StatusCode: http.StatusInternalServerError, Code: api.CodeInternal, Message: "stream error event without details"}
	}
	status, ok := statusForCode(b.Code)
	if !ok {
		status = http.StatusInternalServerError
	}
	return &APIError{StatusCode: status, Code: b.Code, Message: b.Message}
}
