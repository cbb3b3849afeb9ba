package container

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/paddock-sandbox/paddock/internal/shim"
)

// shimPath is where the agent's command shim lives inside every sandbox,
// next to the agent, which looks for it there.
const shimPath = "/.paddock/" + shim.Name

// idleName is the agent's idle program (cmd/paddock-idle), idlePath where
// it lives inside every sandbox.
const (
	idleName = "paddock-idle"
	idlePath = "/.paddock/" + idleName
)

// guestBinaries are the programs in every sandbox's /.paddock: the agent
// and, when there is one, its command shim (without it the agent runs
// its own binary as the shim, about 7 ms slower per start).
type guestBinaries struct {
	agent, shim, idle          string // host paths; shim and idle may be ""
	agentSum, shimSum, idleSum string // their sha256, read once for every layer that holds them
}

// guestBinariesOf returns cfg's agent, shim (ShimBinary, else
// paddock-shim next to the agent binary when it exists) and idle program
// (IdleBinary, else paddock-idle next to the agent binary when it
// exists), with their hashes.
func guestBinariesOf(cfg Config) (guestBinaries, error) {
	g := guestBinaries{agent: cfg.AgentBinary,
		shim: cmp.Or(cfg.ShimBinary, besideAgent(cfg.AgentBinary, shim.Name)),
		idle: cmp.Or(cfg.IdleBinary, besideAgent(cfg.AgentBinary, idleName))}
	var err error
	if g.agentSum, err = fileSHA256(g.agent); err != nil {
		return g, fmt.Errorf("agent binary: %w", err)
	}
	if g.shim != "" {
		if g.shimSum, err = fileSHA256(g.shim); err != nil {
			return g, fmt.Errorf("shim binary: %w", err)
		}
	}
	if g.idle != "" {
		if g.idleSum, err = fileSHA256(g.idle); err != nil {
			return g, fmt.Errorf("idle binary: %w", err)
		}
	}
	return g, nil
}

// besideAgent is the regular file name next to the agent binary, or "".
func besideAgent(agentBinary, name string) string {
	p := filepath.Join(filepath.Dir(agentBinary), name)
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
		return p
	}
	return ""
}

// hash writes what names the binaries into a layer's hash: the agent's
// sha256 and the shim's, if any (so a layer without a shim keeps the name
// it had before shims were separate).
func (g guestBinaries) hash(h io.Writer) {
	fmt.Fprintf(h, "agent %s\n", g.agentSum)
	if g.shim != "" {
		fmt.Fprintf(h, "shim %s\n", g.shimSum)
	}
	if g.idle != "" {
		fmt.Fprintf(h, "idle %s\n", g.idleSum)
	}
}

// install copies the binaries into rootfs (mode 0555).
//
// Not execute-only: a shim exec'd from a file the sandbox cannot read
// would start undumpable, but its mm would then belong to the host's user
// namespace, its /proc files to host root, and it could no longer set its
// own oom_score_adj (the commands it starts would inherit the agent's
// -999) or its name.
func (g guestBinaries) install(rootfs string) error {
	if err := copyFile(g.agent, filepath.Join(rootfs, agentPath), 0o555); err != nil {
		return fmt.Errorf("install agent: %w", err)
	}
	if g.shim != "" {
		if err := copyFile(g.shim, filepath.Join(rootfs, shimPath), 0o555); err != nil {
			return fmt.Errorf("install shim: %w", err)
		}
	}
	if g.idle != "" {
		if err := copyFile(g.idle, filepath.Join(rootfs, idlePath), 0o555); err != nil {
			return fmt.Errorf("install idle program: %w", err)
		}
	}
	return nil
}
