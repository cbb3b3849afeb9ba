package kernel

import (
	"fmt"

	"github.com/paddock-sandbox/paddock/api"
)

// Error is an error with an API error code (api.Code*), for the agent to
// answer with.
type Error struct {
	Code string
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

func errorf(code, format string, a ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, a...)}
}

func badRequest(format string, a ...any) error { return errorf(api.CodeBadRequest, format, a...) }
