package container_test

import (
	"flag"
	"testing"

	"github.com/paddock-sandbox/paddock/internal/backend/backendtest"
)

var binDir = flag.String("paddock.bin", "", "directory holding paddock-agent and runc (default: the module's bin/)")

// TestConformance runs the Backend conformance suite against this
// backend. It needs root, mkfs.ext4 and the built paddock-agent and runc
// (make build); without them it skips and says why.
func TestConformance(t *testing.T) {
	dir := *binDir
	if dir == "" {
		dir = backendtest.DefaultBinDir()
	}
	backendtest.Run(t, backendtest.Container(dir))
}
