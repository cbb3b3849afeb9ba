package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
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
	// Ceiling is the operator's bound on tenants' rules, enforced on every
	// resolved and raw address whatever a sandbox's Allow says. Nil: the
	// zero Ceiling (every special range refused, none opened).
	Ceiling *Ceiling
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
	pol := compile(rules, p.cfg.Blocked, p.cfg.Ceiling)
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
	pol := compile(rules, p.cfg.Blocked, p.cfg.Ceiling)
	if lc.name != "" {
		return pol.nameAllowed(lc.name, lc.port) && pol.addrAllowed(lc.ip, lc.port)
	}
	return pol.rawAllowed(lc.ip, lc.port)
}
