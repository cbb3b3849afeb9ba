package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/shim"
	"golang.org/x/sys/unix"
)

// sigKill is the signal that kills a command's whole tree.
const sigKill = unix.SIGKILL

// proc is one command started by the agent, in the foreground (exec) or
// in the background (processes).
type proc struct {
	id        string
	spec      *execSpec
	startedAt time.Time
	pid       int // the command
	shimPid   int
	out       *outputLog
	done      chan struct{} // closed once the result is final
	oomBefore int64
	outPipes  [2]*os.File    // read ends of stdout and stderr (drainOutput)
	outBusy   [2]atomic.Bool // a copier holds bytes read but not yet kept

	stdinMu sync.Mutex // serializes writes to stdin

	mu       sync.Mutex
	stdin    *os.File // nil once closed
	exited   bool     // the shim reported the command's end
	shimGone bool     // the shim was reaped; its pid may be reused
	timedOut bool
	killed   bool // a tree kill was requested
	timer    *time.Timer
}

// startProc starts spec under a shim and registers it in the process table.
// It returns once the command runs (or failed to start).
func (s *Server) startProc(spec *execSpec) (*proc, error) {
	id, err := s.procs.reserve()
	if err != nil {
		return nil, err
	}
	p, err := s.launch(id, spec)
	s.procs.put(id, p)
	return p, err
}

// launch starts spec under a shim (the spare, if there is one) with pipes
// for stdin, stdout and stderr, and starts the goroutines that serve them.
func (s *Server) launch(id string, spec *execSpec) (*proc, error) {
	var pipes [3][2]*os.File // stdin, stdout, stderr: read and write ends
	closeAll := func() {
		for _, p := range pipes {
			for _, f := range p {
				if f != nil {
					f.Close()
				}
			}
		}
	}
	for i := range pipes {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("pipe: %w", err)
		}
		pipes[i] = [2]*os.File{r, w}
	}
	oomBefore := s.oom.kills()
	startedAt := time.Now()
	sh, first, err := s.startCommand(spec, false, s.commandNProc(), [3]*os.File{pipes[0][0], pipes[1][1], pipes[2][1]})
	pipes[0][0].Close()
	pipes[1][1].Close()
	pipes[2][1].Close()
	pipes[0][0], pipes[1][1], pipes[2][1] = nil, nil, nil
	if err != nil {
		closeAll()
		return nil, err
	}
	stdinW, stdoutR, stderrR := pipes[0][1], pipes[1][0], pipes[2][0]

	p := &proc{id: id, spec: spec, startedAt: startedAt, pid: first.PID, shimPid: sh.pid, done: make(chan struct{}), oomBefore: oomBefore}
	p.out = newOutputLog(spec.maxOutput, api.Event{Type: api.EventStart, ProcessID: id, PID: first.PID, Time: &startedAt})
	var outputs sync.WaitGroup
	outputs.Add(2)
	p.outPipes = [2]*os.File{stdoutR, stderrR}
	go copyOutput(p.out, streamStdout, stdoutR, &p.outBusy[0], outputs.Done)
	go copyOutput(p.out, streamStderr, stderrR, &p.outBusy[1], outputs.Done)
	eof := make(chan struct{})
	go func() { outputs.Wait(); close(eof) }()
	switch {
	case spec.streamStdin:
		p.stdin = stdinW
		p.stdinMu.Lock() // handed to pumpStdin, so later writes queue behind it
	case len(spec.stdin) > 0 || spec.keepStdin:
		p.stdin = stdinW
		p.stdinMu.Lock() // handed to feedStdin, so later writes queue behind it
		go p.feedStdin(spec.stdin, !spec.keepStdin)
		spec.stdin = nil // p keeps spec; the data need not live as long
	default:
		stdinW.Close()
	}
	if spec.timeout > 0 {
		p.timer = time.AfterFunc(spec.timeout, func() { _ = p.signal(sigKill, true) })
	}
	go s.waitProc(p, sh, eof)
	return p, nil
}

// waitProc waits for the shim's report, collects the output that follows
// (drainOutput), and records the result. A shim that may take another
// command (it says so, and the agent never told it to stop) becomes the
// spare again; any other is released.
func (s *Server) waitProc(p *proc, sh *shimProc, eof <-chan struct{}) {
	var st shim.Status
	err := sh.dec.Decode(&st)
	ended := time.Now()
	shimExit := sh.exit
	p.mu.Lock()
	p.exited = true // from here on, nothing signals sh for p
	if p.timer != nil {
		p.timer.Stop()
	}
	reuse := err == nil && st.Reuse && !p.killed && !p.timedOut
	if reuse {
		p.shimGone = true // no longer p's
	}
	p.mu.Unlock()
	if reuse {
		s.reuseShim(sh)
		shimExit = nil
	} else {
		sh.release()
	}
	if err != nil || (st.ExitCode == nil && st.Signal == "") {
		// The shim died (OOM killer?) without reporting: kill what it ran.
		es := <-shimExit
		shimExit = nil
		p.mu.Lock()
		p.shimGone = true
		p.mu.Unlock()
		_ = unix.Kill(-p.pid, unix.SIGKILL)
		s.log.Warn("shim ended without a report", "process", p.id, "shim_status", int(es.ws), "err", err)
		st = shim.Status{Signal: shim.SignalName(unix.SIGKILL)}
	}
	drainOutput(eof, p.outPipes, &p.outBusy)
	res := api.ExecResult{ExitCode: st.ExitCode, DurationMS: ended.Sub(p.startedAt).Milliseconds()}
	if st.Signal != "" {
		res.Signal = &st.Signal
	}
	p.mu.Lock()
	res.TimedOut = p.timedOut
	killed := p.killed || p.timedOut
	p.mu.Unlock()
	res.OOMKilled = st.Signal == "SIGKILL" && !killed && s.oom.kills() > p.oomBefore
	p.out.finish(res, ended)
	p.closeStdin()
	close(p.done)
	if shimExit != nil {
		<-shimExit
		p.mu.Lock()
		p.shimGone = true
		p.mu.Unlock()
	}
}

// signal sends sig to the command. SIGKILL kills the whole tree through
// the shim; timeout marks the kill as a timeout.
func (p *proc) signal(sig unix.Signal, timeout bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		return conflict("process %s has exited", p.id)
	}
	if sig != sigKill {
		if err := unix.Kill(p.pid, sig); err != nil && err != unix.ESRCH {
			return fmt.Errorf("signal %d: %w", sig, err)
		}
		return nil
	}
	if timeout && !p.killed {
		p.timedOut = true
	}
	p.killed = p.killed || !timeout
	if p.shimGone {
		return nil
	}
	return unix.Kill(p.shimPid, unix.SIGTERM)
}

// feedStdin writes the initial stdin and closes it unless it stays open.
// The caller holds stdinMu; feedStdin releases it.
func (p *proc) feedStdin(data []byte, closeAfter bool) {
	defer p.stdinMu.Unlock()
	p.mu.Lock()
	f := p.stdin
	p.mu.Unlock()
	if f != nil && len(data) > 0 {
		_, _ = f.Write(data) // fails once the process is gone
	}
	if closeAfter {
		p.closeStdin()
	}
}

// writeStdin writes data to the process's stdin and closes it after with
// eof. A write blocked on a full pipe ends with ctx.
func (p *proc) writeStdin(ctx context.Context, data []byte, eof bool) error {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	p.mu.Lock()
	f, exited := p.stdin, p.exited
	p.mu.Unlock()
	switch {
	case exited:
		return conflict("process %s has exited", p.id)
	case f == nil:
		return conflict("stdin of process %s is closed", p.id)
	}
	if len(data) > 0 {
		_ = f.SetWriteDeadline(time.Time{})
		stop := context.AfterFunc(ctx, func() { _ = f.SetWriteDeadline(time.Unix(1, 0)) })
		_, err := f.Write(data)
		stop()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, os.ErrClosed) || errors.Is(err, unix.EPIPE) {
				return conflict("stdin of process %s is closed", p.id)
			}
			return fmt.Errorf("write stdin: %w", err)
		}
	}
	if eof {
		p.closeStdin()
	}
	return nil
}

func (p *proc) closeStdin() {
	p.mu.Lock()
	f := p.stdin
	p.stdin = nil
	p.mu.Unlock()
	if f != nil {
		f.Close()
	}
}

// finished reports whether the result is final.
func (p *proc) finished() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// snapshot describes p; withOutput fills in the result's kept output.
func (p *proc) snapshot(withOutput bool) api.Process {
	ap := api.Process{
		ID:        p.id,
		PID:       p.pid,
		Argv:      p.spec.reqArgv,
		Command:   p.spec.command,
		Cwd:       p.spec.dir,
		State:     api.ProcessRunning,
		StartedAt: p.startedAt.UTC(),
	}
	if res, ended := p.out.resultCopy(withOutput); res != nil {
		ended = ended.UTC()
		ap.State, ap.Result, ap.EndedAt = api.ProcessExited, res, &ended
	}
	return ap
}

// pidsLimit is the error of a command that could not start because the
// sandbox runs as many processes and threads as its pids limit allows.
func (s *Server) pidsLimit() error {
	if s.cfg.NProc > 0 {
		return newError(api.CodeLimitExceeded, "the sandbox is at its limit of %d processes and threads; end some to start more", s.cfg.NProc)
	}
	return newError(api.CodeLimitExceeded, "the sandbox is at its process limit; end some processes to start more")
}

// shimTasks is what one shim may hold in threads (about six: the Go
// runtime's), with a margin. The sandbox's cgroup grants as much per
// process on top of its pids (see the container backend's pidsMax).
const shimTasks = 8

// commandNProc is the RLIMIT_NPROC of a command about to start: the
// sandbox's pids for the commands themselves, plus the threads of the
// agent and of every live shim, the spare and the next spare included
// (the kernel counts them all against the same uid), so that shims never
// take the commands' share. 0 means no limit.
func (s *Server) commandNProc() int {
	if s.cfg.NProc <= 0 {
		return 0
	}
	return s.cfg.NProc + selfThreads() + shimTasks*(s.procs.live()+2)
}
