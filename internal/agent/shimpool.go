package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/paddock-sandbox/paddock/internal/shim"
	"golang.org/x/sys/unix"
)

// shimProc is a started shim: waiting for its spec on the control socket,
// or running the command it was sent.
type shimProc struct {
	pid    int
	exit   <-chan exitStatus
	ctl    *os.File      // the agent's end of the control socket
	status *os.File      // read end of the status pipe
	dec    *json.Decoder // of status, for every command the shim runs
	// nproc is the RLIMIT_NPROC the shim set for its last command (0:
	// none yet). A shim can lower its limit but not raise it.
	nproc int
}

// shimPool holds one spare shim: a shim started ahead, already past the
// exec of the agent binary and the start of the Go runtime, blocked
// reading its spec. An exec takes it and only sends the spec; the shim
// comes back as the spare once its command ended, if it may take another
// (reuseShim), and otherwise a new spare starts in the background. The
// spare is as sealed as any shim (it is undumpable, so nothing in the
// sandbox can ptrace it or open its control socket); a sandbox process can
// only kill it, and the next exec then starts a shim of its own.
//
// An idle sandbox's spare is retired after idle without an exec (when idle
// is positive): it holds a process and its threads (8 tasks, about 0.9 MiB
// of private memory) that thousands of idle sandboxes would pay for, while
// the exec that follows a long pause only pays one shim start.
type shimPool struct {
	mu      sync.Mutex
	spare   *shimProc
	filling bool
	closed  bool
	idle    time.Duration // retire the spare after this long unused; 0 = never
	retire  *time.Timer   // pending retirement of the spare; nil if none
	gen     uint64        // counts spares placed, so a stale retirement does nothing
	// fellBack is set once Config.ShimPath failed to start (not a
	// program this kernel runs, say): shims run from DefaultShimPath.
	fellBack atomic.Bool
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
	path := s.cfg.ShimPath
	canFallBack := path != DefaultShimPath && !s.shims.fellBack.Load()
	if s.shims.fellBack.Load() {
		path = DefaultShimPath
	}
	pid, exit, err := forkExec(s.reaper, path, shim.Argv(), &syscall.ProcAttr{Dir: "/", Env: []string{shim.Env}, Files: fds})
	devnull.Close()
	statusW.Close()
	child.Close()
	if err != nil {
		statusR.Close()
		ctl.Close()
		if errors.Is(err, unix.EAGAIN) {
			return nil, s.pidsLimit()
		}
		if canFallBack {
			s.log.Warn("the shim did not start; the agent runs itself as the shim from now on", "shim", path, "err", err)
			s.shims.fellBack.Store(true)
			return s.startShim()
		}
		return nil, fmt.Errorf("start shim %s: %w", path, err)
	}
	return &shimProc{pid: pid, exit: exit, ctl: ctl, status: statusR, dec: json.NewDecoder(statusR)}, nil
}

// fits reports whether sh can run a command whose RLIMIT_NPROC is nproc
// (0: none).
func (sh *shimProc) fits(nproc int) bool {
	return sh.nproc == 0 || (nproc > 0 && nproc <= sh.nproc)
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

// takeShim returns the spare shim, or a new one if there is none or the
// spare cannot take a command with RLIMIT_NPROC nproc, and has the spare
// refilled in the background refillDelay later, unless a shim whose
// command ended has come back by then. spare tells which.
func (s *Server) takeShim(nproc int) (sh *shimProc, spare bool, err error) {
	s.shims.mu.Lock()
	sh, s.shims.spare = s.shims.spare, nil
	s.shims.stopRetireLocked()
	s.shims.mu.Unlock()
	// Either way the refill waits: starting a process holds the agent's
	// only P, and this exec's command is about to start.
	s.refillShimAfter(time.After(refillDelay))
	if sh != nil && !sh.gone() && sh.fits(nproc) {
		return sh, true, nil
	}
	if sh != nil {
		sh.release()
	}
	sh, err = s.startShim()
	return sh, false, err
}

// reuseShim makes sh, whose command ended and which waits for its next
// spec (it said so: shim.Status.Reuse), the spare, or releases it when
// there is a spare already.
func (s *Server) reuseShim(sh *shimProc) {
	s.shims.mu.Lock()
	if s.shims.spare == nil && !s.shims.closed && !sh.gone() {
		s.shims.spare, sh = sh, nil
		s.armRetireLocked()
	}
	s.shims.mu.Unlock()
	if sh != nil {
		sh.release()
	}
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
			s.shims.mu.Lock()
			back := s.shims.spare != nil || s.shims.closed // a shim came back
			if back {
				s.shims.filling = false
			}
			s.shims.mu.Unlock()
			if back {
				return
			}
		}
		sh, err := s.startShim()
		s.shims.mu.Lock()
		s.shims.filling = false
		if err == nil && s.shims.spare == nil && !s.shims.closed {
			s.shims.spare, sh = sh, nil
			s.armRetireLocked()
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
	s.shims.stopRetireLocked()
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

// armRetireLocked schedules the retirement of the spare just placed, if
// spares retire; s.shims.mu is held.
func (s *Server) armRetireLocked() {
	p := &s.shims
	p.gen++
	p.stopRetireLocked()
	if p.idle <= 0 || p.spare == nil {
		return
	}
	gen := p.gen
	p.retire = time.AfterFunc(p.idle, func() { s.retireSpare(gen) })
}

// stopRetireLocked cancels a pending retirement; s.shims.mu is held.
func (p *shimPool) stopRetireLocked() {
	if p.retire != nil {
		p.retire.Stop()
		p.retire = nil
	}
}

// retireSpare ends the spare placed as generation gen if it is still the
// spare: the sandbox has run no command for the idle time. No new spare is
// started; the next exec starts its own shim and refills.
func (s *Server) retireSpare(gen uint64) {
	s.shims.mu.Lock()
	sh := s.shims.spare
	if sh == nil || s.shims.gen != gen {
		s.shims.mu.Unlock()
		return
	}
	s.shims.spare, s.shims.retire = nil, nil
	idle := s.shims.idle
	s.shims.mu.Unlock()
	sh.release() // the shim reads EOF and exits; the reaper collects it
	s.log.Debug("spare shim retired", "idle", idle)
	s.spareRetired(idle)
}

// setSpareIdle sets how long the spare waits unused before it is retired
// (0: never) and reschedules the current spare's retirement.
func (s *Server) setSpareIdle(d time.Duration) {
	s.shims.mu.Lock()
	defer s.shims.mu.Unlock()
	s.shims.idle = max(d, 0)
	s.armRetireLocked()
}

// SparePolicy is the body of PUT /spare.
type SparePolicy struct {
	// IdleMS retires the spare shim after this many milliseconds without
	// an exec; 0 keeps it.
	IdleMS int64 `json:"idle_ms"`
}

// handlePutSpare sets the spare shim's idle time: the daemon keeps the
// spare of a warm-pool sandbox (started with no idle time) and sets the
// idle time when it hands the sandbox out.
func (s *Server) handlePutSpare(w http.ResponseWriter, r *http.Request) error {
	var p SparePolicy
	if err := decodeJSON(w, r, &p, maxJSONBytes, false); err != nil {
		return err
	}
	if p.IdleMS < 0 || p.IdleMS > int64(maxSpareIdle/time.Millisecond) {
		return badRequest("idle_ms must be between 0 and %d", int64(maxSpareIdle/time.Millisecond))
	}
	s.setSpareIdle(time.Duration(p.IdleMS) * time.Millisecond)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// maxSpareIdle bounds PUT /spare's idle time (a year).
const maxSpareIdle = 365 * 24 * time.Hour

// errShimLost is a shim that died before it reported the command's pid,
// killed by a signal: a sandbox process killed the spare.
var errShimLost = errors.New("the shim was killed before it started the command")

// startCommand starts spec under a shim (the spare if there is one) with
// stdio as the command's stdin, stdout and stderr, with tty as a session
// leader whose controlling terminal is stdin. It returns the shim and its
// first report (the command's pid); the shim's decoder gives its next
// report. The caller still owns stdio and closes its copies, and ends the
// shim with reuseShim or release.
func (s *Server) startCommand(spec *execSpec, tty bool, nproc int, stdio [3]*os.File) (*shimProc, shim.Status, error) {
	ss := shim.Spec{Path: spec.path, Argv: spec.argv, Env: spec.env, Dir: spec.dir, NProc: nproc, TTY: tty}
	sh, spare, err := s.takeShim(nproc)
	if err != nil {
		return nil, shim.Status{}, err
	}
	first, err := s.runOnShim(sh, ss, stdio)
	if spare && errors.Is(err, errShimLost) {
		if sh, err = s.startShim(); err != nil {
			return nil, shim.Status{}, err
		}
		first, err = s.runOnShim(sh, ss, stdio)
	}
	if err != nil {
		return nil, shim.Status{}, err
	}
	if nproc > 0 {
		sh.nproc = nproc
	}
	return sh, first, nil
}

// runOnShim sends ss to sh and waits for its first report; on an error
// sh is released and gone.
func (s *Server) runOnShim(sh *shimProc, ss shim.Spec, stdio [3]*os.File) (shim.Status, error) {
	var first shim.Status
	serr := shim.SendSpec(sh.ctl, ss, stdio)
	derr := serr
	if serr == nil {
		_ = sh.status.SetReadDeadline(time.Now().Add(shim.StartTimeout))
		derr = sh.dec.Decode(&first)
		_ = sh.status.SetReadDeadline(time.Time{})
	}
	if derr == nil && first.PID > 0 {
		return first, nil
	}
	sh.release()
	if first.Error == "" {
		_ = unix.Kill(sh.pid, unix.SIGKILL)
	}
	es := <-sh.exit
	switch {
	case first.Limit:
		return first, s.pidsLimit()
	case first.Error != "":
		return first, badRequest("%s", first.Error)
	case serr != nil && !errors.Is(serr, os.ErrDeadlineExceeded),
		errors.Is(derr, io.EOF) && es.ok && es.ws.Signaled():
		return first, fmt.Errorf("%w: %w", errShimLost, derr)
	case errors.Is(derr, io.EOF) && es.ok && !es.ws.Signaled():
		// The shim died before its first report: the Go runtime exits
		// when it cannot make a thread, which only the pids limit causes
		// here.
		return first, s.pidsLimit()
	}
	return first, fmt.Errorf("shim did not start the command: %w", derr)
}

// refillDelay is how long after an exec takes the spare a new one starts,
// unless the shim came back first: most commands a model runs end within
// it, and their shim is the next spare.
const refillDelay = 100 * time.Millisecond
