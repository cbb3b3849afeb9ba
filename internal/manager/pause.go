package manager

import (
	"context"
	"fmt"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// Pause freezes owner's running sandbox. Its lease is replaced by the
// pause retention: a paused sandbox is terminated once it has been paused
// for PauseRetention unless resumed first.
func (m *Manager) Pause(ctx context.Context, owner, id string) (*store.Record, error) {
	if _, err := m.Get(ctx, owner, id); err != nil {
		return nil, err
	}
	return m.pause(ctx, id, "paused")
}

func (m *Manager) pause(ctx context.Context, id, reason string) (*store.Record, error) {
	p, ok := m.backend.(sandbox.Pauser)
	if !ok {
		return nil, fmt.Errorf("%w: this backend cannot pause sandboxes", sandbox.ErrNotSupported)
	}
	unlock := m.lockID(id)
	defer unlock()
	r, err := m.store.Get(id)
	if err != nil {
		return nil, err
	}
	if r.State != sandbox.Running {
		return nil, fmt.Errorf("%w: sandbox %s is %s, not running", sandbox.ErrConflict, id, r.State)
	}
	m.finalSample(ctx, id) // bill its running time up to now
	if err := p.Pause(ctx, id); err != nil {
		return nil, fmt.Errorf("pause: %w", err)
	}
	now := time.Now().UTC()
	m.event("pause")
	return m.store.Update(id, func(r *store.Record) error {
		r.State, r.PausedAt, r.Reason = sandbox.Paused, &now, reason
		r.ExpiresAt = now.Add(m.cfg.PauseRetention)
		r.Usage.SampledAt = now
		return nil
	})
}

// Resume thaws owner's paused sandbox and grants it a new lease of the
// length it was created with.
func (m *Manager) Resume(ctx context.Context, owner, id string) (*store.Record, error) {
	if _, err := m.Get(ctx, owner, id); err != nil {
		return nil, err
	}
	p, ok := m.backend.(sandbox.Pauser)
	if !ok {
		return nil, fmt.Errorf("%w: this backend cannot pause sandboxes", sandbox.ErrNotSupported)
	}
	unlock := m.lockID(id)
	defer unlock()
	r, err := m.store.Get(id)
	if err != nil {
		return nil, err
	}
	if r.State != sandbox.Paused {
		return nil, fmt.Errorf("%w: sandbox %s is %s, not paused", sandbox.ErrConflict, id, r.State)
	}
	if err := p.Resume(ctx, id); err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	now := time.Now().UTC()
	m.event("resume")
	return m.store.Update(id, func(r *store.Record) error {
		lease := time.Duration(r.TimeoutSeconds) * time.Second
		if lease <= 0 {
			lease = m.cfg.DefaultTimeout
		}
		r.State, r.PausedAt, r.Reason = sandbox.Running, nil, ""
		r.ExpiresAt = now.Add(lease)
		r.Usage.SampledAt = now
		return nil
	})
}
