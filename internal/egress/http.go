package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// httpSession proxies HTTP/1.1 requests from one sandbox connection to one
// upstream connection, one exchange at a time: plain HTTP to port 80, and
// the inside of TLS the proxy terminated for a secret's host.
type httpSession struct {
	p  *Proxy
	lc *liveConn

	c  net.Conn // toward the sandbox
	hr *headReader
	cr *bufio.Reader
	cw *flushWriter

	up   net.Conn
	ur   *bufio.Reader
	uw   *flushWriter
	tls  bool   // the sandbox's side is TLS the proxy terminated
	nam  string // the host every request must name
	reqs int    // requests forwarded so far
}

func newHTTPSession(p *Proxy, lc *liveConn, c net.Conn, hr *headReader) *httpSession {
	return &httpSession{
		p:  p,
		lc: lc,
		c:  c,
		hr: hr,
		cr: bufio.NewReaderSize(hr, 4<<10),
		cw: newFlushWriter(limitedWriter(c, lc.st.down, lc.done)),
	}
}

func (s *httpSession) setUpstream(up net.Conn, overTLS bool, name string) {
	s.up = up
	s.ur = bufio.NewReaderSize(up, 4<<10)
	s.uw = newFlushWriter(limitedWriter(up, s.lc.st.up, s.lc.done))
	s.tls = overTLS
	s.nam = name
}

func readRequest(br *bufio.Reader) (*http.Request, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, err
	}
	return req, nil
}

// hostOnly strips a port from a Host header value.
func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}

// serve runs the request loop; first, if not nil, is a request already
// read.
func (s *httpSession) serve(first *http.Request) {
	req := first
	for {
		if req == nil {
			s.hr.limitHead(s.cr)
			s.c.SetReadDeadline(time.Now().Add(s.p.cfg.IdleTimeout))
			var err error
			req, err = readRequest(s.cr)
			s.c.SetReadDeadline(time.Time{})
			s.hr.unlimit()
			if err != nil {
				switch {
				case errors.Is(err, errHeadTooLarge):
					s.writeError(431, "request head too large")
				case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), isTimeout(err):
				default:
					s.writeError(400, "malformed request")
				}
				return
			}
		}
		if !s.exchange(req) {
			return
		}
		req = nil
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// exchange forwards one request and its response; false ends the
// connection.
func (s *httpSession) exchange(req *http.Request) bool {
	if normalizeHost(hostOnly(req.Host)) != s.nam {
		// A different Host on a connection already bound to a name would
		// reach whatever else the upstream serves (and, on a secret's
		// connection, carry the secret there).
		s.writeError(421, "request host does not match the connection's host")
		return false
	}
	secrets := s.p.boundSecrets(s.lc.id, s.nam, s.tls)
	if len(secrets) > 0 {
		substituteHeaders(req.Header, secrets)
		substituteHeaders(req.Trailer, secrets)
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""} // keep Request.Write from adding Go's
	}
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		// Answer it here: Request.Write sends the body right after the
		// head and would wait for a client that waits for us.
		req.Header.Del("Expect")
		if req.ContentLength != 0 {
			s.cw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
			if s.cw.Flush() != nil {
				return false
			}
		}
	}
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = flushBody{ReadCloser: req.Body, w: s.uw}
	}
	err := req.Write(s.uw)
	if err == nil {
		err = s.uw.Flush()
	}
	reused := s.reqs > 0
	s.reqs++
	if err != nil {
		s.p.log.Info("egress: writing request upstream", "sandbox", s.lc.id, "host", s.nam, "err", err)
		if !reused {
			s.writeError(502, "upstream connection failed")
		}
		return false
	}

	var resp *http.Response
	for {
		resp, err = http.ReadResponse(s.ur, req)
		if err != nil {
			if reused && s.ur.Buffered() == 0 && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)) {
				// The upstream dropped an idle keep-alive connection. Drop
				// the sandbox's too, as the upstream would have: clients
				// retry a request that fails on a reused connection, but
				// not one answered 502.
				return false
			}
			s.writeError(502, "bad or no response from upstream")
			return false
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		// 100 Continue, 103 Early Hints: pass them on, then the real one.
		if len(secrets) > 0 {
			redactHeaders(resp.Header, secrets)
		}
		if s.writeInterim(resp) != nil {
			return false
		}
	}
	if len(secrets) > 0 {
		redactHeaders(resp.Header, secrets)
		redactHeaders(resp.Trailer, secrets)
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// WebSocket and friends: after the 101 the connection is opaque.
		if s.writeInterim(resp) != nil {
			return false
		}
		s.p.splice(s.lc, s.cr, s.c, nil, s.ur, s.up)
		return false
	}
	if len(secrets) > 0 && resp.Body != http.NoBody && isIdentity(resp.Header.Get("Content-Encoding")) {
		resp.Body = newRedactReader(resp.Body, secrets)
	}
	if resp.Body != nil && resp.Body != http.NoBody {
		resp.Body = flushBody{ReadCloser: resp.Body, w: s.cw}
	}
	err = resp.Write(s.cw)
	if err == nil {
		err = s.cw.Flush()
	}
	resp.Body.Close()
	if err != nil {
		return false
	}
	return !resp.Close && !req.Close
}

func isIdentity(enc string) bool {
	enc = strings.TrimSpace(enc)
	return enc == "" || strings.EqualFold(enc, "identity")
}

// writeInterim writes a 1xx response head.
func (s *httpSession) writeInterim(resp *http.Response) error {
	fmt.Fprintf(s.cw, "HTTP/1.1 %03d %s\r\n", resp.StatusCode, http.StatusText(resp.StatusCode))
	if err := resp.Header.Write(s.cw); err != nil {
		return err
	}
	s.cw.WriteString("\r\n")
	return s.cw.Flush()
}

// writeError sends a short proxy-generated response and ends the
// connection. msg never holds a secret.
func (s *httpSession) writeError(code int, msg string) {
	body := "paddock egress: " + msg + "\n"
	fmt.Fprintf(s.cw, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\nX-Paddock-Egress: refused\r\n\r\n%s",
		code, http.StatusText(code), len(body), body)
	s.cw.Flush()
}

func (s *httpSession) writeRefusal(name string, err error) {
	switch {
	case errors.Is(err, errPolicyGone):
	case errors.Is(err, errDenied):
		s.writeError(403, fmt.Sprintf("host %q is not allowed for this sandbox", name))
	case errors.Is(err, errRawIP):
		s.writeError(403, "connections by address need an allowed CIDR")
	case errors.Is(err, errPrivate):
		s.writeError(403, fmt.Sprintf("host %q resolves only to addresses this sandbox may not reach", name))
	case errors.Is(err, errResolve):
		s.writeError(502, fmt.Sprintf("cannot resolve %q", name))
	default:
		s.writeError(502, fmt.Sprintf("cannot connect to %q", name))
	}
}
