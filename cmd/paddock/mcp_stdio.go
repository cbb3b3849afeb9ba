package main

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
)

// maxTrackedLine bounds the partial line mcpStdio keeps to find request
// ids (the MCP transport's own frame bound); a longer line is not tracked.
const maxTrackedLine = 16 << 20

// mcpStdio makes stdin's end wait for the answers: the MCP transport
// cancels every request in flight when its input ends, so `echo requests
// | paddock mcp` would lose the answers. The reader returns EOF only once
// every request it has passed on (a line with a "method" and an "id") has
// had its response written (a line with that "id" and no "method").
type mcpStdio struct {
	in  io.Reader
	out io.Writer

	mu      sync.Mutex
	cond    *sync.Cond
	pending map[string]int
	closed  bool
	inLine  lineSplitter
	outLine lineSplitter
	eof     bool
}

func newMCPStdio(in io.Reader, out io.Writer) *mcpStdio {
	s := &mcpStdio{in: in, out: out, pending: map[string]int{}}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// reader and writer are the two ends to give the MCP transport.
func (s *mcpStdio) reader() io.ReadCloser  { return stdioReader{s} }
func (s *mcpStdio) writer() io.WriteCloser { return stdioWriter{s} }

type stdioReader struct{ s *mcpStdio }
type stdioWriter struct{ s *mcpStdio }

func (r stdioReader) Read(p []byte) (int, error) {
	s := r.s
	s.mu.Lock()
	eof := s.eof
	s.mu.Unlock()
	if !eof {
		n, err := s.in.Read(p)
		s.mu.Lock()
		s.inLine.feed(p[:n], func(line []byte) {
			if id, isReq := messageID(line); id != "" && isReq {
				s.pending[id]++
			}
		})
		if err == io.EOF {
			s.eof = true
			err = nil
		}
		s.mu.Unlock()
		if n > 0 || err != nil {
			return n, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.pending) > 0 && !s.closed {
		s.cond.Wait()
	}
	return 0, io.EOF
}

// Close wakes a Read waiting for answers (the transport is closing).
func (r stdioReader) Close() error {
	r.s.mu.Lock()
	r.s.closed = true
	r.s.cond.Broadcast()
	r.s.mu.Unlock()
	return nil
}

func (w stdioWriter) Write(p []byte) (int, error) {
	s := w.s
	n, err := s.out.Write(p)
	s.mu.Lock()
	s.outLine.feed(p[:n], func(line []byte) {
		if id, isReq := messageID(line); id != "" && !isReq {
			if s.pending[id]--; s.pending[id] <= 0 {
				delete(s.pending, id)
			}
		}
	})
	s.cond.Broadcast()
	s.mu.Unlock()
	return n, err
}

// Close leaves stdout open (the process owns it).
func (w stdioWriter) Close() error { return nil }

// lineSplitter cuts a byte stream into newline-terminated lines.
type lineSplitter struct {
	buf  []byte
	skip bool // the current line outgrew maxTrackedLine
}

func (l *lineSplitter) feed(p []byte, line func([]byte)) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !l.skip {
			if len(l.buf)+len(chunk) > maxTrackedLine {
				l.skip, l.buf = true, nil
			} else {
				l.buf = append(l.buf, chunk...)
			}
		}
		if i < 0 {
			return
		}
		if !l.skip {
			line(l.buf)
		}
		l.buf, l.skip = l.buf[:0], false
		p = p[i+1:]
	}
}

// messageID returns the id of a JSON-RPC message line (its raw JSON, ""
// for none) and whether it is a request (it has a method).
func messageID(line []byte) (string, bool) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	if json.Unmarshal(line, &m) != nil || len(m.ID) == 0 || string(m.ID) == "null" {
		return "", false
	}
	return string(bytes.TrimSpace(m.ID)), m.Method != nil
}
