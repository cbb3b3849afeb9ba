package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// shimProc is a started shim: waiting for its spec on the control socket,
// or running the command it was sent.
type shimProc struct {
	pid    int
	exit   <-chan exitStatus
	ctl    *os.File // the agent's end of the control socket
	status *os.File // read end of the status pipe
}

// shimPool holds one spare shim: a shim started ahead, already past the
// exec of the agent binary and the start of the Go runtime, blocked
// reading its spec. An exec takes it and only sends the spec; the spare is
// refilled in the background. The spare is as sealed as any shim (it is
// undumpable, so nothing in the sandbox can ptrace it or open its control
// socket); a sandbox process can only kill it, and the next exec then
// starts a shim of its own.
type shimPool struct {
	mu      sync.Mutex
	spare   *shimProc
	filling bool
	closed  bool
}

// startShim starts a shim that waits for its spec.
func (s *Server) startShim() (*shimProc, error) {
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pipe: %w", err)
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		statusR.Close()
		statusW.Close()
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	// The agent's end is non-blocking, so that writes to it take deadlines.
	if err := unix.SetNonblock(pair[0], true); err != nil {
		statusR.Close()
		statusW.Close()
		unix.Close(pair[0])
		unix.Close(pair[1])
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	ctl, child := os.NewFile(uintptr(pair[0]), "shim-control"), os.NewFile(uintptr(pair[1]), "shim-control")
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		statusR.Close()
		statusW.Close()
		ctl.Close()
		child.Close()
		return nil, fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	fds := []uintptr{devnull.Fd(), devnull.Fd(), devnull.Fd(), statusW.Fd(), child.Fd()}
	pid, exit, err := forkExec(s.reaper, s.cfg.ShimPath, shimArgv(), &syscall.ProcAttr{Dir: "/", Env: []string{shimEnv}, Files: fds})
	devnull.Close()
	statusW.Close()
	child.Close()
	if err != nil {
		statusR.Close()
		ctl.Close()
		if errors.Is(err, unix.EAGAIN) {
			return nil, s.pidsLimit()
		}
		return nil, fmt.Errorf("start shim %s: %w", s.cfg.ShimPath, err)
	}
	return &shimProc{pid: pid, exit: exit, ctl: ctl, status: statusR}, nil
}

// release closes the agent's ends: a shim still waiting for its spec then
// exits. Its exit status is collected by the reaper or forkExec.
func (sh *shimProc) release() {
	sh.ctl.Close()
	sh.status.Close()
}

// gone reports whether the shim has already exited (a sandbox process
// killed the spare); it consumes the exit status if so.
func (sh *shimProc) gone() bool {
	select {
	case <-sh.exit:
		return true
	default:
		return false
	}
}

// takeShim returns the spare shim, or a new one if there is none, and
// refills the spare in the background, refillDelay later when the spare
// was taken. spare tells which.
func (s *Server) takeShim() (sh *shimProc, spare bool, err error) {
	s.shims.mu.Lock()
	sh, s.shims.spare = s.shims.spare, nil
	s.shims.mu.Unlock()
	if sh != nil {
		s.refillShimAfter(time.After(refillDelay))
	} else {
		s.refillShim()
	}
	if sh != nil && !sh.gone() {
		return sh, true, nil
	}
	if sh != nil {
		sh.release()
	}
	sh, err = s.startShim()
	return sh, false, err
}

// refillShim starts a spare shim in the background unless there is one or
// one is starting.
func (s *Server) refillShim() { s.refillShimAfter(nil) }

// refillShimAfter is refillShim, but the new spare is started only once
// taken fires. Starting a process holds the agent's only P (GOMAXPROCS=1) from
// its clone until the child's exec; done while the taken shim's command
// runs, it delays that command's answer.
func (s *Server) refillShimAfter(taken <-chan time.Time) {
	s.shims.mu.Lock()
	defer s.shims.mu.Unlock()
	if s.shims.spare != nil || s.shims.filling || s.shims.closed {
		return
	}
	s.shims.filling = true
	go func() {
		if taken != nil {
			<-taken
		}
		sh, err := s.startShim()
		s.shims.mu.Lock()
		s.shims.filling = false
		if err == nil && s.shims.spare == nil && !s.shims.closed {
			s.shims.spare, sh = sh, nil
		}
		s.shims.mu.Unlock()
		if err != nil {
			// At the pids limit, say; the next exec starts its own shim
			// and tries again.
			s.log.Debug("start spare shim", "err", err)
		}
		if sh != nil {
			sh.release()
		}
	}()
}

// closeShims ends the spare and stops refilling, waiting up to d for the
// spare to exit.
func (s *Server) closeShims(d time.Duration) {
	s.shims.mu.Lock()
	sh := s.shims.spare
	s.shims.spare, s.shims.closed = nil, true
	s.shims.mu.Unlock()
	if sh == nil {
		return
	}
	sh.release()
	select {
	case <-sh.exit:
	case <-time.After(d):
		_ = unix.Kill(sh.pid, unix.SIGKILL)
	}
}

// errShimLost is a shim that died before it reported the command's pid,
// killed by a signal: a sandbox process killed the spare.
var errShimLost = errors.New("the shim was killed before it started the command")

// startCommand starts spec under a shim (the spare if there is one) with
// stdio as the command's stdin, stdout and stderr, with tty as a session
// leader whose controlling terminal is stdin. It returns the shim, its
// first report (the command's pid) and the decoder of its next report.
// The caller still owns stdio and closes its copies.
func (s *Server) startCommand(spec *execSpec, tty bool, nproc int, stdio [3]*os.File) (*shimProc, shimStatus, *json.Decoder, error) {
	ss := shimSpec{Path: spec.path, Argv: spec.argv, Env: spec.env, Dir: spec.dir, NProc: nproc, TTY: tty}
	sh, spare, err := s.takeShim()
	if err != nil {
		return nil, shimStatus{}, nil, err
	}
	first, dec, err := s.runOnShim(sh, ss, stdio)
	if spare && errors.Is(err, errShimLost) {
		if sh, err = s.startShim(); err != nil {
			return nil, shimStatus{}, nil, err
		}
		first, dec, err = s.runOnShim(sh, ss, stdio)
	}
	if err != nil {
		return nil, shimStatus{}, nil, err
	}
	return sh, first, dec, nil
}

// runOnShim sends ss to sh and waits for its first report.
func (s *Server) runOnShim(sh *shimProc, ss shimSpec, stdio [3]*os.File) (shimStatus, *json.Decoder, error) {
	var first shimStatus
	serr := sendShimSpec(sh.ctl, ss, stdio)
	sh.ctl.Close()
	dec := json.NewDecoder(sh.status)
	derr := serr
	if serr == nil {
		_ = sh.status.SetReadDeadline(time.Now().Add(shimStartTimeout))
		derr = dec.Decode(&first)
		_ = sh.status.SetReadDeadline(time.Time{})
	}
	if derr == nil && first.PID > 0 {
		return first, dec, nil
	}
	sh.status.Close()
	if first.Error == "" {
		_ = unix.Kill(sh.pid, unix.SIGKILL)
	}
	es := <-sh.exit
	switch {
	case first.Limit:
		return first, nil, s.pidsLimit()
	case first.Error != "":
		return first, nil, badRequest("%s", first.Error)
	case serr != nil && !errors.Is(serr, os.ErrDeadlineExceeded),
		errors.Is(derr, io.EOF) && es.ok && es.ws.Signaled():
		return first, nil, fmt.Errorf("%w: %w", errShimLost, derr)
	case errors.Is(derr, io.EOF) && es.ok && !es.ws.Signaled():
		// The shim died before its first report: the Go runtime exits
		// when it cannot make a thread, which only the pids limit causes
		// here.
		return first, nil, s.pidsLimit()
	}
	return first, nil, fmt.Errorf("shim did not start the command: %w", derr)
}

// refillDelay is how long after an exec takes the spare a new one starts:
// most commands a model runs end within it.
const refillDelay = 30 * time.Millisecond
