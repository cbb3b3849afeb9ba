package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/paddock-sandbox/paddock/api"
)

func TestErrorFromBody(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		body     string
		wantCode string
		wantMsg  string
		sentinel error
	}{
		{"json not found", 404, `{"error":{"code":"not_found","message":"no sandbox sb_1"}}`, api.CodeNotFound, "no sandbox sb_1", ErrNotFound},
		{"json conflict", 409, `{"error":{"code":"conflict","message":"sandbox is paused"}}`, api.CodeConflict, "sandbox is paused", ErrConflict},
		{"json unknown template", 422, `{"error":{"code":"unknown_template","message":"x"}}`, api.CodeUnknownTemplate, "x", ErrUnknownTemplate},
		{"json no space", 507, `{"error":{"code":"no_space","message":"disk full"}}`, api.CodeNoSpace, "disk full", ErrNoSpace},
		{"plain text 401", 401, "bad key\nmore", api.CodeUnauthorized, "bad key", ErrUnauthorized},
		{"html 502", 502, "<html><body>Bad Gateway</body></html>", api.CodeUnavailable, "", ErrUnavailable},
		{"empty 503", 503, "", api.CodeNoCapacity, "", ErrNoCapacity},
		{"empty 413", 413, "", api.CodeTooLarge, "", ErrTooLarge},
		{"empty 429", 429, "", api.CodeLimitExceeded, "", ErrLimitExceeded},
		{"empty 400", 400, "", api.CodeBadRequest, "", ErrBadRequest},
		{"json without code", 404, `{"message":"nope"}`, api.CodeNotFound, `{"message":"nope"}`, ErrNotFound},
		{"unknown 5xx", 599, "", api.CodeInternal, "", ErrInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := errorFromBody(tt.status, []byte(tt.body))
			if e.StatusCode != tt.status || e.Code != tt.wantCode || e.Message != tt.wantMsg {
				t.Fatalf("got %+v, want status %d code %q message %q", e, tt.status, tt.wantCode, tt.wantMsg)
			}
			wrapped := fmt.Errorf("op: %w", e)
			if !errors.Is(wrapped, tt.sentinel) {
				t.Errorf("errors.Is(%v, %v) = false", wrapped, tt.sentinel)
			}
			if errors.Is(wrapped, ErrConflict) != (tt.sentinel == ErrConflict) {
				t.Errorf("errors.Is(%v, ErrConflict) wrong", wrapped)
			}
			var ae *APIError
			if !errors.As(wrapped, &ae) || ae != e {
				t.Errorf("errors.As did not find the *APIError")
			}
		})
	}
}

func TestAPIErrorIs(t *testing.T) {
	tests := []struct {
		name   string
		err    *APIError
		target error
		want   bool
	}{
		{"same code", &APIError{StatusCode: 404, Code: api.CodeNotFound}, ErrNotFound, true},
		{"code wins over status", &APIError{StatusCode: 400, Code: api.CodeNotFound}, ErrNotFound, true},
		{"different code same status", &APIError{StatusCode: 503, Code: api.CodeNoCapacity}, &APIError{StatusCode: 503, Code: "other"}, false},
		{"unknown code falls back on status", &APIError{StatusCode: 404, Code: "gone_fishing"}, ErrNotFound, true},
		{"unknown code other status", &APIError{StatusCode: 418, Code: "teapot"}, ErrNotFound, false},
		{"not an APIError", &APIError{StatusCode: 404, Code: api.CodeNotFound}, context.Canceled, false},
		{"nil target", &APIError{StatusCode: 404, Code: api.CodeNotFound}, (*APIError)(nil), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errors.Is(tt.err, tt.target); got != tt.want {
				t.Errorf("errors.Is = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAPIErrorMessage(t *testing.T) {
	tests := []struct {
		err  *APIError
		want string
	}{
		{&APIError{StatusCode: 404, Code: "not_found", Message: "no sandbox x"}, "no sandbox x (not_found)"},
		{&APIError{StatusCode: 503, Code: "no_capacity"}, "service unavailable (no_capacity)"},
		{&APIError{StatusCode: 418}, "i'm a teapot (HTTP 418)"},
		{&APIError{StatusCode: 599}, "HTTP 599"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseErrorLimitsBody(t *testing.T) {
	huge := strings.Repeat("x", 10*maxErrorBody)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(huge))
	}))
	defer srv.Close()
	_, err := New(srv.URL, "").Get(context.Background(), "sb")
	var ae *APIError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v, want *APIError", err)
	}
	if ae.Code != api.CodeInternal || len(ae.Message) > 300 {
		t.Errorf("got code %q and a %d-byte message", ae.Code, len(ae.Message))
	}
}

func TestNetworkErrorWrapped(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := New(url, "").Health(context.Background())
	if err == nil {
		t.Fatal("no error from a closed server")
	}
	var ae *APIError
	if errors.As(err, &ae) {
		t.Errorf("network error reported as API error: %v", err)
	}
	if errors.Unwrap(err) == nil {
		t.Errorf("network error %v is not wrapped", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := New(url, "").Health(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled request: err = %v, want context.Canceled", err)
	}
}
