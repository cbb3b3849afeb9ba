package fake

import (
	"context"
	"fmt"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// Stop ends sandbox id's agent (its commands are killed) and keeps its
// workdir, as the container backend keeps its disk. Idempotent.
func (b *Backend) Stop(ctx context.Context, id string) error {
	fault, err := b.enter(OpStop)
	if err == nil {
		err = fault
	}
	if err != nil {
		return err
	}
	h := b.host
	h.mu.Lock()
	bx, err := h.get(id)
	if err == nil {
		bx.status = stopped
	}
	h.mu.Unlock()
	if err != nil {
		return err
	}
	bx.halt()
	return nil
}

// Start boots stopped sandbox spec.ID again: a fresh agent in its kept
// workdir. When it fails the sandbox stays stopped.
func (b *Backend) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Info, error) {
	fault, err := b.enter(OpStart)
	if err == nil {
		err = fault
	}
	if err != nil {
		return sandbox.Info{}, err
	}
	h := b.host
	h.mu.Lock()
	old, err := h.get(spec.ID)
	if err == nil && old.status != stopped && old.status != dead {
		err = fmt.Errorf("%w: sandbox %s is not stopped", sandbox.ErrConflict, spec.ID)
	}
	h.mu.Unlock()
	if err != nil {
		return sandbox.Info{}, err
	}
	old.halt()
	bx, err := h.start(spec, old.workdir)
	if err != nil {
		return sandbox.Info{}, fmt.Errorf("start %s: %w", spec.ID, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.boxes[spec.ID] != old {
		bx.halt()
		return sandbox.Info{}, fmt.Errorf("%w: destroyed while being started", sandbox.ErrConflict)
	}
	bx.stats = old.stats
	h.boxes[spec.ID] = bx
	return sandbox.Info{ID: spec.ID, Runtime: "fake"}, nil
}
