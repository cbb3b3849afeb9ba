package main

import (
	"os"
	"path/filepath"

	"github.com/paddock-sandbox/paddock/internal/shim"
)

// shimName is the separate shim binary the agent looks for next to itself.
const shimName = shim.Name

// findShim returns paddock-shim next to this binary for the agent to run
// as its command shim (agent.Config.ShimPath), or "": the agent then runs
// its own binary as the shim, which starts about 7 ms slower.
//
// The path is run as it is at each start. Nothing in a sandbox can change
// it: in a container sandbox it belongs to host root, which the sandbox's
// user namespace does not map, in a directory of a read-only lower layer
// (TestAdversarialProcExe); in pod mode its volume is mounted read-only.
func findShim() string {
	self, err := os.Executable()
	if err != nil {
		return ""
	}
	return shimIn(filepath.Dir(self))
}

// shimIn returns dir's paddock-shim if it is a regular executable file
// (not a symlink), else "".
func shimIn(dir string) string {
	p := filepath.Join(dir, shimName)
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return ""
	}
	return p
}
