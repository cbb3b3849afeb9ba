package backendtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/paddock-sandbox/paddock/internal/backend/container"
	"github.com/paddock-sandbox/paddock/internal/backend/fake"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"golang.org/x/sys/unix"
)

// Fake is the harness of the in-memory fake backend. The test binary's
// TestMain must call fake.HandleShim (the suite execs in sandboxes).
func Fake() Harness {
	return Harness{
		New: func(t *testing.T) sandbox.Backend {
			host, err := fake.NewHost(nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { host.Close() })
			return fake.New(host, fake.Config{})
		},
		Restart: func(t *testing.T, b sandbox.Backend) sandbox.Backend {
			return b.(*fake.Backend).Restart()
		},
		Kill: func(t *testing.T, b sandbox.Backend, id string) {
			if err := b.(*fake.Backend).Host().Kill(id); err != nil {
				t.Fatal(err)
			}
		},
	}
}

// DefaultBinDir is the bin/ directory of the module the test runs in
// (where make build puts paddock-agent and runc), or "".
func DefaultBinDir() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "bin")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Container is the harness of the OCI container backend, with the
// paddock-agent and runc binaries of binDir. Its New skips the test, with
// the reason, unless it runs as root with those binaries and mkfs.ext4.
func Container(binDir string) Harness {
	return ContainerRuntime(binDir, "runc", filepath.Join(binDir, "runc"))
}

// ContainerRuntime is Container with the OCI runtime name at path (runc,
// crun or runsc) as the default runtime.
func ContainerRuntime(binDir, name, path string) Harness {
	var mu sync.Mutex // guards configs
	configs := map[sandbox.Backend]container.Config{}
	configOf := func(b sandbox.Backend) container.Config {
		mu.Lock()
		defer mu.Unlock()
		return configs[b]
	}
	remember := func(b sandbox.Backend, cfg container.Config) {
		mu.Lock()
		defer mu.Unlock()
		configs[b] = cfg
	}
	var h Harness
	h.New = func(t *testing.T) sandbox.Backend {
		cfg := containerConfig(t, binDir)
		cfg.Runtimes, cfg.DefaultRuntime = map[string]string{name: path}, name
		b, err := container.New(cfg)
		if err != nil {
			t.Fatalf("container.New: %v", err)
		}
		remember(b, cfg)
		t.Cleanup(func() { cleanHost(t, cfg) })
		return b
	}
	h.Restart = func(t *testing.T, b sandbox.Backend) sandbox.Backend {
		cfg := configOf(b)
		b2, err := container.New(cfg)
		if err != nil {
			t.Fatalf("container.New after restart: %v", err)
		}
		remember(b2, cfg)
		return b2
	}
	h.Kill = func(t *testing.T, b sandbox.Backend, id string) {
		pidFile := filepath.Join(configOf(b).StateDir, "containers", id, "init.pid")
		data, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatalf("kill %s: %v", id, err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid <= 1 {
			t.Fatalf("kill %s: bad init pid %q", id, data)
		}
		if err := unix.Kill(pid, unix.SIGKILL); err != nil {
			t.Fatalf("kill %s (pid %d): %v", id, pid, err)
		}
	}
	h.Unavailable = func() string {
		if why := containerUnavailable(binDir); why != "" {
			return why
		}
		if !isFile(path) {
			return "the container backend with " + name + " needs " + path
		}
		return ""
	}
	return h
}

// containerUnavailable says why the container backend cannot run here.
func containerUnavailable(binDir string) string {
	if os.Geteuid() != 0 {
		return "the container backend needs root (namespaces, cgroups, loop mounts)"
	}
	for _, name := range []string{"paddock-agent", "paddock-shim", "runc"} {
		if p := filepath.Join(binDir, name); !isFile(p) {
			return "the container backend needs " + p + ": run make build (or pass -paddock.bin=DIR)"
		}
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		return "the container backend needs mkfs.ext4 (e2fsprogs)"
	}
	return ""
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// containerConfig skips t unless the container backend can run here, and
// returns a configuration over a fresh state directory.
func containerConfig(t *testing.T, binDir string) container.Config {
	t.Helper()
	if why := containerUnavailable(binDir); why != "" {
		t.Skip(why)
	}
	agentBin, runc := filepath.Join(binDir, "paddock-agent"), filepath.Join(binDir, "runc")
	// Short (socket paths) and traversable by the sandboxes' uid ranges.
	dir, err := os.MkdirTemp("", "pbt-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) }) // last, after cleanHost
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return container.Config{
		StateDir: dir, AgentBinary: agentBin,
		Runtimes: map[string]string{"runc": runc}, DefaultRuntime: "runc",
		// Away from a daemon's default uid ranges on the same host.
		UIDBase: 1 << 29, MaxSlots: 64,
	}
}

// cleanHost destroys whatever a test left on the host, and the backend's
// (then empty) parent cgroups.
func cleanHost(t *testing.T, cfg container.Config) {
	b, err := container.New(cfg)
	if err == nil {
		ids, _ := b.List(context.Background())
		for _, id := range ids {
			if err := b.Destroy(context.Background(), id); err != nil {
				t.Errorf("cleanup %s: %v", id, err)
			}
		}
		if err := b.Close(context.Background()); err != nil { // unmounts the disk pool
			t.Errorf("cleanup: %v", err)
		}
	}
	// Nothing the backend or its runtime mounted may outlive Close
	// (runsc's null-netns file was such a leak).
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(mi), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], cfg.StateDir+"/") {
				t.Errorf("mount left after Close: %s", f[4])
				unix.Unmount(f[4], unix.MNT_DETACH)
			}
		}
	}
	parent := container.DefaultCgroupParent(cfg.StateDir)
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", parent))
	for _, d := range append(dirs, filepath.Join("/sys/fs/cgroup", parent)) {
		os.Remove(d) // rmdir: fails, harmlessly, unless empty
	}
}
