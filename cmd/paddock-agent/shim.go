package main

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// shimName is the separate shim binary the agent looks for next to itself.
const shimName = "paddock-shim"

// findShim opens paddock-shim next to this binary for the agent to run as
// its command shim (agent.Config.ShimFile), or returns nil: the agent then
// runs its own binary as the shim, which starts about 8 ms slower.
//
// The file is opened now, before any command runs, and the agent runs it
// through the descriptor: that keeps the file that was there at start, so
// a command that later replaces or rewrites the path (in a container
// sandbox an overlay copy-up gives the path a new file) never gets its own
// program run with the agent's privileges.
func findShim() *os.File {
	self, err := os.Executable()
	if err != nil {
		return nil
	}
	return openShim(filepath.Dir(self))
}

// openShim opens dir's paddock-shim, a regular executable file that is not
// a symlink, or returns nil if there is none. It is opened with O_PATH:
// the agent only runs it.
func openShim(dir string) *os.File {
	p := filepath.Join(dir, shimName)
	fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o111 == 0 {
		unix.Close(fd)
		return nil
	}
	return os.NewFile(uintptr(fd), p)
}
