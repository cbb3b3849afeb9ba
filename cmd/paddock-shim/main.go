// Command paddock-shim is the guest agent's command shim (package shim):
// the agent starts every command of a sandbox under it. It is installed
// next to paddock-agent (in /.paddock of every container sandbox, and by
// "paddock-agent install" in pod mode); without it the agent runs its own
// binary as the shim, which starts about 7 ms slower.
//
//	paddock-shim [shim] [--status-fd N] [--control-fd N]
//
// It is not meant to be run by hand: it waits for a spec on the control
// descriptor and exits at once when that descriptor is closed.
package main

import (
	"os"

	"github.com/paddock-sandbox/paddock/internal/shim"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "shim" {
		args = args[1:]
	}
	os.Exit(shim.Run(args))
}
