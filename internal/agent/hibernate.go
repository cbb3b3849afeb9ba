package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Hibernation. An idle sandbox's agent is most of what the sandbox costs
// the host: a Go runtime of about 1.3 MiB of private memory and six
// tasks. Once its spare shim retired for idleness (Config.SpareIdle), the
// agent checks whether it may hibernate: nothing runs in the sandbox but
// itself, no connection is open, and it holds nothing a client could ask
// for again (no process record, terminal, file watch or code context).
// Then it stops accepting, saves what it must keep (the stored
// environment, the spare's idle time, the process ids handed out) in a
// memfd and execs Config.IdleExec, a small C program, in its own place:
// the same PID 1, holding the listening socket. That program waits for
// the next connection and execs the agent again with --listen-fd and
// --state-fd; the connection waits in the socket's backlog meanwhile, so
// nothing the daemon sends is lost. What the next call pays is one start
// of the agent.
//
// The daemon's client closes idle connections after 2/5 of the spare's
// idle time (IdleConnTimeout: 24 s of the default minute), so the agent
// normally finds none open; when it finds one, or anything else that keeps it, it
// tries again after another idle time, as long as no spare came back.

// resumeState is what a hibernating agent keeps for its next start.
type resumeState struct {
	Env       map[string]string `json:"env,omitempty"`
	SpareIdle time.Duration     `json:"spare_idle"`
	ProcSeq   uint64            `json:"proc_seq"`
}

// maxStateBytes bounds the state read back at start.
const maxStateBytes = maxEnvBytes + 4096

// hibernation is the server's hibernation state; zero when disabled.
type hibernation struct {
	gate   *gateListener // nil: never hibernate
	mu     sync.Mutex    // serializes attempts
	retry  *time.Timer
	failed bool // an exec failed once: never try again
}

// gateListener is the agent's unix listener with a gate: paused, Accept
// parks instead of accepting, so that the server cannot take a connection
// while the agent decides to hibernate. It counts the connections it
// handed out that are not closed yet (hijacked ones included).
type gateListener struct {
	*net.UnixListener
	mu     sync.Mutex
	cond   *sync.Cond
	paused bool
	parked bool
	done   bool // the server stopped accepting
	open   atomic.Int64
}

func newGateListener(ln *net.UnixListener) *gateListener {
	g := &gateListener{UnixListener: ln}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// Accept waits while the gate is paused, then accepts.
func (g *gateListener) Accept() (net.Conn, error) {
	for {
		g.mu.Lock()
		for g.paused {
			g.parked = true
			g.cond.Broadcast()
			g.cond.Wait()
		}
		g.parked = false
		g.mu.Unlock()
		c, err := g.UnixListener.AcceptUnix()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue // pause's deadline woke us: park
			}
			g.stop()
			return nil, err
		}
		g.open.Add(1)
		return &trackedConn{UnixConn: c, open: &g.open}, nil
	}
}

// pause parks Accept and reports whether it did. When it returns true,
// every connection accepted before has been handed to the HTTP server and
// is counted in open; false means the server no longer accepts.
func (g *gateListener) pause() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.paused = true
	_ = g.UnixListener.SetDeadline(time.Unix(1, 0)) // wakes an Accept in progress
	for !g.parked && !g.done {
		g.cond.Wait()
	}
	return !g.done
}

// stop marks the end of accepting (Accept failed or Serve returned).
func (g *gateListener) stop() {
	g.mu.Lock()
	g.done = true
	g.cond.Broadcast()
	g.mu.Unlock()
}

// resume lets Accept accept again.
func (g *gateListener) resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	_ = g.UnixListener.SetDeadline(time.Time{})
	g.paused = false
	g.cond.Broadcast()
}

// trackedConn is an accepted connection counted until it is closed. It
// keeps *net.UnixConn's methods (ReadFrom for sendfile, CloseWrite).
type trackedConn struct {
	*net.UnixConn
	open   *atomic.Int64
	closed atomic.Bool
}

func (c *trackedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.open.Add(-1)
	}
	return c.UnixConn.Close()
}

// spareRetired is called when the spare retired for idleness: the agent
// hibernates if it may, or tries again after idle.
func (s *Server) spareRetired(idle time.Duration) {
	h := &s.hib
	if h.gate == nil || idle <= 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failed {
		return
	}
	// The spare just retired: give it a moment to exit and be reaped.
	for i := 0; i < 50 && othersRunning() > 0; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	why := s.hibernate()
	s.log.Debug("not hibernating", "reason", why)
	if h.failed {
		return
	}
	if h.retry != nil {
		h.retry.Stop()
	}
	h.retry = time.AfterFunc(idle, func() {
		s.shims.mu.Lock()
		idle, spare := s.shims.idle, s.shims.spare != nil || s.shims.filling
		s.shims.mu.Unlock()
		if !spare {
			s.spareRetired(idle)
		}
	})
}

// hibernate execs Config.IdleExec if the agent may hibernate, and
// otherwise returns why not. It returns only if it did not exec.
func (s *Server) hibernate() string {
	if why := s.busy(); why != "" {
		return why
	}
	g := s.hib.gate
	ok := g.pause()
	defer g.resume()
	if !ok {
		return "the server stopped"
	}
	if n := g.open.Load(); n > 0 {
		return fmt.Sprintf("%d connections open", n)
	}
	// No new shim may start from here on: the spare's refill is the one
	// thing that can start one without a call.
	s.shims.mu.Lock()
	if s.shims.spare != nil || s.shims.filling || s.shims.closed {
		s.shims.mu.Unlock()
		return "a spare shim"
	}
	s.shims.closed = true
	idle := s.shims.idle
	s.shims.mu.Unlock()
	defer func() {
		s.shims.mu.Lock()
		s.shims.closed = false
		s.shims.mu.Unlock()
	}()
	if why := s.busy(); why != "" {
		return why
	}
	argv, files, err := s.hibernateArgs(idle)
	if err == nil {
		s.log.Debug("hibernating", "exec", s.cfg.IdleExec)
		err = unix.Exec(s.cfg.IdleExec, argv, os.Environ())
	}
	for _, f := range files {
		f.Close()
	}
	s.hib.failed = true
	s.log.Warn("cannot hibernate; the agent stays", "err", err)
	return "exec failed"
}

// busy returns what keeps the agent from hibernating, or "".
func (s *Server) busy() string {
	switch {
	case s.procs.size() > 0:
		return "process records"
	case len(s.ptys.list()) > 0:
		return "terminals"
	case len(s.watches) > 0:
		return "file watches"
	case s.code.Len() > 0:
		return "code contexts"
	}
	if n := othersRunning(); n != 0 {
		return fmt.Sprintf("%d other processes", n)
	}
	return ""
}

// othersRunning counts the processes in /proc other than this one (-1 if
// /proc cannot be read): a process of the sandbox keeps the agent up.
func othersRunning() int {
	d, err := os.Open("/proc")
	if err != nil {
		return -1
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return -1
	}
	self := strconv.Itoa(os.Getpid())
	n := 0
	for _, name := range names {
		if name != self && name != "" && strings.Trim(name, "0123456789") == "" {
			n++
		}
	}
	return n
}

// hibernateArgs returns the idle program's argv (the listening socket's
// descriptor, the agent and the agent's arguments to come back with) and
// the descriptors it hands over, which are not closed on exec.
func (s *Server) hibernateArgs(idle time.Duration) ([]string, []*os.File, error) {
	lf, err := s.hib.gate.File()
	if err != nil {
		return nil, nil, fmt.Errorf("listener: %w", err)
	}
	files := []*os.File{lf}
	st := resumeState{SpareIdle: idle, ProcSeq: s.procs.lastSeq()}
	s.env.mu.RLock()
	st.Env = s.env.vars
	s.env.mu.RUnlock()
	b, err := json.Marshal(st)
	if err != nil {
		return nil, files, err
	}
	fd, err := unix.MemfdCreate("paddock-agent-state", 0)
	if err != nil {
		return nil, files, fmt.Errorf("memfd: %w", err)
	}
	sf := os.NewFile(uintptr(fd), "state")
	files = append(files, sf)
	if _, err := sf.Write(b); err != nil {
		return nil, files, fmt.Errorf("state: %w", err)
	}
	lfd, err := keepOnExec(lf)
	if err != nil {
		return nil, files, err
	}
	sfd, err := keepOnExec(sf)
	if err != nil {
		return nil, files, err
	}
	argv := append([]string{s.cfg.IdleExec, lfd}, resumeArgs(s.cfg.Args, lfd, sfd)...)
	return argv, files, nil
}

// keepOnExec clears f's close-on-exec flag and returns its descriptor
// number. It goes through SyscallConn, as Fd would put a socket shared
// with the listener into blocking mode.
func keepOnExec(f *os.File) (string, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return "", err
	}
	var fd int
	var ferr error
	if err := rc.Control(func(u uintptr) {
		fd = int(u)
		_, ferr = unix.FcntlInt(u, unix.F_SETFD, 0)
	}); err != nil {
		return "", err
	}
	if ferr != nil {
		return "", fmt.Errorf("keep descriptor %d: %w", fd, ferr)
	}
	return strconv.Itoa(fd), nil
}

// resumeArgs returns the agent's command line args (its argv, program
// first) with its listener and state set to the descriptors lfd and sfd,
// replacing --listen, --listen-fd and --state-fd (in any flag form). As
// with package flag, every flag but a boolean one (--debug) takes the next
// argument as its value unless it has one after "=".
func resumeArgs(args []string, lfd, sfd string) []string {
	drop := []string{"listen", "listen-fd", "state-fd"}
	out := make([]string, 0, len(args)+4)
	for i := 0; i < len(args); i++ {
		name, hasValue := flagName(args[i])
		takesNext := i > 0 && name != "" && !hasValue && name != "debug"
		if i > 0 && slices.Contains(drop, name) {
			if takesNext {
				i++
			}
			continue
		}
		out = append(out, args[i])
		if takesNext && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return append(out, "--listen-fd", lfd, "--state-fd", sfd)
}

// flagName returns the name of a -flag or --flag argument ("" if arg is
// not one) and whether it carries its value (--flag=value).
func flagName(arg string) (string, bool) {
	if !strings.HasPrefix(arg, "-") || arg == "-" || arg == "--" {
		return "", false
	}
	name := strings.TrimPrefix(strings.TrimPrefix(arg, "-"), "-")
	name, _, hasValue := strings.Cut(name, "=")
	return name, hasValue
}

// readResumeState reads and closes the state a hibernated agent left in
// descriptor fd.
func readResumeState(fd int) (resumeState, error) {
	var st resumeState
	f := os.NewFile(uintptr(fd), "state")
	if f == nil {
		return st, fmt.Errorf("state fd %d is not open", fd)
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, 0, maxStateBytes+1))
	if err != nil {
		return st, fmt.Errorf("state fd %d: %w", fd, err)
	}
	if len(b) > maxStateBytes {
		return st, fmt.Errorf("state fd %d: more than %d bytes", fd, maxStateBytes)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("state fd %d: %w", fd, err)
	}
	return st, nil
}

// resume applies the state of an agent that hibernated.
func (s *Server) resume(st resumeState) {
	s.env.mu.Lock()
	s.env.vars = st.Env
	s.env.mu.Unlock()
	s.shims.idle = max(st.SpareIdle, 0)
	s.procs.setSeq(st.ProcSeq)
}
