package e2b

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// Messages of envd's process.Process service, in the protobuf JSON
// mapping (lowerCamelCase names, bytes as base64).
type (
	processConfig struct {
		Cmd  string            `json:"cmd"`
		Args []string          `json:"args,omitempty"`
		Envs map[string]string `json:"envs,omitempty"`
		Cwd  *string           `json:"cwd,omitempty"`
	}
	ptyConfig struct {
		Size *struct {
			Cols uint32 `json:"cols"`
			Rows uint32 `json:"rows"`
		} `json:"size,omitempty"`
	}
	processSelector struct {
		PID *uint32 `json:"pid,omitempty"`
		Tag *string `json:"tag,omitempty"`
	}
	processInput struct {
		Stdin []byte `json:"stdin,omitempty"`
		PTY   []byte `json:"pty,omitempty"`
	}
	processEvent struct {
		Start     *startEvent `json:"start,omitempty"`
		Data      *dataEvent  `json:"data,omitempty"`
		End       *endEvent   `json:"end,omitempty"`
		Keepalive *struct{}   `json:"keepalive,omitempty"`
	}
	startEvent struct {
		PID int `json:"pid"`
	}
	dataEvent struct {
		Stdout []byte `json:"stdout,omitempty"`
		Stderr []byte `json:"stderr,omitempty"`
	}
	endEvent struct {
		ExitCode int     `json:"exitCode"`
		Exited   bool    `json:"exited"`
		Status   string  `json:"status"`
		Error    *string `json:"error,omitempty"`
	}
	eventMessage struct {
		Event processEvent `json:"event"`
	}
)

// processStart runs a command in the background and streams its events
// (start, output, end). The stream's Connect-Timeout-Ms becomes the
// process's timeout (the agent kills its whole tree when it expires); a
// client that goes away leaves the process running.
func (s *Server) processStart(w http.ResponseWriter, r *http.Request, rec *store.Record) {
	var req struct {
		Process processConfig `json:"process"`
		PTY     *ptyConfig    `json:"pty,omitempty"`
		Tag     *string       `json:"tag,omitempty"`
		Stdin   *bool         `json:"stdin,omitempty"`
	}
	if err := readStreamRequest(w, r, &req); err != nil {
		newStream(w).End(err)
		return
	}
	if req.PTY != nil {
		newStream(w).End(rpcErrorf(codeUnimplemented, "PTY processes are not available on this endpoint"))
		return
	}
	if req.Process.Cmd == "" {
		newStream(w).End(rpcErrorf(codeInvalidArgument, "process.cmd is required"))
		return
	}
	ereq := &api.ExecRequest{Argv: append([]string{req.Process.Cmd}, req.Process.Args...), Env: req.Process.Envs,
		TimeoutSeconds: api.MaxExecTimeoutSeconds, KeepStdinOpen: req.Stdin != nil && *req.Stdin,
		MaxOutputBytes: api.MaxOutputBytes} // E2B streams all output: take the largest cap
	if req.Process.Cwd != nil {
		ereq.Cwd = *req.Process.Cwd
	}
	if d := streamTimeout(r); d > 0 {
		ereq.TimeoutSeconds = min(d.Seconds(), api.MaxExecTimeoutSeconds)
	}
	p, err := s.agent.StartProcess(r.Context(), rec.ID, ereq)
	if err != nil {
		newStream(w).End(err)
		return
	}
	if req.Tag != nil {
		s.tags.set(rec.ID, p.PID, *req.Tag)
	}
	s.relay(w, r, rec.ID, p)
}

// processConnect streams the events of a running process: a start event,
// then its output from the beginning, then its end.
func (s *Server) processConnect(w http.ResponseWriter, r *http.Request, rec *store.Record) {
	var req struct {
		Process processSelector `json:"process"`
	}
	if err := readStreamRequest(w, r, &req); err != nil {
		newStream(w).End(err)
		return
	}
	p, err := s.findProcess(r.Context(), rec.ID, req.Process)
	if err != nil {
		newStream(w).End(err)
		return
	}
	s.relay(w, r, rec.ID, p)
}

// relay writes process p's events as a Connect stream, with keepalives.
func (s *Server) relay(w http.ResponseWriter, r *http.Request, id string, p *api.Process) {
	st := newStream(w)
	// The output stream outlives a client's deadline only by the process's
	// own timeout; it ends with the request.
	evs, err := s.agent.ProcessOutput(r.Context(), id, p.ID)
	if err != nil {
		st.End(err)
		return
	}
	defer evs.Close()
	if err := st.Send(eventMessage{Event: processEvent{Start: &startEvent{PID: p.PID}}}); err != nil {
		return
	}
	stop := s.keepalive(r, st, eventMessage{Event: processEvent{Keepalive: &struct{}{}}})
	defer stop()
	for {
		ev, err := evs.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = rpcErrorf(codeUnavailable, "the process's output ended without an exit")
			}
			st.End(err)
			return
		}
		var msg processEvent
		switch ev.Type {
		case api.EventStart:
			continue
		case api.EventStdout:
			msg.Data = &dataEvent{Stdout: ev.Data}
		case api.EventStderr:
			msg.Data = &dataEvent{Stderr: ev.Data}
		case api.EventError:
			msg := "process failed"
			if ev.Error != nil {
				msg = ev.Error.Message
			}
			st.End(rpcErrorf(codeInternal, "%s", msg))
			return
		case api.EventExit:
			defer s.forget(id, p.ID)
			if ev.ExecResult != nil && ev.ExecResult.TimedOut {
				st.End(rpcErrorf(codeDeadlineExceeded, "the command ran past its timeout and was killed"))
				return
			}
			msg.End = endOf(ev.ExecResult)
		default:
			continue
		}
		if err := st.Send(eventMessage{Event: msg}); err != nil {
			return
		}
		if msg.End != nil {
			st.End(nil)
			return
		}
	}
}

// forget drops the agent's record of process pid of sandbox id, which
// ended: envd keeps no process that ended (Connect and List see only
// running ones), and a record would keep the agent from hibernating.
func (s *Server) forget(id, pid string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.agent.ForgetProcess(ctx, id, pid); err != nil {
		s.log.Debug("forget an ended process", "sandbox", id, "process", pid, "err", err)
	}
}

// endOf is envd's end event of a Paddock exec result.
func endOf(res *api.ExecResult) *endEvent {
	end := &endEvent{Exited: true, Status: "exited"}
	if res == nil {
		return end
	}
	if res.ExitCode != nil {
		end.ExitCode = *res.ExitCode
		end.Status = "exit status " + strconv.Itoa(*res.ExitCode)
	}
	if res.Signal != nil {
		end.Exited = false
		end.ExitCode = -1
		end.Status = "signal: " + *res.Signal
		msg := end.Status
		end.Error = &msg
	}
	if res.OOMKilled {
		msg := "killed: out of memory"
		end.Error = &msg
	}
	return end
}

// keepalive sends msg on st at the interval the client asked for until the
// returned function is called.
func (s *Server) keepalive(r *http.Request, st *stream, msg any) func() {
	t := time.NewTicker(keepaliveInterval(r))
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-t.C:
				if st.Send(msg) != nil {
					return
				}
			case <-done:
				return
			case <-r.Context().Done():
				return
			}
		}
	}()
	return func() { t.Stop(); close(done) }
}

// findProcess resolves a selector (pid or tag) to an agent process.
func (s *Server) findProcess(ctx context.Context, id string, sel processSelector) (*api.Process, error) {
	var pid int
	switch {
	case sel.PID != nil:
		pid = int(*sel.PID)
	case sel.Tag != nil:
		var ok bool
		if pid, ok = s.tags.pid(id, *sel.Tag); !ok {
			return nil, rpcErrorf(codeNotFound, "no process with tag %q", *sel.Tag)
		}
	default:
		return nil, rpcErrorf(codeInvalidArgument, "process selector needs a pid or a tag")
	}
	list, err := s.agent.ListProcesses(ctx, id)
	if err != nil {
		return nil, err
	}
	for i := range list.Processes {
		if p := &list.Processes[i]; p.PID == pid && p.State == api.ProcessRunning {
			return p, nil
		}
	}
	return nil, rpcErrorf(codeNotFound, "process with pid %d not found", pid)
}

func (s *Server) processList(w http.ResponseWriter, r *http.Request, rec *store.Record) {
	var req struct{}
	if err := readUnary(w, r, &req); err != nil {
		writeUnaryError(w, err)
		return
	}
	list, err := s.agent.ListProcesses(r.Context(), rec.ID)
	if err != nil {
		writeUnaryError(w, err)
		return
	}
	type info struct {
		Config processConfig `json:"config"`
		PID    int           `json:"pid"`
		Tag    *string       `json:"tag,omitempty"`
	}
	out := []info{}
	for _, p := range list.Processes {
		if p.State != api.ProcessRunning {
			continue
		}
		cfg := processConfig{Cmd: "/bin/sh", Args: []string{"-c", p.Command}, Envs: map[string]string{}}
		if len(p.Argv) > 0 {
			cfg.Cmd, cfg.Args = p.Argv[0], p.Argv[1:]
		}
		if p.Cwd != "" {
			cwd := p.Cwd
			cfg.Cwd = &cwd
		}
		i := info{Config: cfg, PID: p.PID}
		if tag, ok := s.tags.tag(rec.ID, p.PID); ok {
			i.Tag = &tag
		}
		out = append(out, i)
	}
	writeUnary(w, map[string]any{"processes": out})
}
