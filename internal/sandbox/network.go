package sandbox

// NetworkConfig attaches a sandbox to a host-prepared network namespace
// (modes allowlist and full). A nil NetworkConfig means loopback only.
type NetworkConfig struct {
	// NetnsPath is the pinned network namespace the sandbox joins, for
	// the runtime to open while creating the sandbox (a path valid only
	// while the daemon that made it runs).
	NetnsPath string
	// Nameserver goes into the sandbox's /etc/resolv.conf.
	Nameserver string
	// CACertPEM, if set, is added to the sandbox's trust store (the egress
	// proxy's CA, for hosts whose requests get secrets substituted).
	CACertPEM []byte
}
