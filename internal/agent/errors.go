package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/paddock-sandbox/paddock/api"
	"golang.org/x/sys/unix"
)

// apiError is an error with an API error code.
type apiError struct {
	Code string
	Msg  string
	Err  error
}

func (e *apiError) Error() string { return e.Msg }
func (e *apiError) Unwrap() error { return e.Err }

// status is the HTTP status that travels with e.Code.
func (e *apiError) status() int { return api.StatusOf(e.Code) }

func newError(code, format string, a ...any) error {
	return &apiError{Code: code, Msg: fmt.Sprintf(format, a...)}
}

func badRequest(format string, a ...any) error { return newError(api.CodeBadRequest, format, a...) }
func notFound(format string, a ...any) error   { return newError(api.CodeNotFound, format, a...) }
func conflict(format string, a ...any) error   { return newError(api.CodeConflict, format, a...) }
func tooLarge(format string, a ...any) error   { return newError(api.CodeTooLarge, format, a...) }

// toAPIError classifies err: API errors keep their code, body limits become
// too_large and file system errors map by errno.
func toAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return &apiError{Code: api.CodeTooLarge, Msg: fmt.Sprintf("body larger than %d bytes", mbe.Limit), Err: err}
	}
	code := api.CodeInternal
	var errno unix.Errno
	if errors.As(err, &errno) {
		switch errno {
		case unix.ENOENT:
			code = api.CodeNotFound
		case unix.ENOSPC, unix.EDQUOT:
			code = api.CodeNoSpace
		case unix.EEXIST, unix.ENOTEMPTY, unix.EBUSY, unix.ETXTBSY:
			code = api.CodeConflict
		case unix.ENOTDIR, unix.EISDIR, unix.ELOOP, unix.ENAMETOOLONG, unix.EINVAL,
			unix.EROFS, unix.EACCES, unix.EPERM, unix.EXDEV, unix.ENXIO, unix.ENODEV:
			code = api.CodeBadRequest
		case unix.EFBIG:
			code = api.CodeTooLarge
		case unix.EAGAIN:
			code = api.CodeLimitExceeded
		}
	}
	return &apiError{Code: code, Msg: err.Error(), Err: err}
}

// writeJSON writes v as the JSON answer with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decodeJSON reads one JSON value of at most limit bytes from r's body into
// v, rejecting unknown fields and trailing data. An empty body leaves v
// unchanged when allowEmpty is set.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any, limit int64, allowEmpty bool) error {
	if r.ContentLength > limit {
		return tooLarge("body larger than %d bytes", limit)
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return tooLarge("body larger than %d bytes", limit)
		case errors.Is(err, io.EOF) && allowEmpty:
			return nil
		case errors.Is(err, io.EOF):
			return badRequest("empty body: a JSON object is required")
		}
		return badRequest("invalid JSON body: %v", err)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return badRequest("invalid JSON body: trailing data after the object")
	}
	return nil
}
