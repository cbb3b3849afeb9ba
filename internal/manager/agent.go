package manager

import (
	"context"
	"fmt"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// RunningAny returns sandbox id if it is running, whoever owns it. Only for
// callers that authorized the request some other way (signed port URLs).
// Like Running it counts as activity and wakes an auto_resume sandbox.
func (m *Manager) RunningAny(ctx context.Context, id string) (*store.Record, error) {
	r, err := m.store.Get(id)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	return m.wake(ctx, r)
}
