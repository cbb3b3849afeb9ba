package agent

// Interactive terminals: GET /pty upgrades to a WebSocket attached to a
// command on a new pseudo-terminal of the sandbox's own devpts. The
// command starts under the shim like an exec (same validation, cwd,
// environment and RLIMIT_NPROC), but as a session leader whose controlling
// terminal is the pty; it lives as long as the WebSocket.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/shim"
	"golang.org/x/sys/unix"
)

// Terminal bounds.
const (
	// DefaultMaxPTYs bounds the terminals open at once in a sandbox.
	DefaultMaxPTYs = 16
	// PTYMaxInput bounds one message from the client (keyboard input or a
	// control message).
	PTYMaxInput = 64 << 10
	// PTYOutputChunk is the largest output message (one read of the pty).
	PTYOutputChunk = 32 << 10
	// ptyMaxDim bounds cols and rows.
	ptyMaxDim = 1000
	// ptyDrain is how long output is still forwarded after the command
	// exited (background processes may keep the terminal open).
	ptyDrain = 200 * time.Millisecond
)

// ptyProc is one command running on a pseudo-terminal.
type ptyProc struct {
	id        string
	spec      *execSpec
	startedAt time.Time
	pid       int
	shimPid   int
	master    *os.File
	done      chan struct{} // closed once status is set
	status    shim.Status

	mu       sync.Mutex
	cols     int
	rows     int
	exited   bool
	shimGone bool
}

// ptyRequest reads the query of GET /pty into an exec request and a size.
func ptyRequest(q url.Values) (*api.ExecRequest, int, int, error) {
	req := &api.ExecRequest{Argv: q["argv"], Command: q.Get("command"), Cwd: q.Get("cwd"), Env: map[string]string{}}
	for _, kv := range q["env"] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, 0, 0, badRequest("env must be KEY=VALUE, got %q", kv)
		}
		req.Env[k] = v
	}
	if _, ok := req.Env["TERM"]; !ok {
		req.Env["TERM"] = "xterm-256color"
	}
	if len(req.Argv) == 0 && req.Command == "" {
		req.Argv = []string{"/bin/sh"}
		if isExecutable("/bin/bash") {
			req.Argv = []string{"/bin/bash", "-l"}
		}
	}
	dim := func(name string, def int) (int, error) {
		v := q.Get(name)
		if v == "" {
			return def, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > ptyMaxDim {
			return 0, badRequest("%s must be 1-%d", name, ptyMaxDim)
		}
		return n, nil
	}
	cols, err := dim("cols", 80)
	if err != nil {
		return nil, 0, 0, err
	}
	rows, err := dim("rows", 24)
	if err != nil {
		return nil, 0, 0, err
	}
	return req, cols, rows, nil
}

// handlePTY starts a command on a new terminal and serves its WebSocket
// (GET /pty). Errors before the upgrade are JSON answers.
func (s *Server) handlePTY(w http.ResponseWriter, r *http.Request) error {
	req, cols, rows, err := ptyRequest(r.URL.Query())
	if err != nil {
		return err
	}
	spec, err := s.execSpec(req, true)
	if err != nil {
		return err
	}
	id, err := s.ptys.reserve()
	if err != nil {
		return err
	}
	defer s.ptys.remove(id)
	p, err := s.launchPTY(id, spec, cols, rows)
	if err != nil {
		return err
	}
	s.ptys.put(id, p)
	defer p.wait()
	defer p.kill()
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true}) // only the daemon reaches the agent
	if err != nil {
		return nil // Accept answered
	}
	c.SetReadLimit(PTYMaxInput)
	p.serve(r.Context(), c)
	return nil
}

// launchPTY opens a pseudo-terminal of cols×rows and starts spec on it
// under the shim.
func (s *Server) launchPTY(id string, spec *execSpec, cols, rows int) (*ptyProc, error) {
	master, slave, err := openPTY()
	if err != nil {
		return nil, err
	}
	if err := setWinsize(master, cols, rows); err != nil {
		master.Close()
		slave.Close()
		return nil, err
	}
	startedAt := time.Now()
	sh, first, err := s.startCommand(spec, true, s.cfg.NProc, [3]*os.File{slave, slave, slave})
	slave.Close()
	if err != nil {
		master.Close()
		return nil, err
	}
	p := &ptyProc{id: id, spec: spec, startedAt: startedAt, pid: first.PID, shimPid: sh.pid, master: master,
		done: make(chan struct{}), cols: cols, rows: rows}
	go func() {
		var st shim.Status
		if err := sh.dec.Decode(&st); err != nil || (st.ExitCode == nil && st.Signal == "") {
			_ = unix.Kill(-p.pid, unix.SIGKILL)
			st = shim.Status{Signal: shim.SignalName(unix.SIGKILL)}
		}
		sh.release() // a terminal's shim exits with its command
		p.mu.Lock()
		p.exited, p.status = true, st
		p.mu.Unlock()
		close(p.done)
		<-sh.exit
		p.mu.Lock()
		p.shimGone = true
		p.mu.Unlock()
	}()
	return p, nil
}

// serve relays the WebSocket c and the terminal until the command exited
// (then it sends the exit message and closes c) or c closed.
func (p *ptyProc) serve(ctx context.Context, c *websocket.Conn) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer c.CloseNow()
	if err := writeMsg(ctx, c, api.PtyMessage{Type: api.PtyMsgStarted, PtyID: p.id, PID: p.pid}); err != nil {
		return
	}
	output := make(chan struct{})
	go func() { // terminal → client; a slow client blocks the reads
		defer close(output)
		buf := make([]byte, PTYOutputChunk)
		for {
			n, err := p.master.Read(buf)
			if n > 0 {
				if werr := c.Write(ctx, websocket.MessageBinary, buf[:n]); werr != nil {
					cancel()
					return
				}
			}
			if err != nil { // EIO once no process holds the terminal
				return
			}
		}
	}()
	go func() { // client → terminal
		defer cancel()
		for {
			typ, data, err := c.Read(ctx)
			if err != nil {
				return
			}
			if typ == websocket.MessageBinary {
				if err := p.writeInput(ctx, data); err != nil {
					return
				}
				continue
			}
			var m api.PtyMessage
			if json.Unmarshal(data, &m) != nil || m.Type != api.PtyMsgResize {
				c.Close(websocket.StatusUnsupportedData, "want a resize message")
				return
			}
			if err := p.resize(m.Cols, m.Rows); err != nil {
				c.Close(websocket.StatusPolicyViolation, err.Error())
				return
			}
		}
	}()
	select {
	case <-p.done:
	case <-ctx.Done():
		return // the client went away: the caller kills the command
	}
	select {
	case <-output:
	case <-time.After(ptyDrain):
	}
	p.master.Close() // ends the output goroutine
	<-output
	st := p.status
	m := api.PtyMessage{Type: api.PtyMsgExit, ExitCode: st.ExitCode}
	if st.Signal != "" {
		m.Signal = &st.Signal
	}
	if writeMsg(ctx, c, m) == nil {
		c.Close(websocket.StatusNormalClosure, "exited")
	}
}

func writeMsg(ctx context.Context, c *websocket.Conn, m api.PtyMessage) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return c.Write(ctx, websocket.MessageText, b)
}

// writeInput writes keyboard input; a write blocked on a full terminal
// ends with ctx.
func (p *ptyProc) writeInput(ctx context.Context, data []byte) error {
	_ = p.master.SetWriteDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { _ = p.master.SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()
	_, err := p.master.Write(data)
	return err
}

// resize sets the terminal's size (the kernel sends SIGWINCH).
func (p *ptyProc) resize(cols, rows int) error {
	if cols < 1 || cols > ptyMaxDim || rows < 1 || rows > ptyMaxDim {
		return badRequest("cols and rows must be 1-%d", ptyMaxDim)
	}
	if err := setWinsize(p.master, cols, rows); err != nil {
		return err
	}
	p.mu.Lock()
	p.cols, p.rows = cols, rows
	p.mu.Unlock()
	return nil
}

// kill ends the command's whole tree through the shim.
func (p *ptyProc) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.exited && !p.shimGone {
		_ = unix.Kill(p.shimPid, unix.SIGTERM)
	}
}

// wait waits for the command's end and releases the terminal.
func (p *ptyProc) wait() {
	<-p.done
	p.master.Close()
}

func (p *ptyProc) info() api.PtyInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	return api.PtyInfo{ID: p.id, PID: p.pid, Argv: p.spec.reqArgv, Command: p.spec.command, Cwd: p.spec.dir,
		Cols: p.cols, Rows: p.rows, StartedAt: p.startedAt.UTC()}
}

// openPTY opens a new pseudo-terminal pair of the sandbox's devpts. The
// master is non-blocking (reads and writes go through the runtime poller);
// neither end becomes the agent's controlling terminal.
func openPTY() (master, slave *os.File, err error) {
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	master = os.NewFile(uintptr(fd), "/dev/ptmx")
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("unlock pty: %w", err)
	}
	// TIOCGPTPEER opens the peer without a path lookup; older kernels and
	// gVisor may lack it.
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	sfd := int(r)
	if errno != 0 {
		n, nerr := unix.IoctlGetInt(fd, unix.TIOCGPTN)
		if nerr != nil {
			master.Close()
			return nil, nil, fmt.Errorf("pty number: %w", nerr)
		}
		sfd, err = unix.Open("/dev/pts/"+strconv.Itoa(n), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			master.Close()
			return nil, nil, fmt.Errorf("open pty peer: %w", err)
		}
	}
	return master, os.NewFile(uintptr(sfd), "pty"), nil
}

func setWinsize(f *os.File, cols, rows int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: uint16(cols), Row: uint16(rows)})
	}); err != nil {
		return err
	}
	if ierr != nil {
		return fmt.Errorf("set terminal size: %w", ierr)
	}
	return nil
}
