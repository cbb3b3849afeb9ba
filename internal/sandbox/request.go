package sandbox

// CreateRequest asks the manager for a sandbox. Zero fields take the
// daemon's defaults. It is the domain form of api.CreateSandboxRequest;
// only the HTTP server converts between the two.
type CreateRequest struct {
	// Template names the template (default "base").
	Template string
	// TimeoutSeconds is the lease (0: the daemon's default).
	TimeoutSeconds int64
	// Env is set for every process; Metadata is kept with the record.
	Env      map[string]string
	Metadata map[string]string
	// Resources are the limits; zero fields take the defaults.
	Resources Resources
	// OnTimeout is OnTimeoutKill (default), OnTimeoutPause or OnTimeoutStop.
	OnTimeout string
	// MaxCostMicros bounds the sandbox's cost (0: no limit).
	MaxCostMicros int64
	// Network is the egress policy (nil: mode off).
	Network *NetworkPolicy
	// Secrets names the owner's secrets the sandbox may use.
	Secrets []string
}

// On-timeout actions.
const (
	OnTimeoutKill  = "kill"
	OnTimeoutPause = "pause"
	// OnTimeoutStop ends the sandbox's processes; until stopped sandboxes
	// keep their files it is handled as OnTimeoutKill.
	OnTimeoutStop = "stop"
)

// Network modes.
const (
	NetworkOff       = "off"
	NetworkAllowlist = "allowlist"
	NetworkFull      = "full"
)

// NetworkPolicy is a sandbox's egress policy: a mode and the host names,
// wildcards and CIDRs allowed and denied.
type NetworkPolicy struct {
	Mode  string
	Allow []string
	Deny  []string
}

// Secret is a secret to store: its value is substituted by the egress
// proxy in requests to Hosts only.
type Secret struct {
	Name  string
	Value string
	Hosts []string
}
