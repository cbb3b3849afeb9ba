package catalog

import (
	"context"
	"time"

	"github.com/paddock-sandbox/paddock/internal/agent"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/template"
)

// BuildSpec describes the sandboxes of a build.
type BuildSpec struct {
	// Template is the backend template name a step's sandbox starts from
	// (set by the builder for each step).
	Template  string
	Resources sandbox.Resources
	// Network is the build sandboxes' egress policy (nil: mode off).
	Network *sandbox.NetworkPolicy
	// StepTimeout bounds each step (negative: invalid).
	StepTimeout time.Duration
}

// Sandboxes is what builds and snapshots need of the sandbox manager
// (manager.Manager implements it).
type Sandboxes interface {
	// CheckBuild validates owner's build spec and applies the defaults
	// of sandbox creation to it.
	CheckBuild(ctx context.Context, owner string, spec BuildSpec) (BuildSpec, error)
	// RunBuild creates a throwaway sandbox of spec for owner (holding a
	// slot of owner's), runs step in it, freezes it, hands its writable
	// layer to commit, and destroys it.
	RunBuild(ctx context.Context, owner string, spec BuildSpec, step func(ctx context.Context, id string) error,
		commit func(ctx context.Context, up template.Upper) error) error
	// Freeze freezes owner's running or paused sandbox id, hands its
	// writable layer to fn, and thaws it.
	Freeze(ctx context.Context, owner, id string, fn func(ctx context.Context, up template.Upper) error) error
}

// Builder is a Catalog that also builds templates (from a source, a
// recipe or a Dockerfile) and snapshots sandboxes into templates.
type Builder struct {
	*Catalog
	sb    Sandboxes
	agent *agent.Client
}

// NewBuilder returns the builder of cat, running steps in sandboxes of sb
// reached through ac.
func NewBuilder(cat *Catalog, sb Sandboxes, ac *agent.Client) *Builder {
	return &Builder{Catalog: cat, sb: sb, agent: ac}
}
