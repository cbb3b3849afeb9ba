package container

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// gvisorSockDir is the directory, in a gVisor sandbox's directory, that is
// bound into the sandbox for the agent's socket.
const gvisorSockDir = "sock"

// gvisorSockMount is where the sandbox sees gvisorSockDir.
const gvisorSockMount = "/.paddock-sock"

// gvisorSocket adapts a sandbox's spec to gVisor. runsc cannot hand the
// agent a listening socket: --preserve-fds does not exist, and a socket
// passed with --pass-fd is imported as a host file that refuses accept
// (EINVAL). Instead the agent listens on a path in a host directory bound
// into the sandbox, and runsc runs with --host-uds=create, so the gofer
// makes the socket on the host, where the daemon dials it.
//
// The directory belongs to the sandbox's root (host uid uid), the only
// user that may bind in it.
func gvisorSocket(s *specs.Spec, dir string, uid int) error {
	host := filepath.Join(dir, gvisorSockDir)
	if err := os.Mkdir(host, 0o700); err != nil {
		return fmt.Errorf("agent socket dir: %w", err)
	}
	if err := os.Chown(host, uid, uid); err != nil {
		return fmt.Errorf("agent socket dir: %w", err)
	}
	args := s.Process.Args
	i := slices.Index(args, "--listen-fd")
	if i < 0 || i+1 >= len(args) {
		return fmt.Errorf("agent command %q has no --listen-fd", args)
	}
	s.Process.Args = slices.Concat(args[:i], []string{"--listen", gvisorSockMount + "/agent.sock"}, args[i+2:])
	s.Mounts = append(s.Mounts, specs.Mount{
		Destination: gvisorSockMount, Type: "bind", Source: host,
		Options: []string{"rbind", "rw", "nosuid", "nodev", "noexec"},
	})
	return nil
}
