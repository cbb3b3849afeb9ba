package container

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// ociRuntime drives one OCI runtime binary through its command line, the
// way containerd and CRI-O do. runc, crun and runsc share these commands.
type ociRuntime struct {
	name string // "runc", "crun", ...
	path string // the binary
	root string // its state directory
	log  *slog.Logger
	// bpf holds the seccomp filters crun compiled (seccompbpf.go); nil
	// for other runtimes.
	bpf *bpfCache
	// learnMu guards learnBPF: the profile hash whose filter run learns
	// after creating each container (by id).
	learnMu  sync.Mutex
	learnBPF map[string]string
}

// learnMax bounds the creates that wait to learn a compiled filter.
const learnMax = 1024

// newOCIRuntime is the runtime name at path, with its state in root.
func newOCIRuntime(name, path, root string, log *slog.Logger) *ociRuntime {
	r := &ociRuntime{name: name, path: path, root: root, log: log}
	if r.crun() {
		r.bpf = &bpfCache{}
	}
	return r
}

// crun says whether the runtime is crun (named so, or its binary is).
func (r *ociRuntime) crun() bool {
	return r.name == "crun" || filepath.Base(r.path) == "crun"
}

// prepareSpec adapts container id's spec s to the runtime before it is
// written: under crun, its seccomp flags and, once crun has compiled the
// profile, the compiled filter (seccompbpf.go).
func (r *ociRuntime) prepareSpec(id string, s *specs.Spec) error {
	if r.bpf == nil {
		return nil
	}
	h, err := r.bpf.prepare(s)
	if err != nil || h == "" {
		return err
	}
	r.learnMu.Lock()
	defer r.learnMu.Unlock()
	if r.learnBPF == nil || len(r.learnBPF) >= learnMax {
		r.learnBPF = map[string]string{} // boots that failed before run
	}
	r.learnBPF[id] = h
	return nil
}

// learn keeps the filter crun compiled for container id, if prepareSpec
// asked for it.
func (r *ociRuntime) learn(id string) {
	r.learnMu.Lock()
	h, ok := r.learnBPF[id]
	delete(r.learnBPF, id)
	r.learnMu.Unlock()
	if !ok {
		return
	}
	if err := r.bpf.learn(r.root, id, h); err != nil {
		r.log.Warn("seccomp filter not cached; crun compiles it again next time", "sandbox", id, "err", err)
	}
}

// gvisor says whether the runtime is gVisor's runsc, which takes some
// flags of its own (it is named runsc, or its binary's name starts so).
func (r *ociRuntime) gvisor() bool {
	return r.name == "runsc" || strings.HasPrefix(filepath.Base(r.path), "runsc")
}

func (r *ociRuntime) base(bundle string) []string {
	args := []string{"--root", r.root}
	if r.gvisor() {
		// The agent binds its socket in a host directory (gvisorSocket).
		// --overlay2=none: writes go to the sandbox's own overlay on its
		// disk image, as under runc (runsc's default keeps the upper layer
		// in a filestore of its own, so disk_mib, snapshots and stop/start
		// would not see the files).
		args = append(args, "--host-uds=create", "--overlay2=none")
	}
	if bundle != "" {
		args = append(args, "--log", filepath.Join(bundle, "runtime.log"), "--log-format", "json")
	}
	return args
}

// run creates and starts the container detached, handing it listener as
// fd 3 (none under gVisor). The container's stdout and stderr go to a pipe whose output (at
// most 64 KiB) is logged; after a daemon restart the pipe is simply gone.
func (r *ociRuntime) run(ctx context.Context, id, bundle string, listener *os.File) error {
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	args := append(r.base(bundle), "run", "--detach",
		"--pid-file", filepath.Join(bundle, "init.pid"))
	if listener != nil {
		args = append(args, "--preserve-fds", "1")
	}
	args = append(args, "--bundle", bundle, id)
	// Stdin is an empty pipe, never /dev/null: runtimes chown the
	// container's stdio to its root user, and crun 1.8 does not skip
	// /dev/null, which would hand the host's /dev/null to the sandbox.
	inR, inW, err := os.Pipe()
	if err != nil {
		pr.Close()
		pw.Close()
		return err
	}
	inW.Close()
	defer inR.Close()
	cmd := exec.CommandContext(ctx, r.path, args...)
	if listener != nil {
		cmd.ExtraFiles = []*os.File{listener}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, pw, pw
	cmd.Dir = bundle
	err = cmd.Run()
	pw.Close()
	go r.drain(id, pr)
	if err != nil {
		r.learnMu.Lock()
		delete(r.learnBPF, id)
		r.learnMu.Unlock()
		return fmt.Errorf("%s run: %v: %s", r.name, err, r.lastError(bundle))
	}
	r.learn(id)
	return nil
}

// drain logs what the agent writes to stdout/stderr, bounded.
func (r *ociRuntime) drain(id string, pr *os.File) {
	defer pr.Close()
	sc := bufio.NewScanner(io.LimitReader(pr, 64<<10))
	sc.Buffer(make([]byte, 4096), 4096)
	for sc.Scan() {
		r.log.Debug("agent", "sandbox", id, "line", sc.Text())
	}
	io.Copy(io.Discard, pr)
}

// lastError returns the last error message in the runtime's log file.
func (r *ociRuntime) lastError(bundle string) string {
	f, err := os.Open(filepath.Join(bundle, "runtime.log"))
	if err != nil {
		return "no runtime log"
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		var e struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
		}
		if json.Unmarshal(lines[i], &e) == nil && (e.Level == "error" || e.Level == "fatal") {
			return e.Msg
		}
	}
	if len(lines) > 0 {
		return string(lines[len(lines)-1])
	}
	return "no error logged"
}

// delete kills and removes the container; a missing container is fine.
// A plain delete of an already-killed container comes first: runc's
// forced delete polls every 100 ms.
func (r *ociRuntime) delete(ctx context.Context, id string) error {
	if exec.CommandContext(ctx, r.path, append(r.base(""), "delete", id)...).Run() == nil {
		return nil
	}
	out, err := exec.CommandContext(ctx, r.path, append(r.base(""), "delete", "--force", id)...).CombinedOutput()
	if err != nil {
		msg := string(out)
		if strings.Contains(msg, "does not exist") || strings.Contains(msg, "not found") ||
			strings.Contains(msg, "No such file") {
			return nil
		}
		if _, statErr := os.Stat(filepath.Join(r.root, id)); errors.Is(statErr, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("%s delete: %v: %s", r.name, err, strings.TrimSpace(msg))
	}
	return nil
}

// status returns the runtime's view of the container ("running", "stopped",
// "created", "paused") or "" if it does not know it.
func (r *ociRuntime) status(ctx context.Context, id string) (string, error) {
	st, _, err := r.state(ctx, id)
	return st, err
}

// state returns the container's status (as status does) and its init's
// host pid (0 if it has none).
func (r *ociRuntime) state(ctx context.Context, id string) (string, int, error) {
	out, err := exec.CommandContext(ctx, r.path, append(r.base(""), "state", id)...).Output()
	if err != nil {
		if _, statErr := os.Stat(filepath.Join(r.root, id)); errors.Is(statErr, os.ErrNotExist) {
			return "", 0, nil
		}
		return "", 0, fmt.Errorf("%s state: %w", r.name, err)
	}
	var st struct {
		Status string `json:"status"`
		Pid    int    `json:"pid"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return "", 0, fmt.Errorf("%s state: %w", r.name, err)
	}
	return st.Status, st.Pid, nil
}

// ids lists the containers in the runtime's state directory.
func (r *ociRuntime) ids() []string {
	ents, _ := os.ReadDir(r.root)
	var out []string
	for _, e := range ents {
		if e.IsDir() && validID(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}
