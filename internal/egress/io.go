package egress

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Bounds on what the proxy reads before it has decided where a connection
// goes.
const (
	maxClientHello = 16 << 10 // TLS records read to find the SNI
	maxHTTPHead    = 32 << 10 // one HTTP request or response head
	rateChunk      = 16 << 10 // bytes written per token-bucket reservation
)

var errSniffed = errors.New("egress: client hello read")

// readClientHello reads a TLS ClientHello from r (at most maxClientHello
// bytes) and returns its SNI and every byte read, which the caller replays
// upstream. crypto/tls does the parsing, so fragmented hellos and every
// extension layout are handled as the real server would; it stops at the
// GetConfigForClient callback, before sending anything. ok is false when
// the bytes are not a TLS ClientHello.
func readClientHello(r io.Reader) (sni string, ok bool, peeked []byte) {
	sc := &sniffConn{r: &io.LimitedReader{R: r, N: maxClientHello}}
	srv := tls.Server(sc, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			sni, ok = h.ServerName, true
			return nil, errSniffed
		},
	})
	_ = srv.Handshake()
	return sni, ok, sc.buf.Bytes()
}

// sniffConn is the net.Conn crypto/tls reads the ClientHello from: it
// records what it reads and discards what tls writes (an alert).
type sniffConn struct {
	r   io.Reader
	buf bytes.Buffer
}

func (c *sniffConn) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.buf.Write(p[:n])
	return n, err
}
func (c *sniffConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *sniffConn) Close() error                     { return nil }
func (c *sniffConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *sniffConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *sniffConn) SetDeadline(time.Time) error      { return nil }
func (c *sniffConn) SetReadDeadline(time.Time) error  { return nil }
func (c *sniffConn) SetWriteDeadline(time.Time) error { return nil }

// prefixConn is a net.Conn that first returns bytes already read from it.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// headReader sits under the bufio.Reader an HTTP connection is parsed
// from. While a head is read it allows only a bounded number of bytes (the
// limit net/http's server applies the same way), and until stopRecording it
// keeps a copy of everything read so a connection that turns out to need
// no parsing can be replayed upstream byte for byte.
type headReader struct {
	r         io.Reader
	remain    int64 // < 0: unlimited
	recording bool
	rec       []byte
}

var errHeadTooLarge = errors.New("egress: request head too large")

func (h *headReader) Read(p []byte) (int, error) {
	if h.remain == 0 {
		return 0, errHeadTooLarge
	}
	if h.remain > 0 && int64(len(p)) > h.remain {
		p = p[:h.remain]
	}
	n, err := h.r.Read(p)
	if h.remain > 0 {
		h.remain -= int64(n)
	}
	if h.recording {
		h.rec = append(h.rec, p[:n]...)
	}
	return n, err
}

// limitHead bounds the next head read; the bytes already buffered in br
// count against the bound too.
func (h *headReader) limitHead(br *bufio.Reader) {
	h.remain = int64(maxHTTPHead - br.Buffered())
	if h.remain <= 0 {
		h.remain = 1
	}
}

func (h *headReader) unlimit() { h.remain = -1 }

func (h *headReader) stopRecording() { h.recording, h.rec = false, nil }

// bucket is a token bucket shared by all of one sandbox's connections in
// one direction. Reservations may drive it negative; the reserver then
// waits until the debt is paid, so a burst never exceeds burst bytes plus
// one chunk.
type bucket struct {
	mu     sync.Mutex
	rate   float64 // bytes per second
	burst  float64
	tokens float64
	last   time.Time
}

func newBucket(rate int64) *bucket {
	if rate <= 0 {
		return nil
	}
	return &bucket{rate: float64(rate), burst: max(float64(rate)/8, 1), last: time.Now()}
}

// reserve takes n tokens and returns how long the caller must wait before
// sending them.
func (b *bucket) reserve(n int) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	b.tokens -= float64(n)
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}

// rateWriter writes to w no faster than its bucket allows. A nil bucket
// means no limit. done aborts a wait when the connection is closed.
type rateWriter struct {
	w    io.Writer
	b    *bucket
	done <-chan struct{}
}

func (r *rateWriter) Write(p []byte) (int, error) {
	if r.b == nil {
		return r.w.Write(p)
	}
	written := 0
	for len(p) > 0 {
		n := min(len(p), rateChunk)
		if d := r.b.reserve(n); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-r.done:
				t.Stop()
				return written, net.ErrClosed
			}
		}
		m, err := r.w.Write(p[:n])
		written += m
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// limitedWriter returns w itself when there is no limit, so io.Copy keeps
// its zero-copy fast paths between TCP sockets.
func limitedWriter(w io.Writer, b *bucket, done <-chan struct{}) io.Writer {
	if b == nil {
		return w
	}
	return &rateWriter{w: w, b: b, done: done}
}

// flushWriter is a buffered writer that net/http's Request.Write and
// Response.Write use as is (it is an io.ByteWriter) and that hides
// bufio.Writer's ReadFrom, so flushBody can flush it safely.
type flushWriter struct{ bw *bufio.Writer }

func newFlushWriter(w io.Writer) *flushWriter {
	return &flushWriter{bw: bufio.NewWriterSize(w, 32<<10)}
}

func (f *flushWriter) Write(p []byte) (int, error)       { return f.bw.Write(p) }
func (f *flushWriter) WriteByte(c byte) error            { return f.bw.WriteByte(c) }
func (f *flushWriter) WriteString(s string) (int, error) { return f.bw.WriteString(s) }
func (f *flushWriter) Flush() error                      { return f.bw.Flush() }

// flushBody flushes w before every read of the body it wraps: whatever was
// produced so far goes out before the proxy waits for more, so streamed
// bodies (server-sent events, long polls, uploads) are not held back.
type flushBody struct {
	io.ReadCloser
	w *flushWriter
}

func (f flushBody) Read(p []byte) (int, error) {
	if err := f.w.Flush(); err != nil {
		return 0, err
	}
	return f.ReadCloser.Read(p)
}

// closeWriter is implemented by *net.TCPConn and *tls.Conn.
type closeWriter interface{ CloseWrite() error }
