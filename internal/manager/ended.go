package manager

import (
	"context"
	"fmt"
	"strings"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// EndedDuring explains a request to sandbox id's agent that broke off
// (an exec stream cut short, a bare EOF): if the sandbox stopped running
// meanwhile, because its lease ended, it was deleted or it was stopped, it
// returns a conflict error that says so, after waiting for the change of
// state in progress to be recorded. It returns nil while the sandbox still
// runs: the break had another cause.
func (m *Manager) EndedDuring(ctx context.Context, id string) error {
	unlock := m.lockID(id) // held by terminate and pause while they act
	r, err := m.store.Get(id)
	unlock()
	if err != nil || r.State == sandbox.Running {
		return nil
	}
	if strings.HasPrefix(r.Reason, "expired") {
		return fmt.Errorf("%w: sandbox %s expired while the command ran: its lease ended and it is now %s", sandbox.ErrConflict, id, r.State)
	}
	why := ""
	if r.Reason != "" {
		why = " (" + r.Reason + ")"
	}
	return fmt.Errorf("%w: sandbox %s ended while the command ran: it is now %s%s", sandbox.ErrConflict, id, r.State, why)
}

// ExpiredPaused reports whether sandbox id was paused because its lease
// ended. Its commands are frozen, not ended: a request still waiting on
// one would otherwise wait for as long as the pause lasts.
func (m *Manager) ExpiredPaused(id string) bool {
	r, err := m.store.Get(id)
	return err == nil && r.State == sandbox.Paused && strings.HasPrefix(r.Reason, "expired")
}
