package integration

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// poolUIDBase is the uid range of the warm-pool tests' daemons.
const poolUIDBase = crashUIDBase + 1000*65536

// startPoolDaemon starts a daemon with its own uid range (slot n) and
// stops it at the end of the test without leaking its pool (see
// stopPoolDaemon).
func startPoolDaemon(t testing.TB, slot int, config string, args ...string) *daemon {
	requireDaemon(t)
	t.Helper()
	base := poolUIDBase + slot*100*65536
	d, err := startDaemon(daemonOptions{config: config,
		extraArgs: append([]string{"--uid-base", strconv.Itoa(base), "--max-sandboxes", "10"}, args...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopPoolDaemon(t, d) })
	return d
}

// stopPoolDaemon stops d with SIGTERM, which leaves idle pool sandboxes
// running for the next start to destroy, restarts it without a pool (so
// Recover destroys them), and then shuts it down as usual.
func stopPoolDaemon(t testing.TB, d *daemon) {
	if d.cmd.ProcessState == nil {
		d.cmd.Process.Signal(syscall.SIGTERM)
		d.cmd.Wait()
	}
	d.opts.extraArgs = append(d.opts.extraArgs, "--warm-pool", "0")
	if err := d.start(); err != nil {
		t.Errorf("restart without pool: %v", err)
		return
	}
	d.shutdown()
}

// lifecycleEvents reads the paddock_lifecycle_events_total counters.
func lifecycleEvents(t testing.TB, d *daemon) map[string]int {
	t.Helper()
	resp, err := http.Get(d.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), `paddock_lifecycle_events_total{event="`)
		if !ok {
			continue
		}
		name, rest, _ := strings.Cut(line, `"}`)
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err == nil {
			out[name] = int(v)
		}
	}
	return out
}

// waitEvent waits until lifecycle event name has been counted n times.
func waitEvent(t testing.TB, d *daemon, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := lifecycleEvents(t, d)[name]
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for %d %q events, have %d (%v)\n%s", n, name, got, lifecycleEvents(t, d), d.logTail(3000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sandboxDirs lists the sandboxes that have a directory in d's state
// directory (live ones, the pool's included).
func sandboxDirs(d *daemon) []string {
	ents, _ := os.ReadDir(filepath.Join(d.stateDir, "containers"))
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestPool: creates are served from a pool of 2, a create with other
// memory, cpu, env and lease is served too and gets them, a create with
// another disk size is cold, the pool refills, and pool sandboxes are
// invisible to every key.
func TestPool(t *testing.T) {
	d := startPoolDaemon(t, 0, `{"warm_pool": {"base": {"min": 2, "max": 2}}}`)
	ctx := ctxT(t)
	waitEvent(t, d, "pool_create", 2)
	if dirs := sandboxDirs(d); len(dirs) != 2 {
		t.Fatalf("pool of 2, sandboxes on the host: %v", dirs)
	}
	for i := range d.keys {
		if l, err := d.client(i).List(ctx, client.ListOptions{State: "all"}); err != nil || len(l.Sandboxes) != 0 {
			t.Fatalf("key %d sees pool sandboxes: %+v %v", i, l, err)
		}
	}

	// A default create takes a pool sandbox.
	start := time.Now()
	plain := newSandboxOn(t, d, 0, nil)
	took := time.Since(start)
	ev := lifecycleEvents(t, d)
	if ev["pool_hit"] != 1 {
		t.Fatalf("default create: events %v", ev)
	}
	if !slices.Contains(sandboxDirs(d), plain.ID) {
		t.Fatalf("created sandbox %s has no directory", plain.ID)
	}
	if plain.Template != "base" || plain.State != api.StateRunning || time.Since(plain.CreatedAt) > time.Minute ||
		plain.ExpiresAt.Sub(plain.CreatedAt).Round(time.Second) != 300*time.Second {
		t.Fatalf("record of a pooled create: %+v", plain.Sandbox)
	}
	res, err := plain.Exec(ctx, api.ExecRequest{Argv: []string{"python3", "-c", "print(1)"}})
	if err != nil || res.Stdout != "1\n" || res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("exec: %+v %v", res, err)
	}
	t.Logf("pooled create took %v", took)

	// Other memory, cpu, env, lease and metadata: still from the pool.
	custom := newSandboxOn(t, d, 0, &api.CreateSandboxRequest{
		Resources:      &api.Resources{MemoryMiB: 256, VCPUs: 0.5},
		Env:            map[string]string{"POOL_GREETING": "hello from env", "LANG": "C"},
		Metadata:       map[string]string{"user": "alice"},
		TimeoutSeconds: 120,
	})
	ev = lifecycleEvents(t, d)
	if ev["pool_hit"] != 2 {
		t.Fatalf("create with other memory and env: events %v", ev)
	}
	if custom.Metadata["user"] != "alice" || custom.Resources.MemoryMiB != 256 || custom.Resources.PIDs != 256 ||
		custom.ExpiresAt.Sub(custom.CreatedAt).Round(time.Second) != 120*time.Second {
		t.Fatalf("record: %+v", custom.Sandbox)
	}
	res, err = custom.Exec(ctx, api.ExecRequest{Command: `echo "$POOL_GREETING/$LANG"
cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes
cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max
cat /sys/fs/cgroup/cpu.max 2>/dev/null || cat /sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us`})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if len(lines) != 4 || lines[0] != "hello from env/C" || lines[1] != strconv.Itoa(256<<20) || lines[2] != "2368" /* the default 256 × (1 + 8 shim threads) + the agent reserve of 64 (container.pidsMax) */ ||
		!strings.HasPrefix(lines[3], "50000") {
		t.Fatalf("env and limits in the sandbox: %q (stderr %q)", res.Stdout, res.Stderr)
	}
	// The request's env of one exec still wins; background processes get
	// the sandbox's env too.
	res, err = custom.Exec(ctx, api.ExecRequest{Command: `echo "$POOL_GREETING"`, Env: map[string]string{"POOL_GREETING": "per exec"}})
	if err != nil || res.Stdout != "per exec\n" {
		t.Fatalf("exec env over sandbox env: %+v %v", res, err)
	}
	p, err := custom.Start(ctx, api.ExecRequest{Command: `echo "$POOL_GREETING"`})
	if err != nil {
		t.Fatal(err)
	}
	if pr, err := p.Wait(ctx, 30*time.Second); err != nil || pr.Result == nil || pr.Result.Stdout != "hello from env\n" {
		t.Fatalf("process env: %+v %v", pr, err)
	}
	// Memory is really limited: 300 MiB does not fit in 256.
	res, err = custom.Exec(ctx, api.ExecRequest{Argv: []string{"python3", "-c", "b = bytearray(300 << 20); print('allocated')"}})
	if err != nil || (res.ExitCode != nil && *res.ExitCode == 0) {
		t.Fatalf("300 MiB in a 256 MiB sandbox: %+v %v", res, err)
	}

	// Bob sees neither alice's sandboxes nor the pool.
	if l, err := d.client(1).List(ctx, client.ListOptions{State: "all"}); err != nil || len(l.Sandboxes) != 0 {
		t.Fatalf("bob sees: %+v %v", l, err)
	}

	// The pool refills to 2.
	waitEvent(t, d, "pool_create", 4)
	if dirs := sandboxDirs(d); len(dirs) != 4 {
		t.Fatalf("2 sandboxes + pool of 2, on the host: %v", dirs)
	}

	// Another disk size cannot be applied: a cold create.
	disk := newSandboxOn(t, d, 0, &api.CreateSandboxRequest{Resources: &api.Resources{DiskMiB: 256}, Env: map[string]string{"X": "cold"}})
	ev = lifecycleEvents(t, d)
	if ev["pool_hit"] != 2 || ev["pool_miss"] != 1 {
		t.Fatalf("create with another disk size: events %v", ev)
	}
	// Its disk holds up to 256 MiB, not the default: a 300 MB write
	// stops short (df shows the shared pool's size in the quota disk
	// mode, so the limit is shown by filling it).
	res, err = disk.Exec(ctx, api.ExecRequest{Command: `echo $X; head -c 300000000 /dev/zero > /workspace/big 2>/dev/null; echo $?; stat -c %s /workspace/big; rm -f /workspace/big`})
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(res.Stdout)
	if len(f) != 3 || f[0] != "cold" || f[1] == "0" {
		t.Fatalf("cold sandbox: %q", res.Stdout)
	}
	if size, _ := strconv.Atoi(f[2]); size > 256<<20 || size < 150<<20 {
		t.Fatalf("cold sandbox with a 256 MiB disk wrote %d bytes: %q", size, res.Stdout)
	}
	if dirs := sandboxDirs(d); len(dirs) != 5 {
		t.Fatalf("3 sandboxes + pool of 2, on the host: %v", dirs)
	}

	// Deleted handed-out sandboxes leave; the pool stays at 2.
	for _, sb := range []*client.Sandbox{plain, custom, disk} {
		if err := sb.Kill(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if dirs := settledDirs(d, 2); len(dirs) != 2 {
		t.Fatalf("pool of 2 after deletes: %v", dirs)
	}
	ev = lifecycleEvents(t, d)
	if ev["create"] != 3 || ev["delete"] != 3 || ev["pool_create"] != 4 {
		t.Fatalf("events: %v", ev)
	}
}

// TestPoolCapacity: pool sandboxes count against --max-sandboxes but not
// against the per-key limit, and a create on a full host destroys an idle
// pool sandbox rather than fail.
func TestPoolCapacity(t *testing.T) {
	d := startPoolDaemon(t, 1, "", "--warm-pool", "2", "--warm-pool-min", "2", "--max-sandboxes", "3", "--max-sandboxes-per-key", "2")
	ctx := ctxT(t)
	waitEvent(t, d, "pool_create", 2)
	a := newSandboxOn(t, d, 0, nil)
	b := newSandboxOn(t, d, 0, nil)
	if ev := lifecycleEvents(t, d); ev["pool_hit"] != 2 {
		t.Fatalf("events %v", ev)
	}
	// The pool refills into the one slot left.
	waitEvent(t, d, "pool_create", 3)
	if dirs := sandboxDirs(d); len(dirs) != 3 {
		t.Fatalf("host of 3: %v", dirs)
	}
	// The per-key limit holds for pooled creates (and the pool sandbox
	// stays).
	if _, err := d.client(0).Create(ctx, nil); !errors.Is(err, client.ErrLimitExceeded) {
		t.Fatalf("third sandbox of a key limited to 2: %v", err)
	}
	// A cold create refused anyway (per-key limit; the host's check comes
	// first) does not cost the pool its sandbox.
	_, err := d.client(0).Create(ctx, &api.CreateSandboxRequest{Resources: &api.Resources{DiskMiB: 128}})
	if !errors.Is(err, client.ErrLimitExceeded) && !errors.Is(err, client.ErrNoCapacity) {
		t.Fatalf("third sandbox of a key limited to 2 (cold): %v", err)
	}
	if dirs := sandboxDirs(d); len(dirs) != 3 || lifecycleEvents(t, d)["pool_discard"] != 0 {
		t.Fatalf("host of 3: %v", dirs)
	}
	// Bob's create (another disk: cold) finds the host full and takes the
	// pool's slot.
	cold := newSandboxOn(t, d, 1, &api.CreateSandboxRequest{Resources: &api.Resources{DiskMiB: 128}})
	if res, err := cold.Run(ctx, "echo ok"); err != nil || res.Stdout != "ok\n" {
		t.Fatalf("cold create on a full host: %+v %v", res, err)
	}
	dirs := sandboxDirs(d)
	if len(dirs) != 3 || !slices.Contains(dirs, a.ID) || !slices.Contains(dirs, b.ID) || !slices.Contains(dirs, cold.ID) {
		t.Fatalf("host of 3 after the yield: %v", dirs)
	}
	if ev := lifecycleEvents(t, d); ev["pool_discard"] != 1 {
		t.Fatalf("events %v", ev)
	}
	// The host is full of users' sandboxes: a fourth is refused.
	if _, err := d.client(1).Create(ctx, nil); !errors.Is(err, client.ErrNoCapacity) {
		t.Fatalf("fourth sandbox on a host of 3: %v", err)
	}
}

// TestPoolRestart: after a crash the handed-out sandbox is re-adopted with
// its env, the idle pool sandboxes are destroyed and replaced, and once
// everything is deleted nothing is left on the host.
func TestPoolRestart(t *testing.T) {
	d := startPoolDaemon(t, 2, "", "--warm-pool", "2", "--warm-pool-min", "2")
	base := poolUIDBase + 2*100*65536
	ctx := ctxT(t)
	waitEvent(t, d, "pool_create", 2)
	first := sandboxDirs(d)
	sb := newSandboxOn(t, d, 0, &api.CreateSandboxRequest{Env: map[string]string{"KEPT": "yes"}})
	if !slices.Contains(first, sb.ID) {
		t.Fatalf("create not served from the pool %v: %s", first, sb.ID)
	}
	waitEvent(t, d, "pool_create", 3)
	seen := sandboxDirs(d)
	d.kill9()
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	res, err := sb.Exec(ctx, api.ExecRequest{Command: "echo $KEPT"})
	if err != nil || res.Stdout != "yes\n" {
		t.Fatalf("handed-out sandbox after a crash: %+v %v", res, err)
	}
	waitEvent(t, d, "pool_create", 2) // counters restart with the daemon
	now := sandboxDirs(d)
	if len(now) != 3 || !slices.Contains(now, sb.ID) {
		t.Fatalf("after restart: %v (before: %v)", now, seen)
	}
	for _, id := range seen {
		if id != sb.ID && (slices.Contains(now, id) || len(cgroupDirsOf(id)) > 0) {
			t.Fatalf("idle pool sandbox %s survived the restart: %v", id, now)
		}
	}
	all := append(slices.Clone(seen), now...)
	// A graceful stop destroys the idle pool and leaves alice's sandbox
	// running.
	stopPoolDaemonKeep(t, d)
	if err := sb.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if tr := settledTraces(d.stateDir, all, base, base+64*65536); !tr.zero() {
		t.Fatalf("leaked: %+v", tr)
	}
	if dirs := settledDirs(d, 0); len(dirs) != 0 {
		t.Fatalf("left after deleting everything: %v", dirs)
	}
	if tr := tracesOf(d.stateDir, all, base, base+64*65536); !tr.zero() {
		t.Fatalf("leaked: %+v", tr)
	}
	if l, err := d.client(0).List(ctx, client.ListOptions{State: "all"}); err != nil || len(l.Sandboxes) != 1 {
		t.Fatalf("alice's records: %+v %v", l, err)
	}
	t.Logf("no traces of the %d sandboxes seen", len(all))
}

// stopPoolDaemonKeep stops d gracefully and starts it again without a
// pool, leaving it running.
func stopPoolDaemonKeep(t *testing.T, d *daemon) {
	d.cmd.Process.Signal(syscall.SIGTERM)
	d.cmd.Wait()
	if dirs := sandboxDirs(d); len(dirs) != 1 {
		t.Fatalf("a graceful stop leaves alice's sandbox running and destroys the idle pool: %v", dirs)
	}
	d.opts.extraArgs = append(d.opts.extraArgs, "--warm-pool", "0")
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := d.client(0).Get(ctx, "x"); err == nil {
		t.Fatal("unknown sandbox found")
	}
}
