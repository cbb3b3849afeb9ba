package backendtest_test

import (
	"flag"
	"os"
	"testing"

	"github.com/paddock-sandbox/paddock/internal/backend/backendtest"
	"github.com/paddock-sandbox/paddock/internal/backend/fake"
)

var (
	backend = flag.String("backend", "fake", "backend to run the conformance suite against: fake, container or all")
	binDir  = flag.String("paddock.bin", "", "directory holding paddock-agent and runc for -backend=container (default: the module's bin/)")
)

func TestMain(m *testing.M) {
	fake.HandleShim()
	os.Exit(m.Run())
}

func TestConformance(t *testing.T) {
	runFake := *backend == "fake" || *backend == "all"
	runContainer := *backend == "container" || *backend == "all"
	if !runFake && !runContainer {
		t.Fatalf("-backend=%q: want fake, container or all", *backend)
	}
	if runFake {
		t.Run("fake", func(t *testing.T) { backendtest.Run(t, backendtest.Fake()) })
	}
	if runContainer {
		dir := *binDir
		if dir == "" {
			dir = backendtest.DefaultBinDir()
		}
		t.Run("container", func(t *testing.T) { backendtest.Run(t, backendtest.Container(dir)) })
	}
}
