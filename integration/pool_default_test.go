package integration

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// limitsProbe prints what bounds a sandbox from inside: RLIMIT_NPROC of
// its commands, the memory, pids and cpu limits of its cgroup, the size
// of /dev/shm and its network interfaces.
const limitsProbe = `ulimit -u
cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes
cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max
cat /sys/fs/cgroup/cpu.max 2>/dev/null || cat /sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us
df -k --output=size /dev/shm | tail -1
ls /sys/class/net | tr '\n' ' '`

// limitsRequests are the creates whose limits TestPoolDefault and
// TestPoolOff compare, pooled and cold.
var limitsRequests = []*api.CreateSandboxRequest{
	nil,
	{Resources: &api.Resources{MemoryMiB: 1024, VCPUs: 2}, TimeoutSeconds: 77},
	{Resources: &api.Resources{PIDs: 100}, TimeoutSeconds: 60},
	{Resources: &api.Resources{MemoryMiB: 128}},
}

// probeLimits creates a sandbox per limitsRequests on d and returns what
// limitsProbe printed in each and its lease.
func probeLimits(t *testing.T, d *daemon) []string {
	t.Helper()
	ctx := ctxT(t)
	var out []string
	for _, req := range limitsRequests {
		sb := newSandboxOn(t, d, 0, req)
		res, err := sb.Exec(ctx, api.ExecRequest{Command: limitsProbe})
		if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
			t.Fatalf("probe: %+v %v", res, err)
		}
		lease := sb.ExpiresAt.Sub(sb.CreatedAt).Round(time.Second)
		out = append(out, strings.TrimSpace(res.Stdout)+" lease="+lease.String())
		if err := sb.Kill(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestPoolDefault: a daemon started without any pool flag or config keeps
// a warm pool of the base template, a default create is served from it,
// and the limits, network and lease of pooled sandboxes are exactly those
// of cold ones (TestPoolOff compares them).
func TestPoolDefault(t *testing.T) {
	d := startPoolDaemon(t, 4, "")
	ctx := ctxT(t)
	waitEvent(t, d, "pool_create", 1)
	if dirs := sandboxDirs(d); len(dirs) != 1 {
		t.Fatalf("default pool (min 1) on the host: %v", dirs)
	}
	idle := sandboxDirs(d)
	sb := newSandboxOn(t, d, 0, nil)
	if ev := lifecycleEvents(t, d); ev["pool_hit"] != 1 || !slices.Contains(idle, sb.ID) {
		t.Fatalf("default create not from the pool %v: %s, events %v", idle, sb.ID, ev)
	}
	res, err := sb.Exec(ctx, api.ExecRequest{Argv: []string{"python3", "-c", "print(1)"}})
	if err != nil || res.Stdout != "1\n" {
		t.Fatalf("exec: %+v %v", res, err)
	}
	// Demand grows the pool above its minimum.
	for range 3 {
		newSandboxOn(t, d, 1, nil)
	}
	if dirs := settledDirs(d, 8); len(dirs) != 8 {
		t.Fatalf("4 creates in a minute: 4 sandboxes and a pool of 4 expected, on the host: %v", dirs)
	}
	pooled := probeLimits(t, d)
	if ev := lifecycleEvents(t, d); ev["pool_hit"] < 3 {
		t.Fatalf("events %v", ev)
	}
	t.Logf("pooled limits: %q", pooled)
	poolLimits = pooled
}

// poolLimits are TestPoolDefault's figures, for TestPoolOff.
var poolLimits []string

// TestPoolOff: --warm-pool 0 keeps no idle sandbox and every create is
// cold; the limits the same creates get match those of pooled sandboxes.
func TestPoolOff(t *testing.T) {
	d := startPoolDaemon(t, 5, "", "--warm-pool", "0")
	ctx := ctxT(t)
	time.Sleep(2 * time.Second)
	if dirs := sandboxDirs(d); len(dirs) != 0 {
		t.Fatalf("sandboxes with the pool off: %v", dirs)
	}
	cold := probeLimits(t, d)
	if ev := lifecycleEvents(t, d); ev["pool_create"] != 0 || ev["pool_hit"] != 0 || ev["create"] != len(limitsRequests) {
		t.Fatalf("events with the pool off: %v", ev)
	}
	if dirs := settledDirs(d, 0); len(dirs) != 0 {
		t.Fatalf("left: %v", dirs)
	}
	if l, err := d.client(0).List(ctx, client.ListOptions{}); err != nil || len(l.Sandboxes) != 0 {
		t.Fatalf("list: %+v %v", l, err)
	}
	if poolLimits == nil {
		d2 := startPoolDaemon(t, 6, "")
		waitEvent(t, d2, "pool_create", 1)
		poolLimits = probeLimits(t, d2)
	}
	if !sameLimits(cold, poolLimits) {
		t.Fatalf("limits differ:\ncold   %q\npooled %q", cold, poolLimits)
	}
}

// sameLimits compares probeLimits outputs: everything exactly but the
// RLIMIT_NPROC line, which the guest agent sets to the pids limit plus its
// own threads and a few per running command (agent.commandNProc), so it
// may differ by a few between two agents; a pids limit of 100 against 256
// differs by far more than nprocSlack.
func sameLimits(a, b []string) bool {
	const nprocSlack = 32
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		na, ra, _ := strings.Cut(a[i], "\n")
		nb, rb, _ := strings.Cut(b[i], "\n")
		x, err1 := strconv.Atoi(na)
		y, err2 := strconv.Atoi(nb)
		if err1 != nil || err2 != nil || ra != rb || x-y > nprocSlack || y-x > nprocSlack {
			return false
		}
	}
	return true
}

// TestPoolNoReuse: a sandbox from the pool goes to one tenant only; once
// deleted it never comes back, and no later create (of either tenant)
// sees what an earlier one left.
func TestPoolNoReuse(t *testing.T) {
	d := startPoolDaemon(t, 7, `{"warm_pool": {"base": {"min": 2, "max": 2}}}`)
	ctx := ctxT(t)
	waitEvent(t, d, "pool_create", 2)
	seen := map[string]string{}
	for i := range 6 {
		key := i % 2
		sb := newSandboxOn(t, d, key, nil)
		if prev, ok := seen[sb.ID]; ok {
			t.Fatalf("sandbox %s handed out twice (first to %s)", sb.ID, prev)
		}
		seen[sb.ID] = d.keys[key]
		res, err := sb.Exec(ctx, api.ExecRequest{Command: `ls /workspace /tmp; cat /tmp/mark 2>/dev/null; echo touched > /tmp/mark; echo x > /workspace/mark`})
		if err != nil || strings.Contains(res.Stdout, "mark") || strings.Contains(res.Stdout, "touched") {
			t.Fatalf("create %d sees an earlier tenant's files: %+v %v", i, res, err)
		}
		other := d.client(1 - key)
		if _, err := other.Get(ctx, sb.ID); err == nil {
			t.Fatalf("the other key sees %s", sb.ID)
		}
		if i%3 == 2 {
			if err := sb.Kill(ctx); err != nil {
				t.Fatal(err)
			}
		}
		waitEvent(t, d, "pool_create", 3+i)
	}
	// 4 sandboxes of the tenants and the pool of 2; none of the deleted.
	dirs := settledDirs(d, 6)
	for _, id := range dirs {
		if _, ok := seen[id]; ok && !d.alive(ctx, id) {
			t.Fatalf("a deleted sandbox %s is back on the host: %v", id, dirs)
		}
	}
	if len(dirs) != 6 {
		t.Fatalf("on the host: %v", dirs)
	}
	if ev := lifecycleEvents(t, d); ev["pool_hit"] != 6 {
		t.Fatalf("events %v", ev)
	}
}

// alive reports whether a sandbox some key created is still running for
// that key.
func (d *daemon) alive(ctx context.Context, id string) bool {
	for i := range d.keys {
		if sb, err := d.client(i).Get(ctx, id); err == nil && sb.State == api.StateRunning {
			return true
		}
	}
	return false
}
