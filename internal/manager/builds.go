package manager

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
	"github.com/paddock-sandbox/paddock/internal/template"
	"github.com/paddock-sandbox/paddock/internal/template/catalog"
)

// Templates resolves template names for the manager (catalog.Catalog
// implements it). A nil Templates in Deps means only the backend's own
// templates (Backend.Templates) exist, under their own names.
type Templates interface {
	// Resolve returns the backend template name of owner's template
	// name, or an error matching sandbox.ErrUnknownTemplate.
	Resolve(ctx context.Context, owner, name string) (string, error)
}

// upperer is implemented by backends whose sandboxes have a writable
// layer that can become a template layer.
type upperer interface {
	Upper(id string) (template.Upper, error)
}

var _ catalog.Sandboxes = (*Manager)(nil)

// CheckBuild validates a template build's resources, network and step
// timeout for owner and applies the defaults of sandbox creation.
func (m *Manager) CheckBuild(ctx context.Context, owner string, spec catalog.BuildSpec) (catalog.BuildSpec, error) {
	res, err := m.resources(spec.Resources)
	if err != nil {
		return spec, err
	}
	spec.Resources = res
	if spec.Network != nil {
		rec := &store.Record{}
		if err := m.validateNetwork(owner, sandbox.CreateRequest{Network: spec.Network}, rec); err != nil {
			return spec, err
		}
		p := domainPolicy(rec.Network)
		spec.Network = &p
	}
	if t := spec.StepTimeout; t < 0 || t > m.cfg.MaxTimeout {
		return spec, fmt.Errorf("%w: step_timeout_seconds must be between 1 and %d", sandbox.ErrInvalid, int64(m.cfg.MaxTimeout.Seconds()))
	}
	return spec, nil
}

// RunBuild runs one build step in a throwaway sandbox: see
// catalog.Sandboxes.
func (m *Manager) RunBuild(ctx context.Context, owner string, spec catalog.BuildSpec,
	step func(ctx context.Context, id string) error, commit func(ctx context.Context, up template.Upper) error) error {
	ub, ok := m.backend.(upperer)
	if !ok {
		return fmt.Errorf("%w: this backend cannot build templates", sandbox.ErrNotSupported)
	}
	b := make([]byte, 8)
	rand.Read(b)
	id := "build-" + hex.EncodeToString(b)
	if err := m.admit(id, owner); err != nil {
		return err
	}
	defer m.release(id)
	p := store.NetworkPolicy{Mode: sandbox.NetworkOff}
	if spec.Network != nil {
		p = store.NetworkPolicy{Mode: spec.Network.Mode, Allow: spec.Network.Allow, Deny: spec.Network.Deny}
	}
	netCfg, err := m.setupBuildNetwork(ctx, id, p)
	if err != nil {
		return err
	}
	defer m.teardownBuildNetwork(id)
	if _, err := m.backend.Create(ctx, sandbox.Spec{ID: id, Template: spec.Template, Resources: spec.Resources, Network: netCfg}); err != nil {
		return fmt.Errorf("build sandbox: %w", err)
	}
	pauser, _ := m.backend.(sandbox.Pauser)
	paused := false
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if paused {
			pauser.Resume(dctx, id) // a frozen sandbox is slow to kill on cgroup v1
		}
		if err := m.backend.Destroy(dctx, id); err != nil {
			m.log.Error("template build: destroy sandbox", "sandbox", id, "err", err)
		}
	}()
	if err := step(ctx, id); err != nil {
		return err
	}
	if pauser != nil {
		if err := pauser.Pause(ctx, id); err != nil {
			return fmt.Errorf("freeze build sandbox: %w", err)
		}
		paused = true
	}
	up, err := ub.Upper(id)
	if err != nil {
		return err
	}
	return commit(ctx, up)
}

// Freeze freezes owner's running or paused sandbox id and hands its
// writable layer to fn (a snapshot): see catalog.Sandboxes.
func (m *Manager) Freeze(ctx context.Context, owner, id string, fn func(ctx context.Context, up template.Upper) error) error {
	if _, err := m.Get(ctx, owner, id); err != nil {
		return err
	}
	ub, ok := m.backend.(upperer)
	if !ok {
		return fmt.Errorf("%w: this backend cannot snapshot sandboxes", sandbox.ErrNotSupported)
	}
	unlock := m.lockID(id)
	defer unlock()
	rec, err := m.store.Get(id)
	if err != nil {
		return err
	}
	if rec.State != sandbox.Running && rec.State != sandbox.Paused {
		return fmt.Errorf("%w: sandbox %s is %s", sandbox.ErrConflict, id, rec.State)
	}
	up, err := ub.Upper(id)
	if err != nil {
		return err
	}
	up.MaxBytes = int64(rec.Resources.DiskMiB) << 20 // a snapshot takes no more than the sandbox's disk
	if rec.State == sandbox.Running {
		p, ok := m.backend.(sandbox.Pauser)
		if !ok {
			return fmt.Errorf("%w: this backend cannot freeze sandboxes", sandbox.ErrNotSupported)
		}
		if err := p.Pause(ctx, id); err != nil {
			return fmt.Errorf("freeze: %w", err)
		}
		defer func() {
			if err := p.Resume(context.WithoutCancel(ctx), id); err != nil {
				m.log.Error("snapshot: resume", "sandbox", id, "err", err)
			}
		}()
	}
	return fn(ctx, up)
}

// templateRef is the backend template name for owner's template s
// (validate has applied the default "base").
func (m *Manager) templateRef(ctx context.Context, owner, s string) (string, error) {
	if m.tpl == nil {
		return s, nil
	}
	return m.tpl.Resolve(ctx, owner, s)
}
