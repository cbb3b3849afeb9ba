package integration

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// advCPUUsageNS is the CPU time consumed so far by sandbox id's cgroup, read
// on the host (cgroup v1 cpuacct or v2 cpu.stat); -1 if not found.
func advCPUUsageNS(id string) int64 {
	for _, dir := range cgroupDirsOf(id) {
		if n := cgroupCPUNS(dir); n >= 0 {
			return n
		}
	}
	return -1
}

// advSpinAll is a shell command keeping every host core (twice over) busy.
const advSpinAll = `n=$(( $(nproc) * 2 )); for i in $(seq $n); do (while :; do :; done) & done; wait`

// TestAdversarialCPUSpin spins every core from one sandbox: with the
// default 1 vCPU its cgroup gets about one core's worth of CPU time; with
// a quota of every host core, another tenant's python3 still runs.
func TestAdversarialCPUSpin(t *testing.T) {
	ctx := ctxT(t)
	other := newSandboxOn(t, shared, 1, nil)
	pyExec := func() time.Duration {
		start := time.Now()
		res, err := other.Exec(ctx, api.ExecRequest{Argv: []string{"python3", "-c", "print(sum(range(10**6)))"}, TimeoutSeconds: 60})
		if err != nil || res.Stdout != "499999500000\n" {
			t.Fatalf("other tenant's python3: %+v %v", res, err)
		}
		return time.Since(start)
	}
	baseline := pyExec()
	for _, vcpus := range []float64{1, float64(runtime.NumCPU())} {
		t.Run(fmt.Sprintf("vcpus=%g", vcpus), func(t *testing.T) {
			sb := newSandbox(t, &api.CreateSandboxRequest{Resources: &api.Resources{VCPUs: vcpus}})
			p, err := sb.Start(ctx, api.ExecRequest{Command: advSpinAll, TimeoutSeconds: 30})
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond) // let the spinners start
			var py []time.Duration
			var cores float64
			worst := advProbe(t, func() {
				u0, t0 := advCPUUsageNS(sb.ID), time.Now()
				for range 3 {
					py = append(py, pyExec())
				}
				if d := time.Since(t0); d < 2*time.Second {
					time.Sleep(2*time.Second - d)
				}
				u1, t1 := advCPUUsageNS(sb.ID), time.Now()
				if u0 >= 0 && u1 >= 0 {
					cores = float64(u1-u0) / float64(t1.Sub(t0).Nanoseconds())
				}
			})
			if err := p.Kill(ctx); err != nil {
				t.Errorf("kill spinner: %v", err)
			}
			t.Logf("%d host cores, quota %g vCPU: spinner used %.2f cores; other tenant's python3 -c took %v (idle baseline %v); worst exec+health latency %v",
				runtime.NumCPU(), vcpus, cores, py, baseline, worst)
			if cores == 0 {
				t.Errorf("no CPU usage measured for the spinner's cgroup (%v)", cgroupDirsOf(sb.ID))
			}
			if cores > vcpus*1.25+0.1 {
				t.Errorf("spinner used %.2f cores with a quota of %g", cores, vcpus)
			}
			res := advExec(t, sb, "echo usable", 10)
			if res.Stdout != "usable\n" {
				t.Errorf("spinning sandbox after kill: %+v", res)
			}
		})
	}
}

// advSeqBytes is the length of `seq 1 n` output.
func advSeqBytes(n int64) int64 {
	var total int64
	for d, lo := int64(1), int64(1); lo <= n; d, lo = d+1, lo*10 {
		hi := min(lo*10-1, n)
		total += (hi - lo + 1) * (d + 1)
	}
	return total
}

// TestAdversarialOutputFlood prints far more than anyone should keep: the
// output is capped (and counted) inside the sandbox, and the daemon's memory
// does not follow the flood.
func TestAdversarialOutputFlood(t *testing.T) {
	ctx := ctxT(t)
	sb := newSandbox(t, nil)
	rss0 := advDaemonRSS()
	var peak int64
	worst := advProbe(t, func() {
		t.Run("seq 1e9 with a short timeout", func(t *testing.T) {
			res, err := sb.Exec(ctx, api.ExecRequest{Argv: []string{"seq", "1000000000"}, TimeoutSeconds: 4})
			if err != nil {
				t.Fatal(err)
			}
			if !res.TimedOut || !res.StdoutTruncated || len(res.Stdout) != 64<<10 || res.StdoutBytes <= 64<<10 {
				t.Errorf("got timed_out %v truncated %v kept %d counted %d", res.TimedOut, res.StdoutTruncated, len(res.Stdout), res.StdoutBytes)
			}
			t.Logf("seq printed %d MiB in 4 s; %d bytes kept", res.StdoutBytes>>20, len(res.Stdout))
			peak = max(peak, advDaemonRSS())
		})
		t.Run("1 GiB on each stream", func(t *testing.T) {
			res, err := sb.Exec(ctx, api.ExecRequest{Command: "head -c 1G /dev/zero | tr '\\0' x; head -c 1G /dev/zero >&2", TimeoutSeconds: 60})
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode == nil || *res.ExitCode != 0 || res.StdoutBytes != 1<<30 || res.StderrBytes != 1<<30 ||
				len(res.Stdout) != 64<<10 || len(res.Stderr) != 64<<10 || !res.StdoutTruncated || !res.StderrTruncated {
				t.Errorf("got exit %v bytes %d/%d kept %d/%d", ptr(res.ExitCode), res.StdoutBytes, res.StderrBytes, len(res.Stdout), len(res.Stderr))
			}
			t.Logf("2 GiB of output in %d ms", res.DurationMS)
			peak = max(peak, advDaemonRSS())
		})
		t.Run("largest cap, streamed", func(t *testing.T) {
			var streamed int64
			var exit *api.Event
			for ev, err := range sb.ExecStream(ctx, api.ExecRequest{Argv: []string{"seq", "1000000000"}, TimeoutSeconds: 4, MaxOutputBytes: 16 << 20}) {
				if err != nil {
					t.Fatal(err)
				}
				switch ev.Type {
				case api.EventStdout:
					streamed += int64(len(ev.Data))
					peak = max(peak, advDaemonRSS())
				case api.EventExit:
					exit = &ev
				}
			}
			if exit == nil || exit.ExecResult == nil {
				t.Fatal("no exit event")
			}
			if streamed != 16<<20 || !exit.TimedOut || !exit.StdoutTruncated || exit.StdoutBytes <= streamed {
				t.Errorf("streamed %d bytes, exit %+v", streamed, exit.ExecResult)
			}
			t.Logf("streamed %d MiB of %d MiB printed", streamed>>20, exit.StdoutBytes>>20)
		})
		t.Run("background process floods", func(t *testing.T) {
			p, err := sb.Start(ctx, api.ExecRequest{Command: "yes flood; yes flood >&2", TimeoutSeconds: 3})
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.Wait(ctx, 30*time.Second)
			if err != nil || got.Result == nil {
				t.Fatalf("wait: %+v %v", got, err)
			}
			b, _ := json.Marshal(got)
			if len(b) > 1<<20 || !got.Result.TimedOut || got.Result.StdoutBytes <= 64<<10 {
				t.Errorf("background flood: %d-byte answer, %+v", len(b), got.Result.StdoutBytes)
			}
		})
	})
	rss1 := advDaemonRSS()
	peak = max(peak, rss1)
	t.Logf("paddockd VmRSS: %d MiB before, %d MiB peak, %d MiB after; worst other-tenant latency %v", rss0>>10, peak>>10, rss1>>10, worst)
	if peak-rss0 > 256<<10 {
		t.Errorf("paddockd grew by %d MiB during the flood", (peak-rss0)>>10)
	}
	if *long {
		t.Run("seq 1e9 to completion", func(t *testing.T) {
			want := advSeqBytes(1e9)
			res, err := sb.Exec(ctx, api.ExecRequest{Argv: []string{"seq", "1000000000"}, TimeoutSeconds: 1800})
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode == nil || *res.ExitCode != 0 || res.StdoutBytes != want || len(res.Stdout) != 64<<10 {
				t.Errorf("got exit %v, %d bytes counted (want %d), %d kept", ptr(res.ExitCode), res.StdoutBytes, want, len(res.Stdout))
			}
			t.Logf("seq 1e9: %d bytes in %d ms; paddockd VmRSS now %d MiB", res.StdoutBytes, res.DurationMS, advDaemonRSS()>>10)
		})
	}
}

// TestAdversarialManyFiles creates 100,000 files and lists them: the
// listing stops at 10,000 entries and says so.
func TestAdversarialManyFiles(t *testing.T) {
	requireDaemon(t)
	n, disk := 100_000, int64(2048) // ext4 gives one inode per 16 KiB
	if *long {
		n, disk = 1_000_000, 20480
	}
	sb := newSandbox(t, &api.CreateSandboxRequest{Resources: &api.Resources{DiskMiB: disk}})
	script := fmt.Sprintf(`import os
n = %d
for d in range(10):
    os.makedirs(f"/workspace/many/d{d}", exist_ok=True)
for i in range(n):
    open(f"/workspace/many/d{i %% 10}/f{i}", "w").close()
for i in range(20000):
    open(f"/workspace/many/flat{i}", "w").close()
print(sum(len(fs) for _, _, fs in os.walk("/workspace/many")))
`, n)
	rss0 := advDaemonRSS()
	var listed []string
	worst := advProbe(t, func() {
		res, err := sb.Exec(ctxT(t), api.ExecRequest{Argv: []string{"python3", "-c", script}, TimeoutSeconds: 600})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode == nil || *res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != strconv.Itoa(n+20000) {
			t.Fatalf("creating %d files: %+v", n, res)
		}
		t.Logf("created %d files in %d ms", n+20000, res.DurationMS)
		for _, q := range []string{"path=/workspace/many&depth=1", "path=/workspace&depth=3", "path=/&depth=20"} {
			start := time.Now()
			status, body := advRequest(t, "GET", "/v1/sandboxes/"+sb.ID+"/files/list?"+q, nil, nil)
			var lr api.ListFilesResponse
			if status != 200 || json.Unmarshal(body, &lr) != nil {
				t.Fatalf("list %s: %d %.200q", q, status, body)
			}
			if len(lr.Entries) != 10000 || !lr.Truncated {
				t.Errorf("list %s: %d entries, truncated %v; want 10000, true", q, len(lr.Entries), lr.Truncated)
			}
			listed = append(listed, fmt.Sprintf("%s: %d entries, %d KiB, %v", q, len(lr.Entries), len(body)>>10, time.Since(start).Round(time.Millisecond)))
		}
	})
	t.Logf("listings: %s; paddockd VmRSS %d -> %d MiB; worst other-tenant latency %v", strings.Join(listed, "; "), rss0>>10, advDaemonRSS()>>10, worst)
}
