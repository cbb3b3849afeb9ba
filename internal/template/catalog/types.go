package catalog

import (
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// Template describes a template as its owner sees it.
type Template struct {
	// Name is "name:tag" (config templates keep their config name).
	Name string
	// Source says where the template came from ("image <ref>", "recipe
	// from <from>", "snapshot of <id>", ...).
	Source    string
	Digest    string
	Size      int64
	Layers    int
	CreatedAt time.Time
	Shared    bool
	Owner     string
	Runtime   string
	OnBase    bool
	Env       []string
	Workdir   string
	User      string
	Cmd       []string
	// Status is "ready", or "pulling"/"failed: ..." for a shared template
	// still being fetched.
	Status string
}

// Source names what a template is imported from: exactly one of Image,
// OCILayout, Tarball and Template.
type Source struct {
	Image     string
	OCILayout string
	Tarball   string
	Tag       string
	Template  string
}

// BuildRequest asks for a template named Name ("name[:tag]"), made from
// exactly one of From, Recipe and Dockerfile. Recipe is the recipe model
// of package template (the wire type, which that package parses
// Dockerfiles into).
type BuildRequest struct {
	Name       string
	From       *Source
	Recipe     *api.Recipe
	Dockerfile string
	// Context maps build-context paths to contents (when no tar context
	// is given).
	Context   map[string][]byte
	BuildArgs map[string]string
	// Resources size the build's sandboxes (zero fields: the defaults).
	Resources          sandbox.Resources
	StepTimeoutSeconds int64
	NoCache            bool
	// Network is the build steps' egress policy (nil: mode off).
	Network *sandbox.NetworkPolicy
}

// Build event types.
const (
	EventStep   = "step"   // a step starts
	EventOutput = "output" // output of the running step
	EventCached = "cached" // the step was taken from the cache
	EventDone   = "done"   // the template is ready (Template set)
)

// BuildEvent reports a build's progress.
type BuildEvent struct {
	Type string
	// Step counts from 1 over Steps (the FROM is step 0).
	Step        int
	Steps       int
	Instruction string
	// Stream is "stdout" or "stderr" for output events.
	Stream     string
	Output     string
	DurationMS int64
	Template   *Template
}
