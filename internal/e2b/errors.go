package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// toRPCError is the one mapping from Paddock's error classes to Connect
// codes (data plane).
func toRPCError(err error) *rpcError {
	var e *rpcError
	if errors.As(err, &e) {
		return e
	}
	var mbe *http.MaxBytesError
	code := codeInternal
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		code = codeNotFound
	case errors.Is(err, sandbox.ErrInvalid):
		code = codeInvalidArgument
	case errors.Is(err, sandbox.ErrConflict):
		code = codeFailedPrecondition
	case errors.Is(err, sandbox.ErrTooLarge), errors.As(err, &mbe), errors.Is(err, sandbox.ErrLimit),
		errors.Is(err, sandbox.ErrNoSpace):
		code = codeResourceExhausted
	case errors.Is(err, sandbox.ErrUnauthorized):
		code = codeUnauthenticated
	case errors.Is(err, sandbox.ErrUnavailable), errors.Is(err, sandbox.ErrNoCapacity):
		code = codeUnavailable
	case errors.Is(err, sandbox.ErrNotSupported):
		code = codeUnimplemented
	case errors.Is(err, context.DeadlineExceeded):
		code = codeDeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codeCanceled
	}
	return &rpcError{Code: code, Message: err.Error()}
}

// apiStatus is the one mapping from Paddock's error classes to the HTTP
// statuses of E2B's REST API (control plane and /files), whose SDKs turn
// 401 into AuthenticationError, 404 into NotFoundError (or
// SandboxNotFoundError), 429 into RateLimitError, 502 into TimeoutError.
func apiStatus(err error) int {
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, sandbox.ErrInvalid), errors.Is(err, sandbox.ErrUnknownTemplate):
		return http.StatusBadRequest
	case errors.Is(err, sandbox.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, sandbox.ErrUnauthorized):
		return http.StatusUnauthorized
	case errors.Is(err, sandbox.ErrTooLarge), errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, sandbox.ErrLimit):
		return http.StatusTooManyRequests
	case errors.Is(err, sandbox.ErrNoSpace):
		return http.StatusInsufficientStorage
	case errors.Is(err, sandbox.ErrNoCapacity):
		return http.StatusServiceUnavailable
	case errors.Is(err, sandbox.ErrUnavailable):
		return http.StatusBadGateway
	case errors.Is(err, sandbox.ErrNotSupported):
		return http.StatusNotImplemented
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// writeAPIError writes E2B's REST error body {code, message}.
func writeAPIError(w http.ResponseWriter, err error) {
	st := apiStatus(err)
	msg := err.Error()
	if st == http.StatusInternalServerError {
		msg = "internal error: " + msg
	}
	writeJSON(w, st, map[string]any{"code": st, "message": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
