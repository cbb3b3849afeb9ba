package manager_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// TestValidateSurface: lease lengths near int64 and metadata keys with
// control characters are refused as invalid (issue 16, item 10), not
// turned into a lease ending in 1734 or a key of "\x00".
func TestValidateSurface(t *testing.T) {
	tm := newTestManager(t)
	for _, tc := range []struct {
		name string
		req  sandbox.CreateRequest
	}{
		{"timeout near int64", sandbox.CreateRequest{TimeoutSeconds: math.MaxInt64}},
		{"timeout overflowing as a Duration", sandbox.CreateRequest{TimeoutSeconds: math.MaxInt64/1_000_000_000 + 1}},
		{"metadata key NUL", sandbox.CreateRequest{Metadata: map[string]string{"\x00": "v"}}},
		{"metadata key newline", sandbox.CreateRequest{Metadata: map[string]string{"a\nb": "v"}}},
		{"metadata value NUL", sandbox.CreateRequest{Metadata: map[string]string{"k": "a\x00"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tm.m.Create(context.Background(), "alice", tc.req); !errors.Is(err, sandbox.ErrInvalid) {
				t.Fatalf("create: %v, want ErrInvalid", err)
			}
		})
	}
	rec := tm.create("alice", sandbox.CreateRequest{TimeoutSeconds: 60})
	if _, err := tm.m.SetTimeout(context.Background(), "alice", rec.ID, math.MaxInt64); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("SetTimeout(MaxInt64): %v, want ErrInvalid", err)
	}
}
