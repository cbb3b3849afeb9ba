package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
	"github.com/paddock-sandbox/paddock/internal/backend/container"
)

// The limits every peer runs with (Paddock's defaults): the host's /usr
// read-only, no network, 512 MiB, 1 CPU, 256 pids.
const (
	peerMemMiB = 512
	peerPIDs   = 256
	peerImage  = "localhost/paddock-peers:usr"
)

// errPeerNA is a row a peer cannot do, with the reason.
type errPeerNA struct{ reason string }

func (e errPeerNA) Error() string { return "n/a: " + e.reason }

// peerTool is one of the compared sandboxes: Paddock, podman or bwrap.
type peerTool interface {
	name() string
	// cold runs `python3 -c 'print(1)'` in a fresh sandbox and returns the
	// time to its first result; the teardown after it is not timed.
	cold(ctx context.Context) (time.Duration, error)
	// cycle is one full create → python3 → delete.
	cycle(ctx context.Context) error
	// start starts a sandbox that stays running (idle) until close.
	start(ctx context.Context) (peerBox, error)
	// cpuTicks is the CPU time, in 1/100 s, of the tool's own processes
	// and of every sandbox it runs now (daemon, conmon, cgroups).
	cpuTicks() int64
}

// peerBox is one running sandbox of a peerTool.
type peerBox interface {
	// exec runs argv in the sandbox with stdin and returns its stdout.
	exec(ctx context.Context, argv []string, stdin []byte, maxOut int64) ([]byte, error)
	// put copies the host file src to path (under /workspace) in the
	// sandbox; get copies path out of it to the host file dst.
	put(ctx context.Context, src, path string) error
	get(ctx context.Context, path, dst string) error
	// putTree copies the host directory src to path in the sandbox.
	putTree(ctx context.Context, src, path string) error
	close()
}

// firstResult runs cmd and returns the time until its stdout holds want,
// then waits for it (untimed).
func firstResult(cmd *exec.Cmd, want string) (time.Duration, error) {
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	buf := make([]byte, len(want))
	_, rerr := io.ReadFull(out, buf)
	d := time.Since(t0)
	io.Copy(io.Discard, out)
	werr := cmd.Wait()
	if rerr != nil || string(buf) != want || werr != nil {
		return 0, fmt.Errorf("%s: got %q (%v, %v): %s", cmd.Args[0], buf, rerr, werr, stderr.Bytes())
	}
	return d, nil
}

// runOut runs name args with stdin and returns its stdout.
func runOut(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args[:min(len(args), 3)], " "), err, stderr.Bytes())
	}
	return out, nil
}

var pythonPrint1 = []string{"python3", "-c", "print(1)"}

// ---- Paddock -------------------------------------------------------------

type paddockPeer struct{ d *daemon }

func (p *paddockPeer) name() string { return "Paddock" }

func (p *paddockPeer) req() *api.CreateSandboxRequest {
	return &api.CreateSandboxRequest{
		Resources: &api.Resources{VCPUs: 1, MemoryMiB: peerMemMiB, PIDs: peerPIDs},
		Network:   &api.NetworkPolicy{Mode: api.NetworkOff},
	}
}

func (p *paddockPeer) cold(ctx context.Context) (time.Duration, error) {
	t0 := time.Now()
	sb, err := p.d.client(0).Create(ctx, p.req())
	if err != nil {
		return 0, err
	}
	defer sb.Kill(ctx)
	res, err := sb.Exec(ctx, api.ExecRequest{Argv: pythonPrint1})
	if err != nil || res.Stdout != "1\n" {
		return 0, fmt.Errorf("first exec: %+v %w", res, err)
	}
	return time.Since(t0), nil
}

func (p *paddockPeer) cycle(ctx context.Context) error {
	sb, err := p.d.client(0).Create(ctx, p.req())
	if err != nil {
		return err
	}
	res, err := sb.Exec(ctx, api.ExecRequest{Argv: pythonPrint1})
	if err != nil || res.Stdout != "1\n" {
		sb.Kill(ctx)
		return fmt.Errorf("exec: %+v %w", res, err)
	}
	return sb.Kill(ctx)
}

func (p *paddockPeer) start(ctx context.Context) (peerBox, error) {
	sb, err := p.d.client(0).Create(ctx, p.req())
	if err != nil {
		return nil, err
	}
	return &paddockBox{sb: sb}, nil
}

func (p *paddockPeer) cpuTicks() int64 {
	parent := container.DefaultCgroupParent(p.d.stateDir)
	return cpuTicks(p.d.cmd.Process.Pid) + cgroupTicks(parent)
}

type paddockBox struct{ sb *client.Sandbox }

func (b *paddockBox) exec(ctx context.Context, argv []string, stdin []byte, maxOut int64) ([]byte, error) {
	res, err := b.sb.Exec(ctx, api.ExecRequest{Argv: argv, Stdin: string(stdin), MaxOutputBytes: maxOut})
	if err != nil {
		return nil, err
	}
	if res.ExitCode == nil || *res.ExitCode != 0 {
		return nil, fmt.Errorf("%v: exit %v: %s", argv, res.ExitCode, res.Stderr)
	}
	return []byte(res.Stdout), nil
}

func (b *paddockBox) put(ctx context.Context, src, path string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = b.sb.Files().WriteFrom(ctx, path, f, 0)
	return err
}

func (b *paddockBox) get(ctx context.Context, path, dst string) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = b.sb.Files().ReadTo(ctx, path, f)
	return err
}

// putTree sends the tree as one tar through the files API and unpacks it
// with tar in the sandbox: Paddock's files API moves one file a request.
func (b *paddockBox) putTree(ctx context.Context, src, path string) error {
	tarball, err := runOut(ctx, nil, "tar", "-C", src, "-c", ".")
	if err != nil {
		return err
	}
	if _, err := b.sb.Files().Write(ctx, path+".tar", tarball, 0); err != nil {
		return err
	}
	_, err = b.exec(ctx, []string{"sh", "-c", `mkdir -p "$1" && tar -xf "$1.tar" -C "$1"`, "sh", path}, nil, 0)
	return err
}

func (b *paddockBox) close() { b.sb.Kill(context.Background()) }

// ---- podman --------------------------------------------------------------

// podmanPeer runs rootful podman with runc (the runc binary Paddock uses:
// crun refuses this host's cgroup v1 hybrid layout) and cgroupfs, all
// containers under one cgroup parent.
type podmanPeer struct{ runc string }

const podmanCgroupParent = "/paddock-peers-podman"

func (p *podmanPeer) name() string { return "podman" }

func (p *podmanPeer) flags() []string {
	return []string{"--runtime", p.runc, "--cgroup-manager", "cgroupfs", "--cgroup-parent", podmanCgroupParent,
		"--network", "none", "-v", "/usr:/usr:ro", "--workdir", "/workspace",
		"--memory", strconv.Itoa(peerMemMiB) + "m", "--memory-swap", strconv.Itoa(peerMemMiB) + "m",
		"--cpus", "1", "--pids-limit", strconv.Itoa(peerPIDs),
		// podman's defaults (nofile 1048576, nproc 32768 it lowers itself
		// to) fail without CAP_SYS_RESOURCE: keep the host's nofile.
		"--ulimit", "nofile=20000:20000", "--ulimit", "nproc=32768:32768"}
}

func (p *podmanPeer) runArgs(extra ...string) []string {
	args := append([]string{"run"}, extra...)
	args = append(args, p.flags()...)
	return append(args, peerImage)
}

func (p *podmanPeer) cold(ctx context.Context) (time.Duration, error) {
	args := append(p.runArgs("--rm"), pythonPrint1...)
	return firstResult(exec.CommandContext(ctx, "podman", args...), "1\n")
}

func (p *podmanPeer) cycle(ctx context.Context) error {
	out, err := runOut(ctx, nil, "podman", append(p.runArgs("--rm"), pythonPrint1...)...)
	if err == nil && string(out) != "1\n" {
		err = fmt.Errorf("podman run: %q", out)
	}
	return err
}

func (p *podmanPeer) start(ctx context.Context) (peerBox, error) {
	out, err := runOut(ctx, nil, "podman", append(p.runArgs("-d"), "sleep", "infinity")...)
	if err != nil {
		return nil, err
	}
	return &podmanBox{id: strings.TrimSpace(string(out))}, nil
}

// cpuTicks: the cgroup parent holds every container and, in its conmon
// child, every conmon (podman itself has no daemon).
func (p *podmanPeer) cpuTicks() int64 {
	return cgroupTicks(strings.TrimPrefix(podmanCgroupParent, "/"))
}

type podmanBox struct{ id string }

func (b *podmanBox) exec(ctx context.Context, argv []string, stdin []byte, maxOut int64) ([]byte, error) {
	args := []string{"exec"}
	if stdin != nil {
		args = append(args, "-i")
	}
	args = append(args, b.id)
	if maxOut > 0 { // the matched cap: head -c
		args = append(args, "sh", "-c", `"$@" | head -c `+strconv.FormatInt(maxOut, 10), "sh")
	}
	return runOut(ctx, stdin, "podman", append(args, argv...)...)
}

func (b *podmanBox) put(ctx context.Context, src, path string) error {
	_, err := runOut(ctx, nil, "podman", "cp", src, b.id+":"+path)
	return err
}

func (b *podmanBox) get(ctx context.Context, path, dst string) error {
	_, err := runOut(ctx, nil, "podman", "cp", b.id+":"+path, dst)
	return err
}

func (b *podmanBox) putTree(ctx context.Context, src, path string) error {
	_, err := runOut(ctx, nil, "podman", "cp", src, b.id+":"+path)
	return err
}

func (b *podmanBox) close() {
	exec.Command("podman", "rm", "-f", "-t", "0", b.id).Run()
}

// buildPeerImage makes the podman image from a minimal root filesystem
// (the usr-merge symlinks, /etc/passwd, /tmp, /workspace): the host's /usr
// is mounted into every container read-only, as Paddock's base template
// sees it. No registry is involved.
func buildPeerImage(ctx context.Context) error {
	if exec.CommandContext(ctx, "podman", "image", "exists", peerImage).Run() == nil {
		return nil
	}
	dir, err := os.MkdirTemp("", "paddock-peers-rootfs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, d := range []string{"usr", "etc", "tmp", "workspace", "proc", "sys", "dev", "root"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	os.Chmod(filepath.Join(dir, "tmp"), 0o1777)
	for _, l := range []string{"bin", "lib", "lib64", "sbin"} {
		if err := os.Symlink("usr/"+l, filepath.Join(dir, l)); err != nil {
			return err
		}
	}
	os.WriteFile(filepath.Join(dir, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "etc/group"), []byte("root:x:0:\n"), 0o644)
	cmd := exec.CommandContext(ctx, "sh", "-c", `tar -C "$1" -c . | podman import - "$2"`, "sh", dir, peerImage)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("podman import: %w: %s", err, out)
	}
	return nil
}

// ---- bubblewrap ----------------------------------------------------------

// bwrapPeer runs each sandbox as a bwrap process tree in cgroup v1 groups
// of its own (memory, cpu, cpuacct, pids), made by the benchmark: bwrap
// sets no resource limits itself. /workspace is a host directory bound in.
type bwrapPeer struct {
	dir string // workspaces
	seq atomic.Int64
}

const bwrapCgroupParent = "paddock-peers-bwrap"

var bwrapControllers = []string{"memory", "cpu", "cpuacct", "pids"}

func (p *bwrapPeer) name() string { return "bwrap" }

func bwrapArgs(ws string) []string {
	return []string{"--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
		"--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin",
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", ws, "/workspace", "--chdir", "/workspace", "--"}
}

// sandbox makes a workspace and the cgroups of one sandbox.
func (p *bwrapPeer) sandbox() (ws, cg string, err error) {
	cg = filepath.Join(bwrapCgroupParent, "sb-"+strconv.FormatInt(p.seq.Add(1), 10))
	ws = filepath.Join(p.dir, filepath.Base(cg))
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return "", "", err
	}
	// In this order: memsw may not go below the memory limit.
	set := [][2]string{
		{"memory/memory.limit_in_bytes", strconv.Itoa(peerMemMiB << 20)},
		{"memory/memory.memsw.limit_in_bytes", strconv.Itoa(peerMemMiB << 20)},
		{"cpu/cpu.cfs_period_us", "100000"},
		{"cpu/cpu.cfs_quota_us", "100000"},
		{"pids/pids.max", strconv.Itoa(peerPIDs)},
	}
	for _, c := range bwrapControllers {
		if err := os.MkdirAll(filepath.Join("/sys/fs/cgroup", c, cg), 0o755); err != nil {
			return "", "", err
		}
	}
	for _, kv := range set {
		c, file, _ := strings.Cut(kv[0], "/")
		err := os.WriteFile(filepath.Join("/sys/fs/cgroup", c, cg, file), []byte(kv[1]), 0o644)
		if err != nil && !(file == "memory.memsw.limit_in_bytes" && errors.Is(err, os.ErrNotExist)) {
			return "", "", err
		}
	}
	return ws, cg, nil
}

// command is bwrap running argv in the sandbox (ws, cg): a shell joins the
// cgroups, then becomes bwrap.
func bwrapCommand(ctx context.Context, ws, cg string, argv ...string) *exec.Cmd {
	args := []string{"-c", `for p; do [ "$p" = -- ] && break; echo $$ > "$p"; shift; done; shift; exec "$@"`, "sh"}
	for _, c := range bwrapControllers {
		args = append(args, filepath.Join("/sys/fs/cgroup", c, cg, "cgroup.procs"))
	}
	args = append(append(append(args, "--", "bwrap"), bwrapArgs(ws)...), argv...)
	return exec.CommandContext(ctx, "/bin/sh", args...)
}

// remove deletes a sandbox's cgroups (once its processes are gone) and
// workspace.
func (p *bwrapPeer) remove(ws, cg string) {
	for _, c := range bwrapControllers {
		for i := 0; i < 50 && os.Remove(filepath.Join("/sys/fs/cgroup", c, cg)) != nil; i++ {
			time.Sleep(2 * time.Millisecond)
		}
	}
	os.RemoveAll(ws)
}

func (p *bwrapPeer) cold(ctx context.Context) (time.Duration, error) {
	t0 := time.Now()
	ws, cg, err := p.sandbox()
	if err != nil {
		return 0, err
	}
	setup := time.Since(t0) // the workspace and cgroups count
	defer p.remove(ws, cg)
	d, err := firstResult(bwrapCommand(ctx, ws, cg, pythonPrint1...), "1\n")
	return setup + d, err
}

func (p *bwrapPeer) cycle(ctx context.Context) error {
	ws, cg, err := p.sandbox()
	if err != nil {
		return err
	}
	defer p.remove(ws, cg)
	cmd := bwrapCommand(ctx, ws, cg, pythonPrint1...)
	out, err := cmd.Output()
	if err == nil && string(out) != "1\n" {
		err = fmt.Errorf("bwrap: %q", out)
	}
	return err
}

func (p *bwrapPeer) start(ctx context.Context) (peerBox, error) {
	ws, cg, err := p.sandbox()
	if err != nil {
		return nil, err
	}
	cmd := bwrapCommand(context.Background(), ws, cg, "sleep", "infinity")
	if err := cmd.Start(); err != nil {
		p.remove(ws, cg)
		return nil, err
	}
	return &bwrapBox{p: p, ws: ws, cg: cg, cmd: cmd}, nil
}

func (p *bwrapPeer) cpuTicks() int64 { return cgroupTicks(bwrapCgroupParent) }

// bwrapBox is a running bwrap (sleep) with its workspace. bwrap cannot
// enter a running sandbox: a command runs in a fresh bwrap that shares the
// sandbox's cgroups and workspace, its start included.
type bwrapBox struct {
	p      *bwrapPeer
	ws, cg string
	cmd    *exec.Cmd
}

func (b *bwrapBox) exec(ctx context.Context, argv []string, stdin []byte, maxOut int64) ([]byte, error) {
	if maxOut > 0 {
		argv = append([]string{"sh", "-c", `"$@" | head -c ` + strconv.FormatInt(maxOut, 10), "sh"}, argv...)
	}
	cmd := bwrapCommand(ctx, b.ws, b.cg, argv...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	return cmd.Output()
}

// put and get copy through the bind mount: the workspace is a host
// directory.
func (b *bwrapBox) put(_ context.Context, src, path string) error {
	return copyFile(src, filepath.Join(b.ws, strings.TrimPrefix(path, "/workspace")))
}

func (b *bwrapBox) get(_ context.Context, path, dst string) error {
	return copyFile(filepath.Join(b.ws, strings.TrimPrefix(path, "/workspace")), dst)
}

func (b *bwrapBox) putTree(_ context.Context, src, path string) error {
	dst := filepath.Join(b.ws, strings.TrimPrefix(path, "/workspace"))
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		return copyFile(p, filepath.Join(dst, rel))
	})
}

func (b *bwrapBox) close() {
	b.cmd.Process.Kill()
	b.cmd.Wait()
	b.p.remove(b.ws, b.cg)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// cgroupTicks is cpuacct.usage of the v1 cgroup at rel, in 1/100 s.
func cgroupTicks(rel string) int64 {
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuacct", rel, "cpuacct.usage"))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n / 1e7
}
