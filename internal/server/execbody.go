package server

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// StdinLastHeader, set to "true" on an exec request, promises that stdin
// (or stdin_base64) is the last member of the body's JSON object: the
// command then starts as soon as the daemon reaches it and reads its
// stdin as it arrives.
const StdinLastHeader = "Paddock-Stdin-Last"

// smallExecBody is the body size below which an exec is decoded whole and
// sent to the agent as it is: streaming its stdin saves nothing there.
const smallExecBody = 64 << 10

// execStdin is the stdin of an exec request as the agent client reads
// it: size bytes (-1 while unknown) and, once read, the error that cut it
// short, if any. The transport may read it on after the agent answered:
// detach ends that before the handler takes it back (drain).
type execStdin struct {
	size int64

	mu       sync.Mutex // held during each read
	r        io.Reader
	err      error
	detached bool
}

func newExecStdin(r io.Reader, size int64) *execStdin { return &execStdin{r: r, size: size} }

func (s *execStdin) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.detached {
		return 0, errors.New("stdin detached")
	}
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && s.err == nil {
		s.err = err
	}
	return n, err
}

// failed is the error that cut the stdin short, if any.
func (s *execStdin) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// drain ends the agent client's reads, then reads and drops what is left
// of the stdin (within the body's bounds), so that a client that sends
// its whole body before it reads the answer gets the answer.
func (s *execStdin) drain() {
	s.mu.Lock()
	s.detached = true
	r, failed := s.r, s.err != nil
	s.mu.Unlock()
	if !failed {
		_, _ = io.Copy(io.Discard, r)
	}
}

// streamedStdin reads an exec body that promised stdin last (see
// StdinLastHeader): the members before stdin (at most
// api.MaxJSONBodyBytes of them) decoded into the request, and the stdin
// as a reader that decodes it as it arrives and checks, after it, that
// the object ends there. stdin is nil when the body has none.
func streamedStdin(w http.ResponseWriter, r *http.Request) (*api.ExecRequest, *execStdin, error) {
	lim := &headLimit{r: http.MaxBytesReader(w, r.Body, api.MaxExecBodyBytes), n: api.MaxJSONBodyBytes}
	dec := json.NewDecoder(lim)
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, fmt.Errorf("%w: bad JSON: the body is not an object", sandbox.ErrInvalid)
	}
	var members bytes.Buffer
	members.WriteByte('{')
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, jsonErr(err)
		}
		key, _ := t.(string)
		if strings.EqualFold(key, "stdin") || strings.EqualFold(key, "stdin_base64") {
			req, err := decodeMembers(&members)
			if err != nil {
				return nil, nil, err
			}
			lim.n = -1 // the stdin is bounded by MaxBytesReader and its decoded size
			br := bufio.NewReaderSize(io.MultiReader(dec.Buffered(), lim), jsonStringChunk)
			return req, newExecStdin(stdinValue(br, strings.EqualFold(key, "stdin_base64")), -1), nil
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, jsonErr(err)
		}
		if members.Len() > 1 {
			members.WriteByte(',')
		}
		kb, _ := json.Marshal(key)
		members.Write(kb)
		members.WriteByte(':')
		members.Write(v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, jsonErr(err)
	}
	if dec.More() {
		return nil, nil, fmt.Errorf("%w: trailing data after JSON body", sandbox.ErrInvalid)
	}
	req, err := decodeMembers(&members)
	return req, nil, err
}

func jsonErr(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) || errors.Is(err, sandbox.ErrTooLarge) {
		return err
	}
	return fmt.Errorf("%w: bad JSON: %v", sandbox.ErrInvalid, err)
}

func decodeMembers(members *bytes.Buffer) (*api.ExecRequest, error) {
	members.WriteByte('}')
	var req api.ExecRequest
	if err := decodeFrom(members, &req); err != nil {
		return nil, err
	}
	return &req, nil
}

// headLimit refuses to read more than n bytes (n < 0: no bound).
type headLimit struct {
	r io.Reader
	n int
}

func (h *headLimit) Read(p []byte) (int, error) {
	if h.n < 0 {
		return h.r.Read(p)
	}
	if h.n == 0 {
		return 0, fmt.Errorf("%w: the members before stdin are larger than %d bytes", sandbox.ErrTooLarge, api.MaxJSONBodyBytes)
	}
	n, err := h.r.Read(p[:min(len(p), h.n)])
	h.n -= n
	return n, err
}

// stdinValue reads ': "..." }' from br: the decoded string (base64
// decoded too with b64), at most api.MaxStdinBytes of it, then checks
// that the object and the body end there.
func stdinValue(br *bufio.Reader, b64 bool) io.Reader {
	return &lazyReader{open: func() (io.Reader, error) {
		if err := skipSpace(br, ':'); err != nil {
			return nil, err
		}
		c, err := peekSpace(br)
		if err != nil {
			return nil, err
		}
		if c == 'n' { // null: no stdin
			if b, err := br.Peek(4); err != nil || string(b) != "null" {
				return nil, badString("not a string")
			}
			_, _ = br.Discard(4)
			return &stdinEnd{br: br, r: bytes.NewReader(nil)}, nil
		}
		if c != '"' {
			return nil, badString("not a string")
		}
		_, _ = br.Discard(1)
		var r io.Reader = newJSONString(br)
		if b64 {
			r = &b64Reader{src: r}
		}
		return &stdinEnd{br: br, r: &io.LimitedReader{R: r, N: api.MaxStdinBytes + 1}}, nil
	}}
}

// stdinEnd reads r, refuses more than api.MaxStdinBytes of it, and at its
// end checks that only the object's closing brace follows.
type stdinEnd struct {
	br    *bufio.Reader
	r     io.Reader
	ended bool // the end was checked: io.EOF from now on
}

func (e *stdinEnd) Read(p []byte) (int, error) {
	if e.ended {
		return 0, io.EOF
	}
	n, err := e.r.Read(p)
	if lr, ok := e.r.(*io.LimitedReader); ok && lr.N <= 0 {
		return 0, fmt.Errorf("%w: stdin larger than %d bytes", sandbox.ErrTooLarge, api.MaxStdinBytes)
	}
	if errors.Is(err, io.EOF) {
		c, perr := peekSpace(e.br)
		if errors.Is(perr, io.EOF) {
			perr = fmt.Errorf("%w: bad JSON: the body ended before the object", sandbox.ErrInvalid)
		}
		if perr != nil || c != '}' {
			return n, cmp.Or(perr, fmt.Errorf("%w: with %s, stdin must be the last member of the object (found %q after it)", sandbox.ErrInvalid, StdinLastHeader, c))
		}
		_, _ = e.br.ReadByte()
		if c, perr := peekSpace(e.br); perr != io.EOF {
			return n, cmp.Or(perr, fmt.Errorf("%w: trailing data after JSON body (%q)", sandbox.ErrInvalid, c))
		}
		e.ended = true
	}
	return n, err
}

// b64Reader decodes standard base64 (newlines ignored, as
// base64.StdEncoding.DecodeString does) a chunk at a time.
type b64Reader struct {
	src     io.Reader
	in      []byte // undecoded input, less than 4 bytes between fills
	out     []byte // decoded, not yet returned
	outBuf  []byte
	srcDone bool
	done    bool // after the padding
}

func (b *b64Reader) Read(p []byte) (int, error) {
	for len(b.out) == 0 {
		if b.srcDone && len(b.in) == 0 {
			return 0, io.EOF
		}
		if err := b.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	return n, nil
}

func (b *b64Reader) fill() error {
	if b.in == nil {
		b.in = make([]byte, 0, jsonStringChunk+4)
		b.outBuf = make([]byte, base64.StdEncoding.DecodedLen(jsonStringChunk+4))
	}
	if !b.srcDone {
		buf := b.in[len(b.in):cap(b.in)]
		n, err := b.src.Read(buf)
		// Drop newlines in place.
		k := n
		if bytes.IndexByte(buf[:n], '\n') >= 0 || bytes.IndexByte(buf[:n], '\r') >= 0 {
			k = 0
			for _, c := range buf[:n] {
				if c != '\n' && c != '\r' {
					buf[k] = c
					k++
				}
			}
		}
		b.in = b.in[:len(b.in)+k]
		switch {
		case errors.Is(err, io.EOF):
			b.srcDone = true
		case err != nil:
			return err
		}
	}
	whole := len(b.in) / 4 * 4
	if b.srcDone {
		whole = len(b.in) // a partial quantum at the end is an error
	}
	if whole == 0 {
		return nil
	}
	if b.done {
		return fmt.Errorf("%w: stdin_base64: data after the padding", sandbox.ErrInvalid)
	}
	n, err := base64.StdEncoding.Decode(b.outBuf, b.in[:whole])
	if err != nil {
		return fmt.Errorf("%w: stdin_base64: %v", sandbox.ErrInvalid, err)
	}
	b.done = b.in[whole-1] == '='
	b.out = b.outBuf[:n]
	b.in = b.in[:copy(b.in, b.in[whole:])]
	return nil
}

// lazyReader opens its reader on the first Read.
type lazyReader struct {
	open func() (io.Reader, error)
	r    io.Reader
	err  error
}

func (l *lazyReader) Read(p []byte) (int, error) {
	if l.r == nil && l.err == nil {
		l.r, l.err = l.open()
	}
	if l.err != nil {
		return 0, l.err
	}
	return l.r.Read(p)
}

// peekSpace skips JSON whitespace and returns the next byte, unread.
func peekSpace(br *bufio.Reader) (byte, error) {
	for {
		c, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			_ = br.UnreadByte()
			return c, nil
		}
	}
}

// skipSpace skips JSON whitespace and then want.
func skipSpace(br *bufio.Reader, want byte) error {
	c, err := peekSpace(br)
	if err == nil && c != want {
		err = fmt.Errorf("%w: bad JSON: want %q, found %q", sandbox.ErrInvalid, want, c)
	}
	if errors.Is(err, io.EOF) {
		err = fmt.Errorf("%w: bad JSON: the body ended early", sandbox.ErrInvalid)
	}
	if err == nil {
		_, _ = br.ReadByte()
	}
	return err
}
