// Package api holds the wire types of the Paddock REST API (/v1): requests,
// responses, stream events and error codes. It is the contract shared by the
// daemon, the Go SDK and the CLI; api/openapi.yaml describes the same types
// for other languages. The package has no behaviour beyond small helpers.
package api

import "time"

// Version is the API version prefix served by paddockd.
const Version = "v1"

// Sandbox states.
const (
	StateCreating   = "creating"
	StateRunning    = "running"
	StatePaused     = "paused"
	StateStopped    = "stopped"
	StateTerminated = "terminated"
)

// Resources are the limits of one sandbox. Zero fields take the daemon's
// defaults when a sandbox is created.
type Resources struct {
	// VCPUs is the CPU quota in cores (fractions allowed).
	VCPUs float64 `json:"vcpus,omitempty"`
	// MemoryMiB is the memory limit; there is no swap.
	MemoryMiB int64 `json:"memory_mib,omitempty"`
	// DiskMiB is the size of the sandbox's writable layer.
	DiskMiB int64 `json:"disk_mib,omitempty"`
	// PIDs is the maximum number of processes and threads.
	PIDs int64 `json:"pids,omitempty"`
}

// CreateSandboxRequest is the body of POST /v1/sandboxes. Every field is
// optional.
type CreateSandboxRequest struct {
	Template       string            `json:"template,omitempty"`
	TimeoutSeconds int64             `json:"timeout_seconds,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	Resources      *Resources        `json:"resources,omitempty"`
	// OnTimeout is what happens when the lease ends: "kill" (default)
	// terminates the sandbox, "pause" freezes it (see PauseRetention).
	OnTimeout string `json:"on_timeout,omitempty"`
	// MaxCostMicros refuses the create if the first lease would cost more
	// and stops the sandbox once its cost crosses it (0 = no limit).
	MaxCostMicros int64 `json:"max_cost_micros,omitempty"`
	// Network is the sandbox's egress policy (default mode "off").
	Network *NetworkPolicy `json:"network,omitempty"`
	// Secrets names secrets (POST /v1/secrets) the sandbox may use: each
	// becomes an env var of that name holding a placeholder, which the
	// egress proxy replaces with the real value in requests to the
	// secret's hosts only.
	Secrets []string `json:"secrets,omitempty"`
}

// Network modes.
const (
	NetworkOff       = "off"
	NetworkAllowlist = "allowlist"
	NetworkFull      = "full"
)

// NetworkPolicy is a sandbox's egress policy. Allow and Deny hold host
// names ("pypi.org"), wildcards ("*.npmjs.org", not matching the apex) and
// CIDRs ("10.0.0.0/8").
type NetworkPolicy struct {
	Mode  string   `json:"mode"`
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// CreateSecretRequest is the body of POST /v1/secrets.
type CreateSecretRequest struct {
	Name  string   `json:"name"`
	Value string   `json:"value"`
	Hosts []string `json:"hosts"`
}

// Secret describes a secret; its value is write-only and never returned.
type Secret struct {
	Name      string    `json:"name"`
	Hosts     []string  `json:"hosts"`
	CreatedAt time.Time `json:"created_at"`
}

// ListSecretsResponse is the answer to GET /v1/secrets.
type ListSecretsResponse struct {
	Secrets []Secret `json:"secrets"`
}

// On-timeout actions.
const (
	OnTimeoutKill  = "kill"
	OnTimeoutPause = "pause"
)

// Sandbox describes one sandbox.
type Sandbox struct {
	ID        string            `json:"id"`
	Template  string            `json:"template"`
	State     string            `json:"state"`
	CreatedAt time.Time         `json:"created_at"`
	ExpiresAt time.Time         `json:"expires_at"`
	Metadata  map[string]string `json:"metadata"`
	Resources Resources         `json:"resources"`
	// Runtime is the OCI runtime running the sandbox (runc, crun, ...).
	Runtime string `json:"runtime,omitempty"`
	// EndedAt is set once the sandbox is stopped or terminated.
	EndedAt *time.Time `json:"ended_at,omitempty"`
	// Reason says why a sandbox stopped, paused or was terminated
	// ("deleted", "expired", "cost limit reached", "failed: ...").
	Reason        string `json:"reason,omitempty"`
	OnTimeout     string `json:"on_timeout"`
	MaxCostMicros int64  `json:"max_cost_micros,omitempty"`
	// PausedAt is set while the sandbox is paused.
	PausedAt *time.Time    `json:"paused_at,omitempty"`
	Network  NetworkPolicy `json:"network"`
	Secrets  []string      `json:"secrets,omitempty"`
}

// Metrics is the resource accounting of one sandbox
// (GET /v1/sandboxes/{id}/metrics). Counters cover the sandbox's whole
// life; gauges (memory, disk, pids) are current and zero once it ended.
type Metrics struct {
	SandboxID string    `json:"sandbox_id"`
	State     string    `json:"state"`
	SampledAt time.Time `json:"sampled_at"`
	// CPUSeconds is CPU time used by every process of the sandbox.
	CPUSeconds float64 `json:"cpu_seconds"`
	// RunningSeconds counts wall time while running (not paused).
	RunningSeconds   float64 `json:"running_seconds"`
	MemoryBytes      int64   `json:"memory_bytes"`
	MemoryPeakBytes  int64   `json:"memory_peak_bytes"`
	MemoryGiBSeconds float64 `json:"memory_gib_seconds"`
	DiskBytes        int64   `json:"disk_bytes"`
	NetworkRxBytes   int64   `json:"network_rx_bytes"`
	NetworkTxBytes   int64   `json:"network_tx_bytes"`
	PIDs             int64   `json:"pids"`
	CostMicros       int64   `json:"cost_micros"`
}

// Usage is the answer to GET /v1/usage: the calling key's consumption by
// sandboxes that were alive during [From, To).
type Usage struct {
	KeyID            string    `json:"key_id"`
	From             time.Time `json:"from"`
	To               time.Time `json:"to"`
	Sandboxes        int       `json:"sandboxes"`
	CPUSeconds       float64   `json:"cpu_seconds"`
	RunningSeconds   float64   `json:"running_seconds"`
	MemoryGiBSeconds float64   `json:"memory_gib_seconds"`
	CostMicros       int64     `json:"cost_micros"`
}

// ListSandboxesResponse is the answer to GET /v1/sandboxes. NextCursor is
// empty on the last page.
type ListSandboxesResponse struct {
	Sandboxes  []Sandbox `json:"sandboxes"`
	NextCursor string    `json:"next_cursor"`
}

// SetTimeoutRequest is the body of POST /v1/sandboxes/{id}/timeout; the new
// expiry is now + TimeoutSeconds.
type SetTimeoutRequest struct {
	TimeoutSeconds int64 `json:"timeout_seconds"`
}

// ExecRequest is the body of POST /v1/sandboxes/{id}/exec and
// POST /v1/sandboxes/{id}/processes. Exactly one of Argv and Command is set.
type ExecRequest struct {
	// Argv is run directly, resolved through PATH.
	Argv []string `json:"argv,omitempty"`
	// Command is run by /bin/bash -lc (or /bin/sh -c without bash).
	Command string            `json:"command,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Stdin is written to the process's standard input, which is then
	// closed. StdinBase64 does the same for binary input.
	Stdin       string `json:"stdin,omitempty"`
	StdinBase64 string `json:"stdin_base64,omitempty"`
	// TimeoutSeconds bounds the run (default 60). On timeout the command
	// and every process it started are killed and TimedOut is set.
	// For background processes 0 means no timeout beyond the lease.
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
	// MaxOutputBytes caps stdout and stderr each (default 65536, at most
	// 16 MiB). Output past the cap is counted and dropped.
	MaxOutputBytes int64 `json:"max_output_bytes,omitempty"`
	// KeepStdinOpen leaves a background process's stdin open for
	// POST .../processes/{pid}/stdin. Ignored by exec.
	KeepStdinOpen bool `json:"keep_stdin_open,omitempty"`
}

// ExecResult is the outcome of a command. A non-zero exit and a timeout are
// results, not errors. ExitCode is null when the process was killed by a
// signal; Signal then names it (for example "SIGKILL").
type ExecResult struct {
	ExitCode        *int    `json:"exit_code"`
	Signal          *string `json:"signal"`
	TimedOut        bool    `json:"timed_out"`
	OOMKilled       bool    `json:"oom_killed,omitempty"`
	Stdout          string  `json:"stdout"`
	Stderr          string  `json:"stderr"`
	StdoutTruncated bool    `json:"stdout_truncated"`
	StderrTruncated bool    `json:"stderr_truncated"`
	StdoutBytes     int64   `json:"stdout_bytes"`
	StderrBytes     int64   `json:"stderr_bytes"`
	DurationMS      int64   `json:"duration_ms"`
}

// Stream event types of an NDJSON exec or process output stream.
const (
	EventStart  = "start"
	EventStdout = "stdout"
	EventStderr = "stderr"
	EventExit   = "exit"
	EventError  = "error"
)

// Event is one line of an NDJSON stream (Accept: application/x-ndjson).
// Data carries raw output bytes (base64 in JSON, so streams are
// binary-safe). An exit event carries the result fields; its stdout and
// stderr are empty because the output was already streamed. An error event
// carries Error and ends the stream.
type Event struct {
	Type      string     `json:"type"`
	ProcessID string     `json:"process_id,omitempty"`
	PID       int        `json:"pid,omitempty"`
	Data      []byte     `json:"data,omitempty"`
	Time      *time.Time `json:"time,omitempty"`
	*ExecResult
	Error *ErrorBody `json:"error,omitempty"`
}

// Process states.
const (
	ProcessRunning = "running"
	ProcessExited  = "exited"
)

// Process is a command started in the background with
// POST /v1/sandboxes/{id}/processes.
type Process struct {
	ID        string     `json:"id"`
	PID       int        `json:"pid"`
	Argv      []string   `json:"argv,omitempty"`
	Command   string     `json:"command,omitempty"`
	Cwd       string     `json:"cwd"`
	State     string     `json:"state"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	// Result is set once the process has exited; its stdout and stderr
	// hold the first max_output_bytes of each stream.
	Result *ExecResult `json:"result,omitempty"`
}

// ListProcessesResponse is the answer to GET /v1/sandboxes/{id}/processes.
type ListProcessesResponse struct {
	Processes []Process `json:"processes"`
}

// SignalRequest is the body of POST /v1/sandboxes/{id}/processes/{pid}/kill.
// Signal defaults to SIGKILL, which kills the whole process tree.
type SignalRequest struct {
	Signal string `json:"signal,omitempty"`
}

// File types in a FileEntry.
const (
	FileTypeFile    = "file"
	FileTypeDir     = "dir"
	FileTypeSymlink = "symlink"
	FileTypeOther   = "other"
)

// FileEntry describes one file in a listing.
type FileEntry struct {
	// Path is absolute inside the sandbox.
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
	Size int64  `json:"size"`
	// Mode is the permission bits in octal, for example "0644".
	Mode       string    `json:"mode"`
	ModifiedAt time.Time `json:"modified_at"`
	// LinkTarget is set for symlinks.
	LinkTarget string `json:"link_target,omitempty"`
}

// ListFilesResponse is the answer to GET /v1/sandboxes/{id}/files/list.
type ListFilesResponse struct {
	Entries []FileEntry `json:"entries"`
	// Truncated is set when the listing hit the entry limit.
	Truncated bool `json:"truncated,omitempty"`
}

// ErrorResponse is the body of every error answer.
type ErrorResponse struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is the code and human message of an error.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes and the HTTP status each travels with.
const (
	CodeBadRequest      = "bad_request"      // 400
	CodeUnauthorized    = "unauthorized"     // 401
	CodeNotFound        = "not_found"        // 404
	CodeConflict        = "conflict"         // 409: wrong state
	CodeTooLarge        = "too_large"        // 413
	CodeUnknownTemplate = "unknown_template" // 422
	CodeLimitExceeded   = "limit_exceeded"   // 429
	CodeNoCapacity      = "no_capacity"      // 503
	CodeInternal        = "internal"         // 500
	CodeUnavailable     = "unavailable"      // 502: the sandbox's agent did not answer
	CodeNoSpace         = "no_space"         // 507: the sandbox's disk is full
	CodeNotSupported    = "not_supported"    // 501: the host cannot do this
)

// Health is the answer to GET /v1/health (no authentication).
type Health struct {
	Status  string `json:"status"`
	Version string `json:"version"`
}

// Port is a TCP port a process in the sandbox listens on, reachable from
// outside through the daemon's reverse proxy (HTTP and WebSocket).
type Port struct {
	Port int `json:"port"`
	// Address is the listening address inside the sandbox ("0.0.0.0",
	// "127.0.0.1", "::"); all are reachable through the proxy.
	Address string `json:"address"`
	// URL needs the API key (Authorization: Bearer).
	URL string `json:"url"`
	// SignedURL carries a token for this sandbox and port only, valid until
	// SignedURLExpiresAt, usable from a browser.
	SignedURL          string    `json:"signed_url"`
	SignedURLExpiresAt time.Time `json:"signed_url_expires_at"`
}

// ListPortsResponse is the answer to GET /v1/sandboxes/{id}/ports.
type ListPortsResponse struct {
	Ports []Port `json:"ports"`
}

// Template describes a template sandboxes can be created from
// (GET /v1/templates). Shared templates come from the daemon's config and
// every key sees them; the others belong to the key that made them
// (Owner) and only that key sees or uses them.
type Template struct {
	// Name is "name:tag" ("base" and config templates without a tag keep
	// their config name).
	Name string `json:"name"`
	// Source says where the template came from: "host system", "image
	// <ref>", "oci_layout <path>", "tarball <path>", "template <name>",
	// "recipe from <from>", "dockerfile from <from>", "snapshot of <id>".
	Source string `json:"source"`
	// Digest is the image's manifest digest, or for built templates a
	// hash of its layers and config.
	Digest string `json:"digest,omitempty"`
	// Size is the bytes of the template's layers on disk (layers shared
	// with other templates count in each).
	Size      int64     `json:"size"`
	Layers    int       `json:"layers"`
	CreatedAt time.Time `json:"created_at"`
	Shared    bool      `json:"shared"`
	// Owner is the id of the key that owns a per-tenant template.
	Owner string `json:"owner,omitempty"`
	// Runtime is the OCI runtime its sandboxes run on (empty: the default).
	Runtime string `json:"runtime,omitempty"`
	// OnBase is set when the template's layers sit on the base template
	// (the host's read-only system).
	OnBase bool `json:"on_base,omitempty"`
	// Env is applied to every sandbox of the template (a create request's
	// env wins); Workdir, User and Cmd are recorded from the image or
	// recipe.
	Env     []string `json:"env,omitempty"`
	Workdir string   `json:"workdir,omitempty"`
	User    string   `json:"user,omitempty"`
	Cmd     []string `json:"cmd,omitempty"`
	// Status is "ready", or "pulling"/"failed: ..." for a shared template
	// the daemon is still fetching.
	Status string `json:"status"`
}

// ListTemplatesResponse is the answer to GET /v1/templates.
type ListTemplatesResponse struct {
	Templates []Template `json:"templates"`
}

// TemplateSource names what a template is made from. Exactly one of Image,
// OCILayout, Tarball and Template is set. OCILayout and Tarball are paths
// on the daemon's host, inside one of its template import directories.
type TemplateSource struct {
	// Image is a registry reference; credentials come from the daemon's
	// Docker config file.
	Image     string `json:"image,omitempty"`
	OCILayout string `json:"oci_layout,omitempty"`
	Tarball   string `json:"tarball,omitempty"`
	// Tag picks one image of an OCI layout or a tarball.
	Tag      string `json:"tag,omitempty"`
	Template string `json:"template,omitempty"`
}

// CreateTemplateRequest is the body of POST /v1/templates. Name is
// "name[:tag]" (tag "latest" when left out). Exactly one of From, Recipe
// and Dockerfile is set.
type CreateTemplateRequest struct {
	Name   string          `json:"name"`
	From   *TemplateSource `json:"from,omitempty"`
	Recipe *Recipe         `json:"recipe,omitempty"`
	// Dockerfile is the text of a Dockerfile (FROM, RUN, COPY, ADD, ENV,
	// ARG, WORKDIR, USER, CMD); COPY and ADD read from Context.
	Dockerfile string `json:"dockerfile,omitempty"`
	// Context maps build-context paths to file contents (base64).
	Context   map[string][]byte `json:"context,omitempty"`
	BuildArgs map[string]string `json:"build_args,omitempty"`
	// Resources size the build's sandboxes (defaults as for a sandbox).
	Resources *Resources `json:"resources,omitempty"`
	// StepTimeoutSeconds bounds each build step (default 600).
	StepTimeoutSeconds int64 `json:"step_timeout_seconds,omitempty"`
	// NoCache rebuilds every step instead of reusing cached layers.
	NoCache bool `json:"no_cache,omitempty"`
	// Network is the build steps' egress policy (default mode off), as for
	// a sandbox: e.g. allowlist with a package mirror for apt/pip/npm. It
	// is not part of the cache key.
	Network *NetworkPolicy `json:"network,omitempty"`
}

// Recipe builds a template: From (a template, else a registry image) and
// then Steps in order. Every step that changes files runs in a sandbox of
// the template built so far and becomes one cached layer.
type Recipe struct {
	From  string       `json:"from"`
	Steps []RecipeStep `json:"steps"`
}

// RecipeStep is one build step; exactly one field is set. Run is a shell
// command (/bin/sh -c). Apt, Pip and Npm install packages and need a
// package mirror reachable from the sandbox (sandboxes have no network by
// default, so they fail without one). Env, Workdir, User and Cmd change
// only the template's config.
type RecipeStep struct {
	Run     string            `json:"run,omitempty"`
	Copy    *CopyStep         `json:"copy,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Workdir string            `json:"workdir,omitempty"`
	User    string            `json:"user,omitempty"`
	Cmd     []string          `json:"cmd,omitempty"`
	Apt     []string          `json:"apt,omitempty"`
	Pip     []string          `json:"pip,omitempty"`
	Npm     []string          `json:"npm,omitempty"`
}

// CopyStep writes a file (Content as text or SrcBase64 as bytes) at Dst,
// or unpacks a tar archive (TarBase64) into the directory Dst. A relative
// Dst is relative to the recipe's workdir (or /). Mode is octal ("0755"),
// default 0644.
type CopyStep struct {
	Content   string `json:"content,omitempty"`
	SrcBase64 []byte `json:"src_base64,omitempty"`
	TarBase64 []byte `json:"tar_base64,omitempty"`
	Dst       string `json:"dst"`
	Mode      string `json:"mode,omitempty"`
}

// Build event types of an NDJSON template build stream.
const (
	BuildEventStep   = "step"   // a step starts
	BuildEventOutput = "output" // output of the running step
	BuildEventCached = "cached" // the step was taken from the cache
	BuildEventDone   = "done"   // the template is ready (Template set)
	BuildEventError  = "error"  // the build failed (Error set); ends the stream
)

// BuildEvent is one line of the NDJSON stream of POST /v1/templates with
// Accept: application/x-ndjson.
type BuildEvent struct {
	Type string `json:"type"`
	// Step counts from 1 over Steps (the FROM is step 0).
	Step        int    `json:"step,omitempty"`
	Steps       int    `json:"steps,omitempty"`
	Instruction string `json:"instruction,omitempty"`
	// Stream is "stdout" or "stderr" for output events.
	Stream     string     `json:"stream,omitempty"`
	Output     string     `json:"output,omitempty"`
	DurationMS int64      `json:"duration_ms,omitempty"`
	Template   *Template  `json:"template,omitempty"`
	Error      *ErrorBody `json:"error,omitempty"`
}

// SnapshotRequest is the body of POST /v1/sandboxes/{id}/snapshot: the
// sandbox's files become template Name ("name[:tag]").
type SnapshotRequest struct {
	Name string `json:"name"`
}
