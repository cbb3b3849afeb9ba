package fake

import (
	"os"

	"github.com/paddock-sandbox/paddock/internal/shim"
)

// shimEnv names the binary that serves as the agent's command shim; set by
// HandleShim, read by NewHost.
const shimEnv = "PADDOCK_FAKE_SHIM"

// HandleShim makes the running test binary serve as the agent's command
// shim. Call it first in TestMain. In the test process it returns at once
// and records the binary as the shim; in a shim process (started by an
// agent with the "shim" argument) it runs the shim and exits. Hosts made
// in a process that did not call it answer exec with an error instead of
// starting the test binary, which would run its tests again.
func HandleShim() {
	if len(os.Args) > 1 && os.Args[1] == "shim" {
		os.Exit(shim.Run(os.Args[2:]))
	}
	if exe, err := os.Executable(); err == nil {
		os.Setenv(shimEnv, exe)
	}
}
