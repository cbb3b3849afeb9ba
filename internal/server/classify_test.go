package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/template"
)

// TestClassify checks the error → code mapping and that each status is the
// one the code travels with in the generated table.
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err    error
		code   string
		status int
	}{
		{sandbox.ErrInvalid, api.CodeBadRequest, 400},
		{sandbox.ErrUnauthorized, api.CodeUnauthorized, 401},
		{fmt.Errorf("sandbox x: %w", sandbox.ErrNotFound), api.CodeNotFound, 404},
		{sandbox.ErrConflict, api.CodeConflict, 409},
		{sandbox.ErrTooLarge, api.CodeTooLarge, 413},
		{&http.MaxBytesError{Limit: 1}, api.CodeTooLarge, 413},
		{sandbox.ErrUnknownTemplate, api.CodeUnknownTemplate, 422},
		{sandbox.ErrLimit, api.CodeLimitExceeded, 429},
		{errors.New("boom"), api.CodeInternal, 500},
		{sandbox.ErrNotSupported, api.CodeNotSupported, 501},
		{sandbox.ErrUnavailable, api.CodeUnavailable, 502},
		{sandbox.ErrNoCapacity, api.CodeNoCapacity, 503},
		{context.DeadlineExceeded, api.CodeUnavailable, 504},
		{template.ErrBudget, api.CodeNoSpace, 507},
	} {
		code, st := classify(c.err)
		if code != c.code || st != c.status {
			t.Errorf("classify(%v) = %s %d, want %s %d", c.err, code, st, c.code, c.status)
		}
		if api.CodeOf(st) != code {
			t.Errorf("%v: status %d does not map back to %s", c.err, st, code)
		}
	}
}
