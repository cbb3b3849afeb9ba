package container_test

import (
	"flag"
	"testing"

	"github.com/paddock-sandbox/paddock/internal/backend/backendtest"
)

var binDir = flag.String("paddock.bin", "", "directory holding paddock-agent and runc (default: the module's bin/)")

// TestConformance runs the Backend conformance suite against this
// backend. It needs root and the built binaries (make build); without them
// every subtest skips and says why.
func TestConformance(t *testing.T) {
	dir := *binDir
	if dir == "" {
		dir = backendtest.DefaultBinDir()
	}
	backendtest.Run(t, backendtest.Container(dir))
}
