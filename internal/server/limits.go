package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// Defaults of HTTPLimits.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultBodyIdleTimeout   = 30 * time.Second
	DefaultWriteIdleTimeout  = 60 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
)

// HTTPLimits bound what one connection can hold of the daemon. Deadlines
// are per read and per write, never per request: an exec stream or a
// watch lasts as long as it makes progress.
type HTTPLimits struct {
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration
	// BodyIdleTimeout cuts a request body that sends nothing for this
	// long (the connection is closed).
	BodyIdleTimeout time.Duration
	// WriteIdleTimeout cuts a response the client does not read for this
	// long.
	WriteIdleTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long.
	IdleTimeout time.Duration
	// Conns bounds the connections of every listener (see LimitListener).
	Conns ConnLimits
}

func (l HTTPLimits) withDefaults() HTTPLimits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&l.BodyIdleTimeout, DefaultBodyIdleTimeout)
	def(&l.WriteIdleTimeout, DefaultWriteIdleTimeout)
	def(&l.IdleTimeout, DefaultIdleTimeout)
	l.Conns = l.Conns.withDefaults()
	return l
}

// guard arms the per-read and per-write deadlines of one request and
// returns the writer and request the handler gets, and a function to
// call when the handler has returned.
func (s *Server) guard(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request, func()) {
	lim := s.cfg.Limits
	rc := http.NewResponseController(w)
	if rc.SetWriteDeadline(time.Time{}) != nil {
		return w, r, func() {} // not a net/http connection (tests)
	}
	dw := &deadlineWriter{ResponseWriter: w, rc: rc, idle: lim.WriteIdleTimeout}
	var body *idleBody
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		body = &idleBody{ReadCloser: r.Body, rc: rc, dw: dw, idle: lim.BodyIdleTimeout}
		// A shallow copy: net/http looks at its own request's Body type
		// after the handler to decide how to finish the connection.
		r2 := *r
		r2.Body = body
		r = &r2
		// Armed now for a body nobody reads (net/http discards up to
		// 256 KiB of it after the handler); every read re-arms it.
		rc.SetReadDeadline(time.Now().Add(lim.BodyIdleTimeout))
	}
	done := func() {
		// What net/http still writes after the handler (the buffered
		// answer) is bounded too.
		if !dw.hijacked {
			rc.SetWriteDeadline(time.Now().Add(lim.WriteIdleTimeout))
		}
	}
	return dw, r, done
}

// idleBody is a request body whose every read must make progress within
// idle; once it has ended the connection has no read deadline (net/http
// watches it for the client going away during long answers).
type idleBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	dw   *deadlineWriter
	idle time.Duration
	eof  bool
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.eof || b.dw.hijacked {
		return b.ReadCloser.Read(p)
	}
	b.rc.SetReadDeadline(time.Now().Add(b.idle))
	n, err := b.ReadCloser.Read(p)
	var ne net.Error
	switch {
	case err == io.EOF:
		b.eof = true
		b.rc.SetReadDeadline(time.Time{})
	case errors.As(err, &ne) && ne.Timeout():
		err = fmt.Errorf("%w: the request body sent nothing for %s (--body-idle-timeout)", sandbox.ErrInvalid, b.idle)
	}
	return n, err
}

// deadlineWriter arms a write deadline around each write and flush, and
// disarms it after: a stream may be silent for hours, but a client that
// stops reading is cut after idle.
type deadlineWriter struct {
	http.ResponseWriter
	rc       *http.ResponseController
	idle     time.Duration
	hijacked bool
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	if w.hijacked {
		return 0, http.ErrHijacked
	}
	w.rc.SetWriteDeadline(time.Now().Add(w.idle))
	defer w.rc.SetWriteDeadline(time.Time{})
	return w.ResponseWriter.Write(p)
}

// Flush implements http.Flusher (the MCP handler asserts it).
func (w *deadlineWriter) Flush() { w.FlushError() }

// FlushError is what http.ResponseController calls.
func (w *deadlineWriter) FlushError() error {
	w.rc.SetWriteDeadline(time.Now().Add(w.idle))
	defer w.rc.SetWriteDeadline(time.Time{})
	return w.rc.Flush()
}

// Unwrap gives http.ResponseController the connection's writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack implements http.Hijacker; a hijacked connection (a WebSocket)
// has no deadlines (net/http clears them) and gets none from here.
func (w *deadlineWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, b, err := w.rc.Hijack()
	if err == nil {
		w.hijacked = true
	}
	return c, b, err
}
