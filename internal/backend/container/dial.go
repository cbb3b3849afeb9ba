package container

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"golang.org/x/sys/unix"
)

// dialSocket connects to the unix socket at path without following a
// symlink in its last component. Under gVisor the agent's socket lives in
// a directory the sandbox's root can write (see gvisorSocket): from inside,
// it could replace the socket with a link to any socket of the host, which
// the daemon, as root, would then talk to. The socket is opened as an
// O_PATH descriptor that does not follow links, checked to be a socket,
// and connected to through /proc/self/fd, which names that very inode.
// The directories above the last component are the daemon's own.
func dialSocket(ctx context.Context, path string) (net.Conn, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("agent socket %s is not a socket (mode %o)", path, st.Mode&unix.S_IFMT)
	}
	var d net.Dialer
	return d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
}
