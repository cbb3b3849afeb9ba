package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"

	"github.com/paddock-sandbox/paddock/api"
)

// ExecStdinPath is the agent route of an exec whose stdin streams: the
// body is the api.ExecRequest as one line of JSON (without stdin and
// stdin_base64), then the command's raw standard input up to the end of
// the body. The command starts once the line has arrived and reads its
// stdin as it comes; the end of the body closes it. A body that breaks off
// (the daemon aborts it when its own client's stdin turns out invalid,
// too large or cut) kills the command. Agents older than this route
// answer 404 without reading the body (the daemon sends it with Expect:
// 100-continue and falls back to POST /exec).
const ExecStdinPath = "/exec/stdin"

// contentTypeExecStdin is the Content-Type of an ExecStdinPath body.
const contentTypeExecStdin = "application/x-paddock-exec-stdin"

// stdinBufBytes is the buffer of one streaming stdin: what the agent holds
// of it at a time, whatever its size.
const stdinBufBytes = 64 << 10

// handleExecStdin runs a command whose stdin streams: POST /exec/stdin.
func (s *Server) handleExecStdin(w http.ResponseWriter, r *http.Request) error {
	br := bufio.NewReaderSize(r.Body, stdinBufBytes)
	p, err := s.startExecStdin(br)
	if err != nil {
		// The refusal goes out once the stdin has arrived (and been
		// dropped), not while the daemon still sends it.
		_, _ = io.CopyN(io.Discard, br, s.cfg.MaxStdinBytes+1)
		return err
	}
	pump := p.pumpStdin(br, s.cfg.MaxStdinBytes)
	// end waits for the whole stdin (a command that ended or closed its
	// stdin early has the rest read and dropped, so that the daemon's
	// request completes) and returns the pump's error. The daemon bounds
	// the wait: it cuts a request whose own client stalls.
	end := func() error {
		<-pump.done
		return pump.err
	}
	defer end()
	if wantsNDJSON(r) {
		// Events go out while the body still arrives.
		_ = http.NewResponseController(w).EnableFullDuplex()
	}
	return s.serveExec(w, r, p, end)
}

// startExecStdin reads the request line of an ExecStdinPath body and
// starts its command.
func (s *Server) startExecStdin(br *bufio.Reader) (*proc, error) {
	line, err := readLine(br, maxJSONBytes)
	if err != nil {
		return nil, err
	}
	var req api.ExecRequest
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, badRequest("invalid JSON request line: %v", err)
	}
	if req.Stdin != "" || req.StdinBase64 != "" {
		return nil, badRequest("stdin travels in the body after the request line")
	}
	spec, err := s.execSpec(&req, false)
	if err != nil {
		return nil, err
	}
	spec.streamStdin = true
	return s.startProc(spec)
}

// readLine reads one line of at most limit bytes (without its newline).
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > limit+1 {
			return nil, tooLarge("request line larger than %d bytes", limit)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return nil, badRequest("the body ended inside the request line")
		}
		return nil, fmt.Errorf("read request line: %w", err)
	}
}

// stdinPump copies a streaming stdin into a command's stdin pipe.
type stdinPump struct {
	done chan struct{}
	err  error // set before done closes
}

// pumpStdin copies src (at most limit bytes) to p's stdin as it arrives,
// then closes it. Once the command closes its stdin or ends, the rest of
// src is read and dropped. A src that fails (not io.EOF) or passes limit
// kills the command; the error is the pump's.
func (p *proc) pumpStdin(src io.Reader, limit int64) *stdinPump {
	sp := &stdinPump{done: make(chan struct{})}
	go func() {
		defer close(sp.done)
		defer p.stdinMu.Unlock() // taken by launch
		err := p.copyStdin(src, limit)
		if err != nil {
			// The stdin stays open (never an EOF the command could take
			// for the end of its input) until the kill ends the command.
			_ = p.signal(sigKill, false)
			sp.err = err
			return
		}
		p.closeStdin()
	}()
	return sp
}

func (p *proc) copyStdin(src io.Reader, limit int64) error {
	p.mu.Lock()
	f := p.stdin
	p.mu.Unlock()
	buf := make([]byte, stdinBufBytes)
	var total int64
	for {
		n, err := src.Read(buf)
		if total += int64(n); total > limit {
			return tooLarge("stdin larger than %d bytes; the command was killed", limit)
		}
		if n > 0 && f != nil {
			if _, werr := f.Write(buf[:n]); werr != nil {
				f = nil // the command closed its stdin or ended
				p.closeStdin()
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			return nil
		default:
			return badRequest("stdin broke off (%v); the command was killed", err)
		}
	}
}

// serveExec answers for the exec p: its NDJSON events or, once it ended,
// its result. end, when not nil, is called once the command ended and
// before the answer is final; its error (a streaming stdin that failed)
// replaces the result.
func (s *Server) serveExec(w http.ResponseWriter, r *http.Request, p *proc, end func() error) error {
	defer func() {
		s.procs.remove(p.id)
		// Hand large output back at once: otherwise the next command's
		// output would pile on top of it until the GC's next cycle.
		// In a goroutine: by the time it runs, this handler, which holds
		// the output, has returned.
		if p.out.keptBytes() >= releaseOutputBytes {
			go debug.FreeOSMemory()
		}
	}()
	if end == nil {
		end = func() error { return nil }
	}
	// A client that goes away takes its command with it.
	stop := context.AfterFunc(r.Context(), func() { _ = p.signal(sigKill, false) })
	defer stop()
	if wantsNDJSON(r) {
		return streamEvents(r.Context(), w, p.out, end)
	}
	select {
	case <-p.done:
	case <-r.Context().Done():
		<-p.done
		return r.Context().Err()
	}
	if err := end(); err != nil {
		return err
	}
	res, chunks := p.out.frozen()
	return writeExecResult(w, res, chunks)
}
