package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Config wires a Proxy to the daemon. Lookup is required; every other
// field has a default.
type Config struct {
	// Lookup names the sandbox a connection or DNS query comes from, by
	// source address, and returns its current rules. ok false: not a
	// sandbox, the connection is closed (the query dropped).
	Lookup func(src netip.Addr) (sandboxID string, r Rules, ok bool)
	// Secrets returns the secrets bound to a sandbox. Nil: none.
	Secrets func(sandboxID string) []Secret
	// Resolve resolves a name for the proxy itself. Default:
	// net.DefaultResolver.LookupNetIP(ctx, "ip", host).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// OriginalDst returns where a DNAT'ed connection was going. Default:
	// the SO_ORIGINAL_DST socket option (Linux conntrack).
	OriginalDst func(c net.Conn) (netip.AddrPort, error)
	// DialUpstream connects to the resolved upstream. Default: net.Dialer.
	DialUpstream func(ctx context.Context, network, addr string) (net.Conn, error)
	// UpstreamRoots verifies upstream certificates where the proxy
	// terminates TLS (secret hosts). Nil: the system roots.
	UpstreamRoots *x509.CertPool
	// CA signs the certificates the proxy presents to a sandbox for a
	// secret's host (see NewCA). Nil: no TLS is terminated, so secrets are
	// only substituted over plain HTTP where a secret allows it.
	CA *tls.Certificate
	// Blocked are more ranges treated like private ones, e.g. the host's
	// own addresses (HostPrefixes).
	Blocked []netip.Prefix
	// MaxConnsPerSandbox caps a sandbox's concurrent proxied connections;
	// connections over the cap are closed at once. Default 256.
	MaxConnsPerSandbox int
	// BytesPerSecond limits each sandbox's traffic, per direction, summed
	// over its connections. 0: unlimited.
	BytesPerSecond int64
	// PeekTimeout bounds reading the ClientHello or first request head.
	// Default 10s.
	PeekTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a keep-alive
	// connection the proxy parses. Default 2m.
	IdleTimeout time.Duration
	// DialTimeout bounds resolving and connecting upstream. Default 10s.
	DialTimeout time.Duration
	// Log receives decisions and failures. Default: discard.
	Log *slog.Logger
}

// Proxy is the host-side egress proxy and DNS server for all sandboxes.
type Proxy struct {
	cfg    Config
	log    *slog.Logger
	leaves *leafCache // nil without a CA

	gen      atomic.Uint64 // bumped by every PolicyChanged
	refusals logLimiter

	mu        sync.Mutex
	sandboxes map[string]*sandboxState

	dnsSem chan struct{}
}

type sandboxState struct {
	conns      map[*liveConn]struct{}
	up, down   *bucket // toward upstream, toward the sandbox
	lastCapLog time.Time
}

// liveConn is one proxied connection, tracked so policy changes and
// sandbox removal can cut it.
type liveConn struct {
	id  string
	src netip.Addr
	st  *sandboxState

	// Set once the proxy decided where the connection goes (under p.mu).
	committed bool
	name      string // "" for a connection by address only
	ip        netip.Addr
	port      uint16

	mu     sync.Mutex
	conns  []net.Conn
	closed bool
	done   chan struct{}
}

// attach adds c to the connections closed with lc; false (and c closed) if
// lc is already closed.
func (lc *liveConn) attach(c net.Conn) bool {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.closed {
		c.Close()
		return false
	}
	lc.conns = append(lc.conns, c)
	return true
}

func (lc *liveConn) close() {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.closed {
		return
	}
	lc.closed = true
	close(lc.done)
	for _, c := range lc.conns {
		c.Close()
	}
}

// New returns a Proxy for cfg.
func New(cfg Config) *Proxy {
	if cfg.Resolve == nil {
		cfg.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if cfg.OriginalDst == nil {
		cfg.OriginalDst = OriginalDst
	}
	if cfg.DialUpstream == nil {
		d := &net.Dialer{KeepAlive: 30 * time.Second}
		cfg.DialUpstream = d.DialContext
	}
	if cfg.Secrets == nil {
		cfg.Secrets = func(string) []Secret { return nil }
	}
	if cfg.MaxConnsPerSandbox <= 0 {
		cfg.MaxConnsPerSandbox = 256
	}
	if cfg.PeekTimeout <= 0 {
		cfg.PeekTimeout = 10 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 2 * time.Minute
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{
		cfg:       cfg,
		log:       log,
		sandboxes: make(map[string]*sandboxState),
		dnsSem:    make(chan struct{}, 256),
	}
	if cfg.CA != nil {
		p.leaves = newLeafCache(*cfg.CA)
	}
	return p
}

// ServeTCP runs the transparent proxy on ln, which receives the
// connections the network layer DNATs from sandboxes' TCP ports 80 and
// 443. It returns when ctx is done (nil) or ln fails, after closing the
// connections it accepted and waiting for their goroutines.
func (p *Proxy) ServeTCP(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()

	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if isTemporary(err) {
				// Out of file descriptors or an aborted handshake: back
				// off as net/http does, rather than spin or give up.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				p.log.Warn("egress: accept", "err", err, "retry_in", delay)
				t := time.NewTimer(delay)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return nil
				}
				continue
			}
			return fmt.Errorf("egress: accept: %w", err)
		}
		delay = 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.handle(ctx, c)
		}()
	}
}

func isTemporary(err error) bool {
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM) {
		return true
	}
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

func addrOf(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap()
	case *net.UDPAddr:
		return a.AddrPort().Addr().Unmap()
	}
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// errors behind a refusal; they go to the log and, for HTTP, into a short
// response. None carries a secret.
var (
	errDenied     = errors.New("host not allowed")
	errRawIP      = errors.New("connection by address not allowed")
	errPrivate    = errors.New("name resolves only to addresses this sandbox may not reach")
	errResolve    = errors.New("cannot resolve host")
	errDial       = errors.New("cannot connect upstream")
	errPolicyGone = errors.New("policy changed")
)

func (p *Proxy) handle(ctx context.Context, c net.Conn) {
	defer c.Close()
	src := addrOf(c.RemoteAddr())
	g0 := p.gen.Load()
	id, rules, ok := p.cfg.Lookup(src)
	if !ok {
		p.log.Debug("egress: connection from unknown source", "src", src)
		return
	}
	lc := p.register(id, src)
	if lc == nil {
		return
	}
	defer p.unregister(lc)
	lc.attach(c)
	defer lc.close()
	stop := context.AfterFunc(ctx, lc.close)
	defer stop()

	dst, err := p.cfg.OriginalDst(c)
	if err != nil {
		if ok, _ := p.refusals.allow(time.Now()); ok {
			p.log.Warn("egress: no original destination", "sandbox", id, "src", src, "err", err)
		}
		return
	}
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	if la, ok := c.LocalAddr().(*net.TCPAddr); ok && la.AddrPort().Port() == dst.Port() && la.AddrPort().Addr().Unmap() == dst.Addr() {
		// Not translated: the sandbox dialled the proxy's own port.
		return
	}
	pol := compile(rules, p.cfg.Blocked)
	switch dst.Port() {
	case 443:
		p.handleTLS(ctx, lc, c, dst, pol, g0)
	case 80:
		p.handleHTTP(ctx, lc, c, dst, pol, g0)
	default:
		p.handleRaw(ctx, lc, c, dst, pol, g0)
	}
}

// register counts a new connection for sandbox id; nil if it is over the
// cap.
func (p *Proxy) register(id string, src netip.Addr) *liveConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.sandboxes[id]
	if st == nil {
		st = &sandboxState{
			conns: make(map[*liveConn]struct{}),
			up:    newBucket(p.cfg.BytesPerSecond),
			down:  newBucket(p.cfg.BytesPerSecond),
		}
		p.sandboxes[id] = st
	}
	if len(st.conns) >= p.cfg.MaxConnsPerSandbox {
		if now := time.Now(); now.Sub(st.lastCapLog) > time.Second {
			st.lastCapLog = now
			p.log.Warn("egress: connection cap reached, refusing", "sandbox", id, "cap", p.cfg.MaxConnsPerSandbox)
		}
		return nil
	}
	lc := &liveConn{id: id, src: src, st: st, done: make(chan struct{})}
	st.conns[lc] = struct{}{}
	return lc
}

func (p *Proxy) unregister(lc *liveConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(lc.st.conns, lc)
	if len(lc.st.conns) == 0 && p.sandboxes[lc.id] == lc.st {
		delete(p.sandboxes, lc.id)
	}
}

// Conns returns the number of live proxied connections of a sandbox.
func (p *Proxy) Conns(sandboxID string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st := p.sandboxes[sandboxID]; st != nil {
		return len(st.conns)
	}
	return 0
}

// PolicyChanged re-checks a sandbox's live connections against its current
// rules (through Config.Lookup) and closes those no longer allowed. Call it
// after the rules changed; it returns once they are closed. Connections
// still being set up re-check before they carry any data.
func (p *Proxy) PolicyChanged(sandboxID string) {
	p.gen.Add(1)
	p.mu.Lock()
	var check []*liveConn
	if st := p.sandboxes[sandboxID]; st != nil {
		for lc := range st.conns {
			if lc.committed {
				check = append(check, lc)
			}
		}
	}
	p.mu.Unlock()
	for _, lc := range check {
		if !p.stillAllowed(lc) {
			p.log.Info("egress: policy changed, closing connection", "sandbox", lc.id, "host", lc.name, "addr", lc.ip, "port", lc.port)
			lc.close()
		}
	}
}

// CloseSandbox closes every connection of a sandbox.
func (p *Proxy) CloseSandbox(sandboxID string) {
	p.mu.Lock()
	var all []*liveConn
	if st := p.sandboxes[sandboxID]; st != nil {
		for lc := range st.conns {
			all = append(all, lc)
		}
		delete(p.sandboxes, sandboxID)
	}
	p.mu.Unlock()
	for _, lc := range all {
		lc.close()
	}
}

func (p *Proxy) stillAllowed(lc *liveConn) bool {
	id, rules, ok := p.cfg.Lookup(lc.src)
	if !ok || id != lc.id {
		return false
	}
	pol := compile(rules, p.cfg.Blocked)
	if lc.name != "" {
		return pol.nameAllowed(lc.name, lc.port) && pol.addrAllowed(lc.ip, lc.port)
	}
	return pol.rawAllowed(lc.ip, lc.port)
}

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
