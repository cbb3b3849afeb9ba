package integration

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
	"github.com/paddock-sandbox/paddock/internal/backend/container"
	"github.com/paddock-sandbox/paddock/internal/network"
)

var (
	binDir = flag.String("paddock.bin", "", "directory holding paddockd, paddock-agent, paddock and runc (default ../bin)")
	long   = flag.Bool("paddock.long", false, "run long variants")
	// remoteURL and remoteKeys point the tests at a running server (the
	// cluster test runs the SDK suite through a gateway this way); only
	// tests that use nothing but the API (url, keys, clients) can run so.
	remoteURL  = flag.String("paddock.url", "", "run against this server instead of starting paddockd (API-only tests)")
	remoteKeys = flag.String("paddock.keys", "", "with -paddock.url: the two API keys (alice,bob), comma-separated")
)

// shared is the daemon most tests share.
var shared *daemon

// skipReason says why this host cannot run the integration tests (not
// root, or no binaries in the default ../bin); every test skips with it
// through requireDaemon. Set by TestMain only.
var skipReason string

func TestMain(m *testing.M) {
	flag.Parse()
	if *remoteURL != "" {
		os.Exit(runRemote(m))
	}
	explicitBin := *binDir != ""
	if !explicitBin {
		abs, _ := filepath.Abs("../bin")
		*binDir = abs
	}
	_, binErr := os.Stat(filepath.Join(*binDir, "paddockd"))
	switch {
	case os.Geteuid() != 0:
		skipReason = "integration tests need root (they run paddockd, runc, mounts and cgroups)"
	case binErr != nil && explicitBin:
		// -paddock.bin named binaries that are not there: a broken run,
		// not a host that cannot run the tests.
		fmt.Fprintf(os.Stderr, "no paddockd in -paddock.bin %s\n", *binDir)
		os.Exit(1)
	case binErr != nil:
		skipReason = fmt.Sprintf("no paddockd in %s: run `make build` first or pass -paddock.bin", *binDir)
	}
	if skipReason != "" {
		os.Exit(m.Run()) // every test skips with the reason
	}
	// python-3.12 is an alias of base (see TestBasePythonAndAliases).
	opts := daemonOptions{extraArgs: []string{"--template-alias", "python-3.12=base"}}
	if _, err := exec.LookPath("crun"); err == nil {
		// A template served by another runtime, picked by configuration.
		opts.config = `{"templates": {"base-crun": {"runtime": "crun"}}, "network": {"disabled": true}}`
	}
	d, err := startDaemon(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared = d
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "--- paddockd log (tail) ---\n%s\n", d.logTail(8000))
	}
	d.shutdown()
	os.Exit(code)
}

type daemonOptions struct {
	extraArgs []string
	config    string // JSON config file contents
	stateDir  string // reuse a state directory (restart tests)
	listen    string
	bin       string // directory of another build (benchmarks' baselines); default -paddock.bin
}

// daemon is one running paddockd.
type daemon struct {
	opts     daemonOptions
	cmd      *exec.Cmd
	url      string
	stateDir string
	keys     []string
	log      *syncBuffer
}

func runtimeName() string {
	if r := os.Getenv("PADDOCK_TEST_RUNTIME"); r != "" {
		return r
	}
	return "runc"
}

func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func startDaemon(opts daemonOptions) (*daemon, error) {
	d := &daemon{opts: opts, stateDir: opts.stateDir, log: &syncBuffer{}}
	if d.stateDir == "" {
		dir, err := os.MkdirTemp("", "paddock-it-")
		if err != nil {
			return nil, err
		}
		d.stateDir = dir
		for _, name := range []string{"alice", "bob"} {
			out, err := exec.Command(filepath.Join(*binDir, "paddockd"), "keys", "create", "--state-dir", dir, "--name", name).Output()
			if err != nil {
				return nil, fmt.Errorf("keys create: %w", err)
			}
			d.keys = append(d.keys, strings.TrimSpace(string(out)))
		}
	}
	if opts.listen == "" {
		opts.listen = freePort()
		d.opts.listen = opts.listen
	}
	if err := d.start(); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *daemon) start() error {
	args := []string{"serve", "--state-dir", d.stateDir, "--listen", d.opts.listen,
		"--runtime", runtimeName(), "--log-level", "debug",
		// The tests' registries listen on loopback (tests of the registry
		// policy pass their own --registry-allow after this).
		"--registry-allow", "127.0.0.1,*"}
	if d.opts.config != "" {
		p := filepath.Join(d.stateDir, "config.json")
		if err := os.WriteFile(p, []byte(d.opts.config), 0o600); err != nil {
			return err
		}
		args = append(args, "--config", p)
	}
	args = append(args, d.opts.extraArgs...)
	bin := *binDir
	if d.opts.bin != "" {
		bin = d.opts.bin
	}
	d.cmd = exec.Command(filepath.Join(bin, "paddockd"), args...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		return err
	}
	d.url = "http://" + d.opts.listen
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(d.url + "/v1/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if d.cmd.ProcessState != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.cmd.Process.Kill()
	d.cmd.Wait()
	return fmt.Errorf("paddockd did not become healthy:\n%s", d.logTail(4000))
}

// client returns an SDK client for key i (0 = alice, 1 = bob).
func (d *daemon) client(i int) *client.Client { return client.New(d.url, d.keys[i]) }

// kill9 kills the daemon with SIGKILL, leaving its sandboxes behind.
func (d *daemon) kill9() {
	d.cmd.Process.Signal(syscall.SIGKILL)
	d.cmd.Wait()
}

// runRemote runs the tests against -paddock.url with -paddock.keys.
func runRemote(m *testing.M) int {
	keys := strings.Split(*remoteKeys, ",")
	if len(keys) != 2 {
		fmt.Fprintln(os.Stderr, "-paddock.url needs -paddock.keys with two keys")
		return 2
	}
	shared = &daemon{url: strings.TrimSuffix(*remoteURL, "/"), keys: keys}
	code := m.Run()
	shared.deleteAll()
	return code
}

// deleteAll deletes every sandbox of d's keys.
func (d *daemon) deleteAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range d.keys {
		c := d.client(i)
		for sb, err := range c.All(ctx, client.ListOptions{}) {
			if err != nil {
				break
			}
			c.Sandbox(sb.ID).Close()
		}
	}
}

// shutdown stops the daemon with SIGTERM, deletes every sandbox it still
// runs by restarting cleanup through the API, and removes the state.
func (d *daemon) shutdown() {
	d.deleteAll()
	d.cmd.Process.Signal(syscall.SIGTERM)
	d.cmd.Wait()
	// The daemon is gone for good: drop its packet-filter table too.
	network.RemoveTable(container.DefaultCgroupParent(d.stateDir))
	network.RemovePins(d.stateDir)
	syscall.Unmount(filepath.Join(d.stateDir, "disks"), syscall.MNT_DETACH) // the disk pool, if sandboxes were left
	os.RemoveAll(d.stateDir)
}

func (d *daemon) logTail(n int) string {
	s := d.log.String()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}

// syncBuffer is a goroutine-safe bytes.Buffer for process output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// requireDaemon skips t when this host cannot run the integration tests
// (see skipReason). The harness helpers call it; a test that starts with
// none of them calls it first.
func requireDaemon(t testing.TB) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
}

// newSandbox creates a sandbox on the shared daemon for key 0 and deletes
// it when the test ends.
func newSandbox(t testing.TB, req *api.CreateSandboxRequest) *client.Sandbox {
	t.Helper()
	return newSandboxOn(t, shared, 0, req)
}

func newSandboxOn(t testing.TB, d *daemon, key int, req *api.CreateSandboxRequest) *client.Sandbox {
	t.Helper()
	requireDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := d.client(key).Create(ctx, req)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

// ctxT is a test's context on the harness (two minutes); it skips t when
// the host cannot run the integration tests.
func ctxT(t testing.TB) context.Context {
	t.Helper()
	requireDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func ctxBG() context.Context { return context.Background() }
