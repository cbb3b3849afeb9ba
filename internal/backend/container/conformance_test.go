package container_test

import (
	"flag"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/paddock-sandbox/paddock/internal/backend/backendtest"
)

var (
	binDir  = flag.String("paddock.bin", "", "directory holding paddock-agent and runc (default: the module's bin/)")
	runtime = flag.String("paddock.runtime", "runc", "OCI runtime the conformance suite runs: runc, crun or runsc")
	rtPath  = flag.String("paddock.runtime-path", "", "the runtime's binary (default: runc in -paddock.bin, else the name on PATH)")
)

// TestConformance runs the Backend conformance suite against this
// backend. It needs root, mkfs.ext4 and the built paddock-agent and runc
// (make build); without them it skips and says why. -paddock.runtime
// picks another runtime (make runsc-test runs it under gVisor).
func TestConformance(t *testing.T) {
	dir := *binDir
	if dir == "" {
		dir = backendtest.DefaultBinDir()
	}
	path := *rtPath
	if path == "" && *runtime == "runc" {
		path = filepath.Join(dir, "runc")
	} else if path == "" {
		path, _ = exec.LookPath(*runtime)
	}
	backendtest.Run(t, backendtest.ContainerRuntime(dir, *runtime, path))
}
