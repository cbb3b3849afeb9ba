package egress

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// The test "internet": names resolve (through the injected Resolve) to
// documentation addresses, and the injected DialUpstream maps those to
// local httptest servers. Nothing is ever dialled beyond loopback: an
// unmapped address fails the dial and is recorded as a stray.
var (
	pubAPI   = netip.MustParseAddr("203.0.113.10")
	pubOther = netip.MustParseAddr("203.0.113.20")
	// What the sandbox's own (untrusted) DNS view says; the proxy must
	// never connect there for a named connection.
	sandboxView = netip.MustParseAddr("198.51.100.7")
)

var (
	srcSB1 = netip.MustParseAddr("127.0.0.2")
	srcSB2 = netip.MustParseAddr("127.0.0.3")
	srcBad = netip.MustParseAddr("127.0.0.9")
)

// upstream records what the local "internet" servers received.
type upstream struct {
	mu       sync.Mutex
	auth     []string // Authorization of each request
	hosts    []string
	sni      []string
	uploaded int64
}

func (u *upstream) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.auth = append(u.auth, r.Header.Get("Authorization"))
		u.hosts = append(u.hosts, r.Host)
		if r.TLS != nil {
			u.sni = append(u.sni, r.TLS.ServerName)
		}
		u.mu.Unlock()
		switch r.URL.Path {
		case "/echo-auth":
			a := r.Header.Get("Authorization")
			w.Header().Set("X-Echo", a)
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "you sent: "+a+"\n")
		case "/big":
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			w.Header().Set("Content-Length", strconv.Itoa(n))
			buf := make([]byte, 64<<10)
			for n > 0 {
				m := min(n, len(buf))
				if _, err := w.Write(buf[:m]); err != nil {
					return
				}
				n -= m
			}
		case "/endless":
			buf := make([]byte, 32<<10)
			fl := w.(http.Flusher)
			for {
				if _, err := w.Write(buf); err != nil {
					return
				}
				fl.Flush()
			}
		case "/upload":
			n, _ := io.Copy(io.Discard, r.Body)
			u.mu.Lock()
			u.uploaded += n
			u.mu.Unlock()
			fmt.Fprintf(w, "%d", n)
		case "/sse":
			// One event now, the next only much later: a proxy that
			// buffers would hold the first one back.
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: first\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			io.WriteString(w, "data: second\n\n")
		case "/upgrade":
			if r.Header.Get("Upgrade") != "echo" {
				http.Error(w, "want Upgrade: echo", 400)
				return
			}
			c, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer c.Close()
			brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
			brw.Flush()
			io.Copy(c, brw)
		case "/small":
			io.WriteString(w, "ok")
		default:
			fmt.Fprintf(w, "hello from %s", r.Host)
		}
	})
}

func (u *upstream) lastAuth() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.auth) == 0 {
		return "<none>"
	}
	return u.auth[len(u.auth)-1]
}

func (u *upstream) allAuth() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.auth...)
}

type sandboxEntry struct {
	id    string
	rules Rules
}

// world is one test's proxy, upstreams and sandboxes.
type world struct {
	t testing.TB

	internetPool *x509.CertPool // trusted by the proxy for upstreams, and by clients for passthrough
	caPEM        []byte
	caPool       *x509.CertPool // the Paddock egress CA

	up       *upstream
	tlsSrv   *httptest.Server
	plainSrv *httptest.Server

	proxy *Proxy
	ln    map[uint16]net.Listener // proxy listeners by the port they stand for

	mu        sync.Mutex
	dns       map[string][]netip.Addr
	resolveHk func(host string) // called before answering, may block
	routes    map[netip.AddrPort]string
	sandboxes map[netip.Addr]sandboxEntry
	secrets   map[string][]Secret
	origDst   map[netip.AddrPort]netip.AddrPort
	dials     []string       // every upstream dial
	strays    []string       // dials to unmapped addresses
	resolved  []string       // every name the proxy resolved
	fixedDst  netip.AddrPort // if valid, every connection's original destination

	cancel context.CancelFunc
	done   chan struct{}
}

type worldOpts struct {
	maxConns int
	bps      int64
	log      bool
	// distrustUpstreams: the proxy trusts no upstream certificate.
	distrustUpstreams bool
	peekTimeout       time.Duration
}

func newWorld(t testing.TB, o worldOpts) *world {
	t.Helper()
	w := &world{
		t:         t,
		up:        &upstream{},
		ln:        map[uint16]net.Listener{},
		dns:       map[string][]netip.Addr{},
		routes:    map[netip.AddrPort]string{},
		sandboxes: map[netip.Addr]sandboxEntry{},
		secrets:   map[string][]Secret{},
		origDst:   map[netip.AddrPort]netip.AddrPort{},
		done:      make(chan struct{}),
	}
	// The "internet" CA and one server certificate for all test names.
	icaKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	icaTmpl := &x509.Certificate{
		SerialNumber: randomSerial(), Subject: pkix.Name{CommonName: "test internet CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	icaDER, err := x509.CreateCertificate(rand.Reader, icaTmpl, icaTmpl, &icaKey.PublicKey, icaKey)
	if err != nil {
		t.Fatal(err)
	}
	ica, _ := x509.ParseCertificate(icaDER)
	w.internetPool = x509.NewCertPool()
	w.internetPool.AddCert(ica)
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{
		SerialNumber: randomSerial(), Subject: pkix.Name{CommonName: "test server"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames:    []string{"api.example.com", "other.example.com", "*.example.com", "files.example.net", "rebind.example.com"},
		IPAddresses: []net.IP{net.ParseIP("203.0.113.10"), net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ica, &srvKey.PublicKey, icaKey)
	if err != nil {
		t.Fatal(err)
	}

	w.tlsSrv = httptest.NewUnstartedServer(w.up.handler())
	w.tlsSrv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}}}
	w.tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshakes the proxy refuses
	w.tlsSrv.StartTLS()
	w.plainSrv = httptest.NewServer(w.up.handler())
	t.Cleanup(func() {
		w.tlsSrv.CloseClientConnections()
		w.plainSrv.CloseClientConnections()
		w.tlsSrv.Close()
		w.plainSrv.Close()
	})

	for _, ip := range []netip.Addr{pubAPI, pubOther} {
		w.routes[netip.AddrPortFrom(ip, 443)] = w.tlsSrv.Listener.Addr().String()
		w.routes[netip.AddrPortFrom(ip, 80)] = w.plainSrv.Listener.Addr().String()
	}
	w.dns["api.example.com"] = []netip.Addr{pubAPI}
	w.dns["other.example.com"] = []netip.Addr{pubOther}
	w.dns["files.example.net"] = []netip.Addr{pubOther}
	w.dns["a.example.com"] = []netip.Addr{pubOther}
	w.dns["rebind.example.com"] = []netip.Addr{netip.MustParseAddr("10.0.0.5")}
	w.dns["loop.example.com"] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	w.dns["meta.example.com"] = []netip.Addr{netip.MustParseAddr("169.254.169.254")}
	w.dns["v6loop.example.com"] = []netip.Addr{netip.MustParseAddr("::1")}
	w.dns["mapped.example.com"] = []netip.Addr{netip.MustParseAddr("::ffff:10.0.0.5")}
	w.dns["cgnat.example.com"] = []netip.Addr{netip.MustParseAddr("100.64.1.1")}
	w.dns["mixed.example.com"] = []netip.Addr{netip.MustParseAddr("10.0.0.5"), pubAPI}
	// Mapped only for the test that allows 10.0.0.0/8 explicitly; the
	// dial goes to loopback, never to 10.0.0.5.
	w.routes[netip.MustParseAddrPort("10.0.0.5:443")] = w.tlsSrv.Listener.Addr().String()
	w.routes[netip.MustParseAddrPort("10.0.0.5:80")] = w.plainSrv.Listener.Addr().String()

	ca, caPEM, err := NewCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w.caPEM = caPEM
	w.caPool = x509.NewCertPool()
	w.caPool.AppendCertsFromPEM(caPEM)

	logger := slog.New(slog.DiscardHandler)
	if o.log || os.Getenv("EGRESS_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	upRoots := w.internetPool
	if o.distrustUpstreams {
		upRoots = x509.NewCertPool()
	}
	w.proxy = New(Config{
		Lookup:             w.lookup,
		Secrets:            w.getSecrets,
		Resolve:            w.resolve,
		OriginalDst:        w.originalDst,
		DialUpstream:       w.dialUpstream,
		UpstreamRoots:      upRoots,
		CA:                 &ca,
		MaxConnsPerSandbox: o.maxConns,
		Ceiling:            &Ceiling{Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
		BytesPerSecond:     o.bps,
		PeekTimeout:        o.peekTimeout,
		Log:                logger,
	})

	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	var wg sync.WaitGroup
	for _, port := range []uint16{80, 443, 5432} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		w.ln[port] = ln
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.proxy.ServeTCP(ctx, ln); err != nil {
				t.Errorf("ServeTCP: %v", err)
			}
		}()
	}
	go func() { wg.Wait(); close(w.done) }()
	t.Cleanup(w.stop)
	return w
}

// stop shuts the proxy down and waits for ServeTCP to return.
func (w *world) stop() {
	w.cancel()
	select {
	case <-w.done:
	case <-time.After(10 * time.Second):
		w.t.Errorf("ServeTCP did not return after cancel")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.strays) > 0 {
		w.t.Errorf("proxy dialled unmapped addresses: %v", w.strays)
	}
}

func (w *world) setSandbox(src netip.Addr, id string, r Rules) {
	w.mu.Lock()
	w.sandboxes[src] = sandboxEntry{id, r}
	w.mu.Unlock()
}

func (w *world) setSecrets(id string, s ...Secret) {
	w.mu.Lock()
	w.secrets[id] = s
	w.mu.Unlock()
}

func (w *world) lookup(src netip.Addr) (string, Rules, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.sandboxes[src]
	return e.id, e.rules, ok
}

func (w *world) getSecrets(id string) []Secret {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Secret(nil), w.secrets[id]...)
}

func (w *world) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	w.mu.Lock()
	hk := w.resolveHk
	w.mu.Unlock()
	if hk != nil {
		hk(host)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.resolved = append(w.resolved, host)
	a, ok := w.dns[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return a, nil
}

func (w *world) dialUpstream(ctx context.Context, network, addr string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.dials = append(w.dials, addr)
	local, ok := w.routes[ap]
	if !ok {
		w.strays = append(w.strays, addr)
	}
	w.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("test internet: no route to %s", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", local)
}

func (w *world) dialCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.dials)
}

func (w *world) originalDst(c net.Conn) (netip.AddrPort, error) {
	w.mu.Lock()
	fixed := w.fixedDst
	w.mu.Unlock()
	if fixed.IsValid() {
		return fixed, nil
	}
	ra := c.RemoteAddr().(*net.TCPAddr).AddrPort()
	ra = netip.AddrPortFrom(ra.Addr().Unmap(), ra.Port())
	deadline := time.Now().Add(5 * time.Second)
	for {
		w.mu.Lock()
		d, ok := w.origDst[ra]
		if ok {
			delete(w.origDst, ra)
		}
		w.mu.Unlock()
		if ok {
			return d, nil
		}
		if time.Now().After(deadline) {
			return netip.AddrPort{}, errors.New("test: unknown connection")
		}
		time.Sleep(time.Millisecond)
	}
}

// dial connects from src to the proxy as if to dst, which is what
// the network layer's DNAT does.
func (w *world) dial(ctx context.Context, src netip.Addr, dst netip.AddrPort) (net.Conn, error) {
	ln, ok := w.ln[dst.Port()]
	if !ok {
		return nil, fmt.Errorf("test: no proxy listener for port %d", dst.Port())
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice()}}
	c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		return nil, err
	}
	la := c.LocalAddr().(*net.TCPAddr).AddrPort()
	w.mu.Lock()
	w.origDst[netip.AddrPortFrom(la.Addr().Unmap(), la.Port())] = dst
	w.mu.Unlock()
	return c, nil
}

// client returns an HTTP client for the sandbox at src: names resolve to
// sandboxView (whatever the sandbox thinks; the proxy ignores it), IP
// literals stay, and the TLS client trusts roots.
func (w *world) client(src netip.Addr, roots *x509.CertPool) *http.Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, _ := net.SplitHostPort(addr)
			pn, _ := strconv.Atoi(port)
			ip := sandboxView
			if a, err := netip.ParseAddr(host); err == nil {
				ip = a
			}
			return w.dial(ctx, src, netip.AddrPortFrom(ip, uint16(pn)))
		},
		TLSClientConfig:     &tls.Config{RootCAs: roots},
		DisableCompression:  true,
		MaxIdleConnsPerHost: 16,
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func get(t testing.TB, c *http.Client, url string, hdr ...string) (int, string, http.Header, error) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "Host") {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header, err
}

func allowlist(allow ...string) Rules { return Rules{Mode: ModeAllowlist, Allow: allow} }

// dnsQuery sends one query from src over UDP or TCP and returns the rcode
// and A answers; ok is false when no answer came.
func dnsQuery(t testing.TB, src netip.Addr, udpAddr, tcpAddr string, overTCP bool, name string, typ uint16) (rcode int, answers []netip.Addr, ok bool) {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 4242, RecursionDesired: true})
	b.StartQuestions()
	b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: dnsmessage.Type(typ), Class: dnsmessage.ClassINET})
	q, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	var resp []byte
	if overTCP {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice()}}
		c, err := d.Dial("tcp", tcpAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(500 * time.Millisecond))
		c.Write(binary.BigEndian.AppendUint16(nil, uint16(len(q))))
		c.Write(q)
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return 0, nil, false
		}
		resp = make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(c, resp); err != nil {
			return 0, nil, false
		}
	} else {
		c, err := net.ListenPacket("udp", net.JoinHostPort(src.String(), "0"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ua, _ := net.ResolveUDPAddr("udp", udpAddr)
		c.WriteTo(q, ua)
		c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		buf := make([]byte, 1500)
		n, _, err := c.ReadFrom(buf)
		if err != nil {
			return 0, nil, false
		}
		resp = buf[:n]
	}
	var p dnsmessage.Parser
	h, err := p.Start(resp)
	if err != nil {
		t.Fatalf("bad DNS response: %v", err)
	}
	if h.ID != 4242 || !h.Response {
		t.Fatalf("bad DNS header %+v", h)
	}
	p.SkipAllQuestions()
	for {
		ah, err := p.AnswerHeader()
		if err != nil {
			break
		}
		if ah.Type == dnsmessage.TypeA {
			a, _ := p.AResource()
			answers = append(answers, netip.AddrFrom4(a.A))
		} else {
			p.SkipAnswer()
		}
	}
	return int(h.RCode), answers, true
}
