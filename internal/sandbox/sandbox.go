// Package sandbox holds Paddock's domain types: a sandbox's specification,
// its states, the error classes every layer shares, and the Backend
// interface that isolation implementations (the OCI container backend today)
// satisfy. It does no I/O.
package sandbox

import (
	"context"
	"errors"
	"net"
)

// State is the lifecycle state of a sandbox.
type State string

// States of the one lifecycle state machine (docs/api.md draws it):
//
//	creating → running ⇄ paused
//	running, paused → stopped (processes ended, files kept) → running (start)
//	any → terminated (files gone; the record stays for a while)
//
// Paused needs a backend that can freeze a sandbox (Pauser), stopped one
// that can keep its disk (Stopper).
const (
	Creating   State = "creating"
	Running    State = "running"
	Paused     State = "paused"
	Stopped    State = "stopped"
	Terminated State = "terminated"
)

// Live reports whether a sandbox in state s has processes (or is being
// made): it holds a live slot. A stopped sandbox holds only its disk.
func (s State) Live() bool { return s == Creating || s == Running || s == Paused }

// Kept reports whether a sandbox in state s still exists: it is live or
// stopped with its files kept.
func (s State) Kept() bool { return s.Live() || s == Stopped }

// Resources are the limits of one sandbox.
type Resources struct {
	VCPUs     float64 `json:"vcpus"`
	MemoryMiB int64   `json:"memory_mib"`
	DiskMiB   int64   `json:"disk_mib"`
	PIDs      int64   `json:"pids"`
}

// Spec is everything a backend needs to create a sandbox.
type Spec struct {
	ID        string
	Template  string
	Resources Resources
	// Env is added to the environment of every process in the sandbox.
	Env map[string]string
	// Network, if set, joins a prepared network namespace.
	Network *NetworkConfig
	// Pooled marks a warm-pool sandbox: its guest agent keeps its spare
	// command shim until the sandbox is handed out (an idle sandbox's
	// spare is otherwise retired after the backend's idle time).
	Pooled bool
}

// Info is what a backend reports about a sandbox it created.
type Info struct {
	ID string
	// Runtime names the OCI runtime (or other mechanism) running it.
	Runtime string
}

// Backend creates and destroys isolated sandboxes and connects to the guest
// agent inside them. Implementations must be safe for concurrent use.
type Backend interface {
	// Create builds and starts a sandbox; when it fails it leaves nothing
	// behind.
	Create(ctx context.Context, spec Spec) (Info, error)
	// Destroy kills every process of the sandbox and removes everything it
	// held on the host. It is idempotent and also cleans up partial state.
	Destroy(ctx context.Context, id string) error
	// Alive reports whether the sandbox's processes are still running.
	Alive(ctx context.Context, id string) (bool, error)
	// Dial connects to the guest agent of a running sandbox.
	Dial(ctx context.Context, id string) (net.Conn, error)
	// List returns the ids of every sandbox the backend finds traces of on
	// the host (live or not), so that recovery can adopt or clean them.
	List(ctx context.Context) ([]string, error)
	// Templates lists the template names the backend can create.
	Templates() []string
}

// Error classes. Layers wrap them with %w; the HTTP server maps them to
// status codes in one place.
var (
	ErrNotFound        = errors.New("not found")
	ErrInvalid         = errors.New("invalid request")
	ErrConflict        = errors.New("wrong state")
	ErrTooLarge        = errors.New("too large")
	ErrUnknownTemplate = errors.New("unknown template")
	ErrLimit           = errors.New("limit exceeded")
	ErrNoCapacity      = errors.New("no capacity")
	ErrUnavailable     = errors.New("sandbox agent unavailable")
	ErrUnauthorized    = errors.New("unauthorized")
	// ErrNoSpace: a sandbox's disk (or the host's template budget) is full.
	ErrNoSpace = errors.New("no space left")
)

// ErrNotSupported is returned when the host or backend cannot do something.
var ErrNotSupported = errors.New("not supported")

// Pauser is implemented by backends that can freeze every process of a
// sandbox (memory and processes kept) and thaw it again.
type Pauser interface {
	Pause(ctx context.Context, id string) error
	Resume(ctx context.Context, id string) error
}

// Stopper is implemented by backends that can end every process of a
// sandbox while keeping its writable layer (files) on the host, and boot it
// again from that layer. A stopped sandbox must need nothing live on the
// host (no process, mount or loop device), so it outlives daemon restarts
// and host reboots.
type Stopper interface {
	// Stop ends every process of the sandbox and releases everything but
	// its disk and metadata. It is idempotent and also tidies a sandbox
	// whose stop or start was cut short by a crash.
	Stop(ctx context.Context, id string) error
	// Start boots a stopped sandbox from its kept disk with spec (same id;
	// the network is freshly prepared). When it fails the sandbox is left
	// stopped, its files intact.
	Start(ctx context.Context, spec Spec) (Info, error)
}

// ExitWatcher is a Backend that learns of its sandboxes' ends as they
// happen (the container backend watches each init through a pidfd in one
// epoll set), so the manager needs not ask Alive of every sandbox in turn:
// idle sandboxes then cost the daemon nothing.
type ExitWatcher interface {
	// Exited returns, and forgets, the ids of the sandboxes whose
	// processes ended since the last call. A listed sandbox may have been
	// started again since; callers confirm with Alive.
	Exited() []string
}

// Killer is a Backend that can end every process of a sandbox at once
// and leave the rest of its cleanup (runtime state, mounts, disk) to a
// later Destroy, so that a delete answers as soon as the sandbox can no
// longer run anything. A killed sandbox's traces stay where List finds
// them, so recovery after a crash destroys them like any orphan.
type Killer interface {
	// Kill ends every process of a running sandbox and returns once none
	// is left; an error means that could not be confirmed (call Destroy).
	Kill(ctx context.Context, id string) error
}

// Stats is a sample of a sandbox's resource use. CPUSeconds and the
// network counters are cumulative since the sandbox started.
type Stats struct {
	CPUSeconds      float64
	MemoryBytes     int64
	MemoryPeakBytes int64
	DiskBytes       int64
	NetRxBytes      int64
	NetTxBytes      int64
	PIDs            int64
}

// Meter is implemented by backends that can report resource use.
type Meter interface {
	Stats(ctx context.Context, id string) (Stats, error)
}

// MeterTotal is implemented by meters that read the CPU time of all
// their sandboxes together in one read (their parent cgroup's counter,
// which keeps what ended sandboxes used). Metering then reads a quiet
// sandbox only when the total moved more than the sandboxes it read
// account for.
type MeterTotal interface {
	TotalCPUSeconds(ctx context.Context) (float64, error)
}
