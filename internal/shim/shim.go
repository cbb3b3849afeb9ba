package shim

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// StatusFD is the descriptor on which the shim reports to the agent.
const StatusFD = 3

// Status is one line the shim writes to the agent: first {"pid":N}
// once the command started (or {"error":...} if it could not start), then
// {"exit_code":N} or {"signal":"SIGKILL"} once the command ended.
type Status struct {
	PID      int    `json:"pid,omitempty"`
	ExitCode *int   `json:"exit_code,omitempty"`
	Signal   string `json:"signal,omitempty"`
	Error    string `json:"error,omitempty"`
	// Limit marks an Error caused by the sandbox's process limit.
	Limit bool `json:"limit,omitempty"`
	// Reuse, on the command's end, says that the shim waits for another
	// spec on its control socket; without it the shim exits.
	Reuse bool `json:"reuse,omitempty"`
}

// Env is the whole environment of a shim: the Go runtime reads it at
// start, before any code of the shim runs, and so starts with one P and
// fewer threads. The command's environment comes in its spec, so nothing
// of the shim's own reaches it.
const Env = "GOMAXPROCS=1"

const usage = `Usage: paddock-shim [shim] [--status-fd N] [--control-fd N]

The guest agent's command shim: the agent starts it with a pipe on the
status descriptor and a unix socket on the control descriptor, sends it one
command's spec, and reads the command's pid and exit status back. It is
not meant to be run by hand.`

// checkDescriptors refuses to run without the agent's descriptors: a shim
// started by hand would otherwise fail with nowhere to say why.
func checkDescriptors(statusFD, controlFD int) error {
	var st unix.Stat_t
	if err := unix.Fstat(statusFD, &st); err != nil {
		return fmt.Errorf("no status descriptor %d (%v): the guest agent starts this program", statusFD, err)
	}
	if err := unix.Fstat(controlFD, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return fmt.Errorf("descriptor %d is not the agent's control socket: the guest agent starts this program", controlFD)
	}
	return nil
}

// Name is the shim binary's name, next to paddock-agent, and each shim's
// process name.
const Name = "paddock-shim"

// Argv is the command line the agent starts a shim with. Both binaries
// take it: paddock-agent dispatches on "shim", paddock-shim skips it.
func Argv() []string { return []string{Name, "shim"} }

// Run is the main of a shim (args follow "shim"):
//
//	[--status-fd 3] [--control-fd 4]
//
// It becomes a child subreaper, raises its OOM score, makes itself
// undumpable (nothing in the sandbox may ptrace it or open its
// descriptors), and waits for its command on the control socket (see
// Spec). It then starts the command in its own process group with the
// stdio, cwd, environment and RLIMIT_NPROC of the spec, and reports on the
// status fd. On SIGTERM, SIGINT or SIGHUP it SIGKILLs every descendant
// before reporting. Once the command ended by itself and left nothing
// behind, it says so (Status.Reuse) and waits for the next spec, as a
// spare; otherwise it exits, and background processes the command left
// behind are reparented. The agent keeps one shim started ahead (a spare),
// so an exec does not wait for a new process to start.
func Run(args []string) int {
	// Every thread of the shim counts against the sandbox's pids and
	// RLIMIT_NPROC, as a command's process does, and a Go program that
	// cannot make a thread it needs dies. So the shim runs on one P
	// (Env) and never blocks in a syscall once the command runs: the
	// threads it started with are all it ever needs, even when the command
	// has taken every pid left.
	runtime.GOMAXPROCS(1)
	fs := flag.NewFlagSet("shim", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	statusFD := fs.Int("status-fd", StatusFD, "descriptor to report the command's pid and exit status on")
	controlFD := fs.Int("control-fd", ControlFD, "unix socket to receive the command's spec and stdio on")
	err := fs.Parse(args)
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err == nil {
		err = checkDescriptors(*statusFD, *controlFD)
	}
	if err != nil {
		fs.SetOutput(os.Stderr)
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "paddock-shim: %v\n", err)
		}
		fmt.Fprintln(os.Stderr, usage)
		fs.PrintDefaults()
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	// Neither descriptor may leak into the command.
	unix.CloseOnExec(*statusFD)
	unix.CloseOnExec(*controlFD)
	status := os.NewFile(uintptr(*statusFD), "status")
	enc := json.NewEncoder(status)

	_ = os.WriteFile("/proc/self/comm", []byte(Name), 0) // not "exe" in ps
	// Sealed: a shim is dumpable (open to ptrace and to /proc/<pid>/fd
	// from the sandbox) from its exec until this call.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("500"), 0)
	// Two channels, so that a burst of SIGCHLD can never crowd out a stop
	// signal; one pending SIGCHLD is enough, as each reaps every child.
	// SIGCHLD is subscribed to while a spare (it has no children yet): the
	// runtime starts its signal goroutine and the threads it needs at the
	// first Notify, now rather than while the command waits to start. The
	// stop signals only once the spec came: a spare ends at one at once,
	// by its default action.
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, unix.SIGCHLD)
	spareThreads(4)
	warmJSON()

	stop := make(chan os.Signal, 1)
	for {
		spec, stdio, err := recvSpec(*controlFD)
		if errors.Is(err, io.EOF) {
			return 0 // a spare the agent no longer needs
		}
		if err != nil {
			_ = enc.Encode(Status{Error: err.Error()})
			return 2
		}
		st, code := runCommand(enc, spec, stdio, chld, stop)
		_ = enc.Encode(st)
		if !st.Reuse {
			return code
		}
	}
}

// runCommand starts spec's command with stdio and waits for it: it
// reports the command's pid on the way (or returns an error status and
// the shim's exit code if it did not start) and returns the command's end.
// The end says Reuse when the shim may take another command: the command
// ended by itself, the shim was not told to stop, and nothing the command
// started is left (its orphans would otherwise be killed with the next
// command's tree, and the shim is not theirs to wait for).
func runCommand(enc *json.Encoder, spec Spec, stdio [3]int, chld <-chan os.Signal, stop chan os.Signal) (Status, int) {
	closeStdio := func() {
		for _, fd := range stdio { // the command's alone: EOF reaches the agent when it ends
			unix.Close(fd)
		}
	}
	if spec.NProc > 0 {
		// Lowering the limit always works; raising it past the hard limit
		// needs a capability the sandbox lacks, so the agent only hands a
		// shim a command whose limit is at most its last one.
		lim := uint64(spec.NProc)
		if err := unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: lim, Max: lim}); err != nil {
			closeStdio()
			return Status{Error: fmt.Sprintf("set the command's process limit to %d: %v", lim, err)}, 2
		}
	}
	signal.Notify(stop, unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	pid, err := syscall.ForkExec(spec.Path, spec.Argv, &syscall.ProcAttr{
		Dir:   spec.Dir,
		Env:   spec.Env,
		Files: []uintptr{uintptr(stdio[0]), uintptr(stdio[1]), uintptr(stdio[2])},
		Sys:   sysProcAttr(spec.TTY),
	})
	closeStdio()
	if err != nil {
		st := Status{Error: fmt.Sprintf("exec %s: %v", spec.Argv[0], err)}
		if errors.Is(err, unix.EAGAIN) {
			st.Limit = true
		}
		return st, 127
	}
	_ = enc.Encode(Status{PID: pid})
	ws, stopped, left := awaitCommand(pid, chld, stop)
	// Back to a spare's signals before the end is reported: a stop signal
	// now ends the shim by its default action, and one sent for the
	// command that ended is dropped.
	signal.Stop(stop)
	select {
	case <-stop:
	default:
	}
	st := statusOf(ws)
	st.Reuse = !stopped && !left
	return st, 0
}

// awaitCommand reaps the shim's children (the command and the orphans
// reparented to it) as SIGCHLD arrives, without blocking in wait4 (a
// blocked syscall holds a thread, and the runtime would need another one
// to handle a signal), until the command ended, and returns its status.
// On SIGTERM, SIGINT or SIGHUP it first SIGKILLs every descendant, and
// reports that it was stopped. left reports that the shim still has a
// child once the command was reaped: once the command is gone, every
// process it left behind is a child of the shim (a subreaper), its orphans
// reparented before its own exit could be waited for. Orphans that end
// after the command are reaped by PID 1 once the shim has exited.
func awaitCommand(main int, chld, stop <-chan os.Signal) (ws unix.WaitStatus, stopped, left bool) {
	tick := time.NewTicker(time.Second) // a SIGCHLD lost to coalescing
	defer tick.Stop()
	var stuck <-chan time.Time
	for {
		if ws, ok, left := reapChildren(main); ok {
			return ws, stopped, left
		}
		select {
		case <-chld:
		case <-tick.C:
		case <-stop:
			if stuck == nil {
				stopped = true
				killDescendants(os.Getpid(), main)
				stuck = time.After(5 * time.Second)
			}
		case <-stuck: // stuck in the kernel
			return unix.WaitStatus(unix.SIGKILL), true, true
		}
	}
}

// sysProcAttr puts the command in its own process group, or with tty
// in its own session with fd 0 as its controlling terminal.
func sysProcAttr(tty bool) *syscall.SysProcAttr {
	if tty {
		return &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}
	return &syscall.SysProcAttr{Setpgid: true}
}

// statusOf turns a wait status into the shim's report.
func statusOf(ws unix.WaitStatus) Status {
	if ws.Signaled() {
		return Status{Signal: SignalName(ws.Signal())}
	}
	code := ws.ExitStatus()
	return Status{ExitCode: &code}
}

// SignalName is "SIGKILL" for SIGKILL, or "SIG<n>" for unnamed signals.
func SignalName(sig unix.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return "SIG" + strconv.Itoa(int(sig))
}

// reapChildren reaps every child of the shim that has exited, without
// blocking, and returns the command's status once it was reaped, and
// whether any child is left.
func reapChildren(main int) (mainWS unix.WaitStatus, found, left bool) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return mainWS, found, err != unix.ECHILD
		}
		if pid == main {
			mainWS, found = ws, true
		}
	}
}

// killDescendants SIGKILLs the command's process group and then every
// live descendant of self found in /proc, round after round, until none is
// left or about two seconds passed. Orphans reparent to self (a subreaper)
// while it runs, so processes that called setsid or double-forked are
// found too.
func killDescendants(self, main int) {
	_ = unix.Kill(-main, unix.SIGKILL)
	deadline := time.Now().Add(2 * time.Second)
	for round := 0; round < 100; round++ {
		pids := liveDescendants(self)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Duration(min(round+1, 20)) * time.Millisecond)
	}
}

// liveDescendants lists the descendants of root that are not zombies.
func liveDescendants(root int) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	children := make(map[int][]int)
	zombie := make(map[int]bool)
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		ppid, state, ok := readStat(pid)
		if !ok {
			continue
		}
		children[ppid] = append(children[ppid], pid)
		zombie[pid] = state == 'Z'
	}
	var live []int
	queue := children[root]
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if !zombie[pid] {
			live = append(live, pid)
		}
		queue = append(queue, children[pid]...)
	}
	return live
}

// readStat returns the parent pid and state letter of pid.
func readStat(pid int) (ppid int, state byte, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return 0, 0, false
	}
	f := bytes.Fields(data[i+2:])
	if len(f) < 2 || len(f[0]) == 0 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(string(f[1]))
	if err != nil {
		return 0, 0, false
	}
	return ppid, f[0][0], true
}

// warmJSON decodes a spec and encodes a status once, so that
// encoding/json has built its caches for these types before the spec
// comes: the first decode in a fresh process costs 0.3-0.7 ms, a later one
// a few microseconds.
func warmJSON() {
	var ss Spec
	_ = json.Unmarshal([]byte(`{"path":"/","argv":["/"],"env":["A=b"],"dir":"/","nproc":1,"tty":false}`), &ss)
	_ = json.NewEncoder(io.Discard).Encode(Status{PID: 1, ExitCode: new(int), Signal: "SIGKILL", Error: "x", Limit: true})
}

// spareThreads makes the runtime start n more OS threads now, while the
// command cannot yet have taken every pid, and leaves them idle: when the
// signal goroutine later blocks in a syscall the runtime hands its P to an
// idle thread instead of making one, which a fork bomb at the sandbox's
// limit would refuse ("fatal error: newosproc", the shim dead and the
// command killed).
//
// Each of n goroutines locks itself to its thread and blocks, so the
// runtime must start a thread for the next one; once all n hold a thread
// they unlock and end, and their threads stay, idle. That takes about
// 0.1 ms a thread, where waiting for the runtime to take the P back from
// goroutines blocked in a syscall took a 3 ms sleep.
func spareThreads(n int) {
	var locked, done sync.WaitGroup
	release := make(chan struct{})
	for range n {
		locked.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			locked.Done()
			<-release
			// Unlocked before it ends, the thread goes back to the
			// runtime's idle list; ended while locked, it would exit.
			runtime.UnlockOSThread()
		}()
	}
	locked.Wait()
	close(release)
	done.Wait()
}
