// Dialling upstreams for proxied connections: the policy decision, name
// resolution, the per-protocol handlers and the byte splice.

package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// connect decides whether lc may go to name (or, with no name, to raw) on
// port, resolves the name itself, dials the first acceptable address and
// records the decision on lc so PolicyChanged can revisit it.
func (p *Proxy) connect(ctx context.Context, lc *liveConn, pol *policy, name string, raw netip.Addr, port uint16, g0 uint64) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	var addrs []netip.Addr
	if name != "" {
		if !pol.nameAllowed(name, port) {
			return nil, errDenied
		}
		all, err := p.cfg.Resolve(ctx, name)
		if err != nil {
			p.log.Info("egress: resolve failed", "sandbox", lc.id, "host", name, "err", err)
			return nil, errResolve
		}
		for _, a := range all {
			if pol.addrAllowed(a, port) {
				addrs = append(addrs, a.Unmap())
			}
		}
		if len(addrs) == 0 {
			if len(all) == 0 {
				return nil, errResolve
			}
			p.log.Warn("egress: refused answers", "sandbox", lc.id, "host", name, "answers", fmt.Sprint(all))
			return nil, errPrivate
		}
	} else {
		if !pol.rawAllowed(raw, port) {
			return nil, errRawIP
		}
		addrs = []netip.Addr{raw}
	}

	var up net.Conn
	var ip netip.Addr
	var lastErr error
	for _, a := range addrs {
		c, err := p.cfg.DialUpstream(ctx, "tcp", netip.AddrPortFrom(a, port).String())
		if err == nil {
			up, ip = c, a
			break
		}
		lastErr = err
	}
	if up == nil {
		p.log.Info("egress: dial failed", "sandbox", lc.id, "host", name, "port", port, "err", lastErr)
		return nil, errDial
	}
	if !lc.attach(up) {
		return nil, errPolicyGone
	}

	p.mu.Lock()
	lc.committed, lc.name, lc.ip, lc.port = true, name, ip, port
	p.mu.Unlock()
	if p.gen.Load() != g0 && !p.stillAllowed(lc) {
		// The rules changed while this connection was being set up and
		// PolicyChanged could not see it yet.
		lc.close()
		return nil, errPolicyGone
	}
	return up, nil
}

func (p *Proxy) boundSecrets(id, host string, overTLS bool) []Secret {
	if host == "" {
		return nil
	}
	var out []Secret
	for _, s := range p.cfg.Secrets(id) {
		if !s.boundTo(host) || !(overTLS || s.AllowPlainHTTP) {
			continue
		}
		if !s.usable() {
			p.log.Warn("egress: secret not usable (empty, short placeholder or CR/LF/NUL in value)", "sandbox", id, "secret", s.Name)
			continue
		}
		out = append(out, s)
	}
	return out
}

// handleTLS serves a connection to port 443: the SNI decides.
func (p *Proxy) handleTLS(ctx context.Context, lc *liveConn, c net.Conn, dst netip.AddrPort, pol *policy, g0 uint64) {
	c.SetReadDeadline(time.Now().Add(p.cfg.PeekTimeout))
	sni, isTLS, peeked := readClientHello(c)
	c.SetReadDeadline(time.Time{})
	if lc.isClosed() {
		return
	}
	name, raw := targetOf(sni, dst.Addr())
	if !isTLS {
		name = ""
	}
	var secrets []Secret
	if isTLS && name != "" && p.leaves != nil {
		secrets = p.boundSecrets(lc.id, name, true)
	}
	up, err := p.connect(ctx, lc, pol, name, raw, dst.Port(), g0)
	if err != nil {
		p.logRefusal(lc, name, raw, dst.Port(), err)
		return
	}
	if len(secrets) > 0 {
		p.serveTerminated(ctx, lc, &prefixConn{Conn: c, prefix: peeked}, up, name)
		return
	}
	p.splice(lc, c, c, peeked, up, up)
}

// handleHTTP serves a connection to port 80: the Host header decides, and
// every request on the connection must name the same host.
func (p *Proxy) handleHTTP(ctx context.Context, lc *liveConn, c net.Conn, dst netip.AddrPort, pol *policy, g0 uint64) {
	hr := &headReader{r: c, recording: true}
	hr.remain = maxHTTPHead
	s := newHTTPSession(p, lc, c, hr)
	c.SetReadDeadline(time.Now().Add(p.cfg.PeekTimeout))
	req, err := readRequest(s.cr)
	c.SetReadDeadline(time.Time{})
	hr.unlimit()
	if err != nil {
		if errors.Is(err, errHeadTooLarge) {
			s.writeError(431, "request head too large")
			return
		}
		// Not HTTP. Only a connection by address can go on, byte for byte.
		if len(hr.rec) == 0 || !pol.rawAllowed(dst.Addr(), dst.Port()) {
			p.logRefusal(lc, "", dst.Addr(), dst.Port(), errRawIP)
			return
		}
		up, err := p.connect(ctx, lc, pol, "", dst.Addr(), dst.Port(), g0)
		if err != nil {
			return
		}
		p.splice(lc, c, c, hr.rec, up, up)
		return
	}
	name, raw := targetOf(hostOnly(req.Host), dst.Addr())
	if name == "" {
		// By address: no host to hold requests to, nothing to substitute,
		// so the bytes go through untouched.
		rec := hr.rec
		hr.stopRecording()
		up, err := p.connect(ctx, lc, pol, "", raw, dst.Port(), g0)
		if err != nil {
			p.logRefusal(lc, "", raw, dst.Port(), err)
			s.writeRefusal("", err)
			return
		}
		p.splice(lc, c, c, rec, up, up)
		return
	}
	hr.stopRecording()
	up, err := p.connect(ctx, lc, pol, name, raw, dst.Port(), g0)
	if err != nil {
		p.logRefusal(lc, name, raw, dst.Port(), err)
		s.writeRefusal(name, err)
		return
	}
	s.setUpstream(up, false, name)
	s.serve(req)
}

// handleRaw serves a connection to any other port: only by address.
func (p *Proxy) handleRaw(ctx context.Context, lc *liveConn, c net.Conn, dst netip.AddrPort, pol *policy, g0 uint64) {
	up, err := p.connect(ctx, lc, pol, "", dst.Addr(), dst.Port(), g0)
	if err != nil {
		p.logRefusal(lc, "", dst.Addr(), dst.Port(), err)
		return
	}
	p.splice(lc, c, c, nil, up, up)
}

// serveTerminated terminates the sandbox's TLS with a leaf for name signed
// by the CA, opens verified TLS to the upstream and proxies HTTP/1.1
// requests between them, substituting secrets.
func (p *Proxy) serveTerminated(ctx context.Context, lc *liveConn, c net.Conn, up net.Conn, name string) {
	leaf, err := p.leaves.get(name)
	if err != nil {
		p.log.Error("egress: mint certificate", "host", name, "err", err)
		return
	}
	tc := tls.Server(c, &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	hctx, cancel := context.WithTimeout(ctx, p.cfg.PeekTimeout)
	err = tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		p.log.Info("egress: sandbox TLS handshake failed", "sandbox", lc.id, "host", name, "err", err)
		return
	}
	hr := &headReader{r: tc}
	s := newHTTPSession(p, lc, tc, hr)
	uc := tls.Client(up, &tls.Config{
		ServerName: name,
		RootCAs:    p.cfg.UpstreamRoots,
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
	})
	hctx, cancel = context.WithTimeout(ctx, p.cfg.DialTimeout)
	err = uc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		p.log.Warn("egress: upstream TLS failed", "sandbox", lc.id, "host", name, "err", err)
		// Answer the first request, not before it: clients treat a
		// response that precedes their request as a broken connection.
		s.hr.limitHead(s.cr)
		tc.SetReadDeadline(time.Now().Add(p.cfg.PeekTimeout))
		if _, err := readRequest(s.cr); err == nil {
			s.writeError(502, "upstream TLS verification failed")
		}
		return
	}
	s.setUpstream(uc, true, name)
	s.serve(nil)
}

func (lc *liveConn) isClosed() bool {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.closed
}

// targetOf splits what a client named into a host name, or, for an IP
// literal or nothing, the address to connect to.
func targetOf(host string, dst netip.Addr) (name string, raw netip.Addr) {
	host = normalizeHost(host)
	if host == "" {
		return "", dst
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return "", a.Unmap()
	}
	return host, netip.Addr{}
}

func (p *Proxy) logRefusal(lc *liveConn, name string, raw netip.Addr, port uint16, err error) {
	if errors.Is(err, errPolicyGone) {
		return
	}
	ok, suppressed := p.refusals.allow(time.Now())
	if !ok {
		return
	}
	attrs := []any{"sandbox", lc.id, "port", port, "reason", err.Error()}
	if name != "" {
		attrs = append(attrs, "host", name)
	} else {
		attrs = append(attrs, "addr", raw)
	}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed_before", suppressed)
	}
	p.log.Info("egress: refused", attrs...)
}

// logLimiter lets through at most logBurst log lines per second, so a
// sandbox hammering a refused host cannot flood the daemon's log.
type logLimiter struct {
	mu         sync.Mutex
	window     time.Time
	n          int
	suppressed int
}

const logBurst = 50

func (l *logLimiter) allow(now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.window) >= time.Second {
		l.window, l.n = now, 0
	}
	if l.n >= logBurst {
		l.suppressed++
		return false, 0
	}
	l.n++
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}

// splice copies both ways between the sandbox (reading cr, writing cw) and
// the upstream (ur, uw), first sending first upstream, with the sandbox's
// bandwidth limit, until both directions end or the connection is cut.
func (p *Proxy) splice(lc *liveConn, cr io.Reader, cw net.Conn, first []byte, ur io.Reader, uw net.Conn) {
	toUp := limitedWriter(uw, lc.st.up, lc.done)
	toSandbox := limitedWriter(cw, lc.st.down, lc.done)
	if len(first) > 0 {
		if _, err := toUp.Write(first); err != nil {
			return
		}
	}
	var wg sync.WaitGroup
	pipe := func(dst io.Writer, dstConn net.Conn, src io.Reader) {
		defer wg.Done()
		_, err := io.Copy(dst, src)
		if err != nil {
			lc.close()
			return
		}
		if cwr, ok := dstConn.(closeWriter); ok {
			cwr.CloseWrite()
		} else {
			lc.close()
		}
	}
	wg.Add(2)
	go pipe(toUp, uw, cr)
	go pipe(toSandbox, cw, ur)
	wg.Wait()
}
