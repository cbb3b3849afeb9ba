package sandbox

import "time"

// Metrics is a sandbox's accounting at SampledAt: cumulative use and cost
// from its record, current use from the backend.
type Metrics struct {
	SandboxID        string
	State            State
	SampledAt        time.Time
	CPUSeconds       float64
	RunningSeconds   float64
	MemoryBytes      int64
	MemoryPeakBytes  int64
	MemoryGiBSeconds float64
	DiskBytes        int64
	NetRxBytes       int64
	NetTxBytes       int64
	PIDs             int64
	CostMicros       int64
}

// Usage is one owner's consumption by sandboxes alive during [From, To).
type Usage struct {
	Owner            string
	From, To         time.Time
	Sandboxes        int
	CPUSeconds       float64
	RunningSeconds   float64
	MemoryGiBSeconds float64
	CostMicros       int64
}

// SecretInfo describes a stored secret; its value never leaves the store
// except towards the egress proxy.
type SecretInfo struct {
	Name      string
	Hosts     []string
	CreatedAt time.Time
}
