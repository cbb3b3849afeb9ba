package integration

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	peersN          = flag.Int("paddock.peers.n", 20, "iterations of each latency row of BenchmarkPeers (per tool)")
	peersRounds     = flag.Int("paddock.peers.rounds", 3, "rounds of each throughput row of BenchmarkPeers (per tool)")
	peersRoundDur   = flag.Duration("paddock.peers.round", 8*time.Second, "length of one throughput round of BenchmarkPeers")
	peersIdleN      = flag.Int("paddock.peers.idle.n", 20, "idle sandboxes per tool in BenchmarkPeers' memory and CPU rows")
	peersIdleWindow = flag.Duration("paddock.peers.idle.window", 30*time.Second, "how long BenchmarkPeers measures the CPU of the idle sandboxes")
	peersPodmanRT   = flag.String("paddock.peers.podman-runtime", "", "podman's --runtime in BenchmarkPeers (default: the runc of -paddock.bin, the one Paddock runs)")
)

// peersUIDBase keeps BenchmarkPeers' uid ranges clear of every other test's.
const peersUIDBase = crashUIDBase + 2600*65536

// peerCell is one tool's figure in one row; na holds why there is none.
type peerCell struct {
	samples []float64 // in the row's unit
	p99ms   float64   // rows of rates: the p99 of one cycle, in ms
	na      string
}

// peerRow is a row of the table: unit, and whether a higher figure is
// better (rates).
type peerRow struct {
	name   string
	unit   string
	higher bool
	cells  []peerCell
}

// BenchmarkPeers runs Paddock, podman (run --rm, exec, cp) and bubblewrap
// side by side with matched work and limits (the host's /usr read-only, no
// network, 512 MiB, 1 CPU, 256 pids), interleaved (each iteration runs
// every tool, the order rotating), and prints one table: median, p99 and
// each peer's ratio to Paddock per row. `make bench-peers` installs the
// peers and runs it; docs/benchmarks.md has the figures and the flags.
func BenchmarkPeers(b *testing.B) {
	requireDaemon(b)
	for _, bin := range []string{"podman", "bwrap"} {
		if _, err := exec.LookPath(bin); err != nil {
			b.Fatalf("%s is missing: run scripts/peers-deps.sh (make bench-peers does)", bin)
		}
	}
	ctx := context.Background()
	if err := buildPeerImage(ctx); err != nil {
		b.Fatal(err)
	}
	d, err := startDaemon(daemonOptions{extraArgs: []string{"--uid-base", strconv.Itoa(peersUIDBase),
		"--max-sandboxes", strconv.Itoa(*peersIdleN + 16), "--max-sandboxes-per-key", "-1"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(d.shutdown)
	work := b.TempDir()
	os.Chmod(work, 0o755)
	tools := []peerTool{&paddockPeer{d: d}, &podmanPeer{runc: podmanRuntime()}, &bwrapPeer{dir: filepath.Join(work, "bwrap")}}
	b.Cleanup(func() { removePeerCgroups() })

	rows := runPeerLatency(b, ctx, tools, work)
	for _, clients := range []int{4, 8} {
		rows = append(rows, runPeerCycles(b, ctx, tools, clients))
	}
	rows = append(rows, runPeerIdle(b, ctx, tools)...)
	fmt.Printf("\nBenchmarkPeers, %s: %d iterations per latency row, %d × %s rounds per throughput row, %d idle sandboxes per tool\n\n",
		time.Now().UTC().Format("2006-01-02"), *peersN, *peersRounds, *peersRoundDur, *peersIdleN)
	printPeerTable(os.Stdout, tools, rows)
	b.ReportMetric(0, "ns/op")
}

// peerLatencyRow is one latency row: run does the row's work once on tool
// i's running sandbox box and returns the time it took.
type peerLatencyRow struct {
	name string
	run  func(ctx context.Context, t peerTool, box peerBox, iter int) (time.Duration, error)
}

func timed(f func() error) (time.Duration, error) {
	t0 := time.Now()
	err := f()
	return time.Since(t0), err
}

// runPeerLatency runs the latency rows -paddock.peers.n times, every row
// of an iteration on every tool in turn (the first tool rotating).
func runPeerLatency(b *testing.B, ctx context.Context, tools []peerTool, work string) []peerRow {
	stdin := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	big := filepath.Join(work, "big")
	if err := os.WriteFile(big, bytes.Repeat([]byte("paddock-peers-10"), 10<<16), 0o644); err != nil { // 10 MiB
		b.Fatal(err)
	}
	tree := filepath.Join(work, "tree")
	os.MkdirAll(tree, 0o755)
	small := bytes.Repeat([]byte("x"), 1024)
	for i := 0; i < 1000; i++ {
		os.WriteFile(filepath.Join(tree, fmt.Sprintf("f%04d", i)), small, 0o644)
	}
	const capBytes = 16 << 20
	lat := []peerLatencyRow{
		{"cold start → first python3 result", func(ctx context.Context, t peerTool, _ peerBox, _ int) (time.Duration, error) {
			return t.cold(ctx)
		}},
		{"exec python3 -c 'print(1)' in a running one", func(ctx context.Context, t peerTool, box peerBox, _ int) (time.Duration, error) {
			if t.name() == "bwrap" {
				return 0, errPeerNA{"bwrap cannot run a command in a running sandbox"}
			}
			return timed(func() error {
				out, err := box.exec(ctx, pythonPrint1, nil, 0)
				if err == nil && string(out) != "1\n" {
					err = fmt.Errorf("exec: %q", out)
				}
				return err
			})
		}},
		{"exec wc -c with 1 MiB stdin", func(ctx context.Context, _ peerTool, box peerBox, _ int) (time.Duration, error) {
			return timed(func() error {
				out, err := box.exec(ctx, []string{"wc", "-c"}, stdin, 0)
				if err == nil && strings.TrimSpace(string(out)) != strconv.Itoa(len(stdin)) {
					err = fmt.Errorf("wc -c: %q", out)
				}
				return err
			})
		}},
		{"exec 100 MiB stdout, 16 MiB cap", func(ctx context.Context, _ peerTool, box peerBox, _ int) (time.Duration, error) {
			argv := []string{"sh", "-c", "yes 0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz | head -c 104857600"}
			return timed(func() error {
				out, err := box.exec(ctx, argv, nil, capBytes)
				if err == nil && len(out) != capBytes {
					err = fmt.Errorf("capped stdout: %d bytes", len(out))
				}
				return err
			})
		}},
		{"10 MiB file in", func(ctx context.Context, _ peerTool, box peerBox, _ int) (time.Duration, error) {
			return timed(func() error { return box.put(ctx, big, "/workspace/big") })
		}},
		{"10 MiB file out", func(ctx context.Context, _ peerTool, box peerBox, i int) (time.Duration, error) {
			dst := filepath.Join(work, "out")
			d, err := timed(func() error { return box.get(ctx, "/workspace/big", dst) })
			if err == nil {
				if st, serr := os.Stat(dst); serr != nil || st.Size() != 10<<20 {
					err = fmt.Errorf("file out: %v %v", st, serr)
				}
			}
			os.Remove(dst)
			return d, err
		}},
		{"1,000 × 1 KiB files in", func(ctx context.Context, _ peerTool, box peerBox, i int) (time.Duration, error) {
			return timed(func() error { return box.putTree(ctx, tree, fmt.Sprintf("/workspace/tree%d", i)) })
		}},
	}
	boxes := make([]peerBox, len(tools))
	for j, t := range tools {
		box, err := t.start(ctx)
		if err != nil {
			b.Fatalf("%s: start: %v", t.name(), err)
		}
		boxes[j] = box
		defer box.close()
	}
	rows := make([]peerRow, len(lat))
	for r := range lat {
		rows[r] = peerRow{name: lat[r].name, unit: "ms", cells: make([]peerCell, len(tools))}
	}
	for i := 0; i < *peersN; i++ {
		for r, row := range lat {
			for k := range tools {
				j := (i + k) % len(tools)
				cell := &rows[r].cells[j]
				if cell.na != "" {
					continue
				}
				d, err := row.run(ctx, tools[j], boxes[j], i)
				if err != nil {
					cell.na = naReason(err)
					fmt.Fprintf(os.Stderr, "%s / %s: %v\n", row.name, tools[j].name(), err)
					continue
				}
				cell.samples = append(cell.samples, ms(d))
			}
		}
	}
	return rows
}

func naReason(err error) string {
	var na errPeerNA
	if errors.As(err, &na) {
		return na.reason
	}
	return "error: " + err.Error()
}

// runPeerCycles measures sustained full cycles (create → python3 → delete)
// with clients concurrent clients: -paddock.peers.rounds rounds of
// -paddock.peers.round per tool, the tools taking turns. The figure is the
// median rate of the rounds; p99 is that of one cycle's latency, in ms.
func runPeerCycles(b *testing.B, ctx context.Context, tools []peerTool, clients int) peerRow {
	row := peerRow{name: fmt.Sprintf("full cycles, %d clients", clients), unit: "cycles/s", higher: true, cells: make([]peerCell, len(tools))}
	lats := make([][]time.Duration, len(tools))
	for r := 0; r < *peersRounds; r++ {
		for k := range tools {
			j := (r + k) % len(tools)
			var mu sync.Mutex
			var n int
			var firstErr error
			var wg sync.WaitGroup
			t0 := time.Now()
			end := t0.Add(*peersRoundDur)
			for w := 0; w < clients; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for time.Now().Before(end) {
						c0 := time.Now()
						err := tools[j].cycle(ctx)
						mu.Lock()
						if err != nil && firstErr == nil {
							firstErr = err
						}
						if err == nil {
							n++
							lats[j] = append(lats[j], time.Since(c0))
						}
						mu.Unlock()
						if err != nil {
							return
						}
					}
				}()
			}
			wg.Wait()
			if firstErr != nil {
				fmt.Fprintf(os.Stderr, "%s / %s: %v\n", row.name, tools[j].name(), firstErr)
				row.cells[j].na = "error: " + firstErr.Error()
			}
			row.cells[j].samples = append(row.cells[j].samples, float64(n)/time.Since(t0).Seconds())
		}
	}
	for j := range tools {
		if len(lats[j]) > 0 {
			row.cells[j].p99ms = ms(pct(lats[j], 99))
		}
	}
	return row
}

// runPeerIdle holds -paddock.peers.idle.n idle sandboxes per tool, one
// tool at a time (the order rotating is moot: one pass), and reports the
// host's MemAvailable drop per sandbox and the CPU the tool and its
// sandboxes used per sandbox over -paddock.peers.idle.window.
func runPeerIdle(b *testing.B, ctx context.Context, tools []peerTool) []peerRow {
	mem := peerRow{name: fmt.Sprintf("host memory per idle sandbox (%d idle)", *peersIdleN), unit: "MiB", cells: make([]peerCell, len(tools))}
	cpu := peerRow{name: fmt.Sprintf("CPU per idle sandbox over %s", *peersIdleWindow), unit: "% of a core", cells: make([]peerCell, len(tools))}
	for j, t := range tools {
		time.Sleep(3 * time.Second)
		m0 := memAvailable()
		boxes, err := startPeerBoxes(ctx, t, *peersIdleN)
		if err != nil {
			fmt.Fprintf(os.Stderr, "idle / %s: %v\n", t.name(), err)
			mem.cells[j].na, cpu.cells[j].na = "error: "+err.Error(), "error: "+err.Error()
		} else {
			time.Sleep(5 * time.Second) // let them settle
			m1 := memAvailable()
			c0, t0 := t.cpuTicks(), time.Now()
			time.Sleep(*peersIdleWindow)
			c1, el := t.cpuTicks(), time.Since(t0)
			n := float64(len(boxes))
			mem.cells[j].samples = []float64{float64(m0-m1) / 1024 / n}
			cpu.cells[j].samples = []float64{float64(c1-c0) / 100 / el.Seconds() * 100 / n}
		}
		var wg sync.WaitGroup
		for _, box := range boxes {
			wg.Add(1)
			go func() { defer wg.Done(); box.close() }()
		}
		wg.Wait()
	}
	return []peerRow{mem, cpu}
}

// startPeerBoxes starts n running sandboxes of t, 4 at a time.
func startPeerBoxes(ctx context.Context, t peerTool, n int) ([]peerBox, error) {
	var mu sync.Mutex
	var boxes []peerBox
	var firstErr error
	var wg sync.WaitGroup
	next := make(chan struct{})
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				box, err := t.start(ctx)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					boxes = append(boxes, box)
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	return boxes, firstErr
}

// memAvailable is the host's MemAvailable, in KiB.
func memAvailable() int64 {
	b, _ := os.ReadFile("/proc/meminfo")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemAvailable:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// removePeerCgroups removes the cgroup parents the peers ran under, in
// every hierarchy (podman's holds a conmon child).
func removePeerCgroups() {
	for _, p := range []string{bwrapCgroupParent, strings.TrimPrefix(podmanCgroupParent, "/")} {
		dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", p))
		for _, d := range dirs {
			os.Remove(filepath.Join(d, "conmon"))
			os.Remove(d)
		}
	}
}

// podmanRuntime is -paddock.peers.podman-runtime or Paddock's own runc.
func podmanRuntime() string {
	if *peersPodmanRT != "" {
		return *peersPodmanRT
	}
	return filepath.Join(*binDir, "runc")
}
