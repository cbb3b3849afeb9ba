package network

// Test environment: real namespaces, veths and nftables, on the host. Every
// packet a test sends stays on this machine: sandboxes reach only loopback
// and an "upstream" namespace the tests create, because a policy routing
// rule sends everything from the test pool (TestPool) into that namespace
// whatever the Manager's rules say.

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

var (
	testPool     = netip.MustParsePrefix("10.250.0.0/16") // all test managers' pools are inside
	upHostAddr   = netip.MustParseAddr("198.18.0.1")      // host side of the upstream link
	upAddr       = netip.MustParseAddr("198.18.0.2")      // upstream side
	internetAddr = netip.MustParseAddr("198.19.1.1")      // a "public" server
	metadataAddr = netip.MustParseAddr("169.254.169.254") // a cloud metadata service
	privateAddr  = netip.MustParseAddr("10.99.0.1")       // a private-range server
)

const (
	routeTable = 4242
	rulePrio   = 4242
	upTCPPort  = 8080
	upUDPPort  = 9999
)

// upstream is the namespace standing in for the internet.
type upstream struct {
	ns    netns.NsHandle
	iface string
	udp   chan string // payloads received on upUDPPort
	mu    sync.Mutex
	conns []*upConn
}

// upConn is a connection the upstream TCP server accepted.
type upConn struct {
	remote string
	done   chan error // the error that ended it
}

var (
	env     *upstream
	envErr  error
	envOnce sync.Once
)

func skipUnlessRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := os.Stat("/proc/sys/net/ipv4/ip_forward"); err != nil {
		t.Skip("no IPv4 forwarding sysctl")
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if env != nil {
		env.close()
	}
	os.Exit(code)
}

// getUpstream sets up the upstream namespace once per test binary.
func getUpstream(t testing.TB) *upstream {
	t.Helper()
	skipUnlessRoot(t)
	envOnce.Do(func() { env, envErr = newUpstream() })
	if envErr != nil {
		t.Fatalf("upstream: %v", envErr)
	}
	return env
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// newNetns creates an unpinned namespace and returns a handle to it.
func newNetns() (netns.NsHandle, error) {
	type res struct {
		h   netns.NsHandle
		err error
	}
	c := make(chan res, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			c <- res{err: err}
			return
		}
		h, err := netns.Get()
		c <- res{h, err}
	}()
	r := <-c
	return r.h, r.err
}

// inNS runs fn with the calling thread in namespace ns; sockets fn
// creates belong to ns.
func inNS(ns netns.NsHandle, fn func() error) error {
	c := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := netns.Set(ns); err != nil {
			c <- err
			return
		}
		c <- fn()
	}()
	return <-c
}

// inPath is inNS for a pinned namespace.
func inPath(path string, fn func() error) error {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return err
	}
	defer ns.Close()
	return inNS(ns, fn)
}

func addr4(a netip.Addr, bits int) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(bits, 32)}}
}

func newUpstream() (*upstream, error) {
	ns, err := newNetns()
	if err != nil {
		return nil, err
	}
	u := &upstream{ns: ns, iface: "pdtup" + randHex(3), udp: make(chan string, 100)}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: u.iface}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(ns))}
	if err := netlink.LinkAdd(veth); err != nil {
		return nil, err
	}
	host, err := netlink.LinkByName(u.iface)
	if err != nil {
		return u, err
	}
	if err := netlink.AddrAdd(host, addr4(upHostAddr, 30)); err != nil {
		return u, err
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return u, err
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return u, err
	}
	defer h.Close()
	for _, name := range []string{"lo", "eth0"} {
		l, err := h.LinkByName(name)
		if err != nil {
			return u, err
		}
		if err := h.LinkSetUp(l); err != nil {
			return u, err
		}
		if name == "lo" {
			for _, a := range []netip.Addr{internetAddr, metadataAddr, privateAddr} {
				if err := h.AddrAdd(l, addr4(a, 32)); err != nil {
					return u, err
				}
			}
		} else {
			if err := h.AddrAdd(l, addr4(upAddr, 30)); err != nil {
				return u, err
			}
			if err := h.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: upHostAddr.AsSlice()}); err != nil {
				return u, err
			}
		}
	}
	// Everything from the test pool goes upstream, except to the pool.
	_, pool, _ := net.ParseCIDR(testPool.String())
	if err := netlink.RouteAdd(&netlink.Route{Dst: pool, Table: routeTable, Type: unix.RTN_THROW}); err != nil {
		return u, fmt.Errorf("throw route: %w", err)
	}
	_, all, _ := net.ParseCIDR("0.0.0.0/0")
	if err := netlink.RouteAdd(&netlink.Route{Dst: all, Gw: upAddr.AsSlice(), LinkIndex: host.Attrs().Index, Table: routeTable}); err != nil {
		return u, fmt.Errorf("upstream route: %w", err)
	}
	// And so does whatever the host sends from its upstream address (resets
	// for connections whose conntrack entries are gone, say).
	for _, r := range testRules() {
		if err := netlink.RuleAdd(r); err != nil {
			return u, fmt.Errorf("rule: %w", err)
		}
	}
	// Servers: a TCP echo server (a line "stream" makes it send a byte
	// every 20ms instead) and a UDP sink, on every upstream address.
	var ln net.Listener
	var pc net.PacketConn
	err = inNS(ns, func() error {
		var err error
		if ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", upTCPPort)); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp4", fmt.Sprintf(":%d", upUDPPort))
		return err
	})
	if err != nil {
		return u, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			uc := &upConn{remote: c.RemoteAddr().String(), done: make(chan error, 1)}
			u.mu.Lock()
			u.conns = append(u.conns, uc)
			u.mu.Unlock()
			go serveUp(c, uc)
		}
	}()
	go func() {
		buf := make([]byte, 1500)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			select {
			case u.udp <- string(buf[:n]):
			default:
			}
		}
	}()
	return u, nil
}

func serveUp(c net.Conn, uc *upConn) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			uc.done <- err
			return
		}
		if line == "stream\n" {
			for {
				if _, err := c.Write([]byte{'.'}); err != nil {
					uc.done <- err
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		if _, err := io.WriteString(c, line); err != nil {
			uc.done <- err
			return
		}
	}
}

// lastConn returns the connection the upstream accepted last.
func (u *upstream) lastConn() *upConn {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.conns) == 0 {
		return nil
	}
	return u.conns[len(u.conns)-1]
}

// drainUDP forgets what the UDP sink received so far.
func (u *upstream) drainUDP() {
	for {
		select {
		case <-u.udp:
		default:
			return
		}
	}
}

// testRules are the policy routing rules sending the tests' traffic to
// the upstream namespace.
func testRules() []*netlink.Rule {
	var rules []*netlink.Rule
	for _, p := range []netip.Prefix{testPool, netip.PrefixFrom(upHostAddr, 32)} {
		r := netlink.NewRule()
		r.Src = &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)}
		r.Table, r.Priority = routeTable, rulePrio
		rules = append(rules, r)
	}
	return rules
}

func (u *upstream) close() {
	_, pool, _ := net.ParseCIDR(testPool.String())
	for _, r := range testRules() {
		netlink.RuleDel(r)
	}
	netlink.RouteDel(&netlink.Route{Dst: pool, Table: routeTable, Type: unix.RTN_THROW})
	if l, err := netlink.LinkByName(u.iface); err == nil {
		netlink.LinkDel(l)
	}
	u.ns.Close()
}

// services are the host-side servers a test Manager points at.
type services struct {
	proxyPort, dnsPort uint16
	dnsQueries         chan string // "udp:" or "tcp:" + payload
}

func listenServices(t testing.TB) *services {
	t.Helper()
	s := &services{dnsQueries: make(chan string, 100)}
	proxy, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	s.proxyPort = uint16(proxy.Addr().(*net.TCPAddr).Port)
	// The resolver needs the same port for UDP and TCP.
	var udp net.PacketConn
	var tcp net.Listener
	for range 20 {
		udp, err = net.ListenPacket("udp4", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		port := udp.LocalAddr().(*net.UDPAddr).Port
		if tcp, err = net.Listen("tcp4", fmt.Sprintf("0.0.0.0:%d", port)); err == nil {
			break
		}
		udp.Close()
	}
	if tcp == nil {
		t.Fatal("no port free for both UDP and TCP")
	}
	t.Cleanup(func() { udp.Close(); tcp.Close() })
	s.dnsPort = uint16(udp.LocalAddr().(*net.UDPAddr).Port)

	go func() { // proxy: report SO_ORIGINAL_DST, tell the client, close
		for {
			c, err := proxy.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "proxy "+originalDst(c)+"\n")
			c.Close()
		}
	}()
	go func() { // DNS over UDP: answer "dns"
		buf := make([]byte, 1500)
		for {
			n, from, err := udp.ReadFrom(buf)
			if err != nil {
				return
			}
			select {
			case s.dnsQueries <- "udp:" + string(buf[:n]):
			default:
			}
			udp.WriteTo([]byte("dns"), from)
		}
	}()
	go func() { // DNS over TCP
		for {
			c, err := tcp.Accept()
			if err != nil {
				return
			}
			select {
			case s.dnsQueries <- "tcp:":
			default:
			}
			io.WriteString(c, "dns\n")
			c.Close()
		}
	}()
	return s
}

// originalDst reads SO_ORIGINAL_DST, as the egress proxy does.
func originalDst(c net.Conn) string {
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return "error: " + err.Error()
	}
	var out string
	rc.Control(func(fd uintptr) {
		const soOriginalDst = 80
		mreq, err := unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, soOriginalDst)
		if err != nil {
			out = "error: " + err.Error()
			return
		}
		b := mreq.Multiaddr
		ip := netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]})
		out = netip.AddrPortFrom(ip, uint16(b[2])<<8|uint16(b[3])).String()
	})
	return out
}

// testManager is a Manager on its own state directory and table, torn
// down with the test.
type testManager struct {
	*Manager
	cfg Config
	svc *services
}

func newTestManager(t testing.TB, pool string) *testManager {
	t.Helper()
	return newTestManagerAt(t, pool, t.TempDir())
}

// newTestManagerAt is newTestManager on the state directory stateDir.
func newTestManagerAt(t testing.TB, pool, stateDir string) *testManager {
	t.Helper()
	getUpstream(t)
	svc := listenServices(t)
	cfg := Config{
		StateDir:  stateDir,
		Pool:      netip.MustParsePrefix(pool),
		ProxyPort: svc.proxyPort,
		DNSPort:   svc.dnsPort,
		Table:     "paddock-test-" + randHex(4),
		Log:       slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tm := &testManager{Manager: m, cfg: cfg, svc: svc}
	t.Cleanup(func() { tm.cleanup(t) })
	return tm
}

// cleanup tears down what the test left and removes the table and the
// netns mount point.
func (tm *testManager) cleanup(t testing.TB) {
	ids, err := tm.List(t.Context())
	if err != nil {
		t.Errorf("cleanup list: %v", err)
	}
	for _, id := range ids {
		if err := tm.Teardown(t.Context(), id); err != nil {
			t.Errorf("cleanup teardown %s: %v", id, err)
		}
	}
	tm.batch(func(c *nftables.Conn) error {
		c.DelTable(tm.table())
		return nil
	})
	if _, err := tm.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	// With every network torn down, the pin namespace ended too.
	if _, err := os.Stat(filepath.Join(tm.cfg.StateDir, pinsFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the pin namespace's pin is left: %v", err)
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

// --- probes run inside a sandbox ---

// probeTimeout bounds waiting for what must not arrive (a datagram);
// connectTimeout bounds connections, which succeed or are refused with a
// reset at once, but may take a SYN retransmission when a new sandbox
// reuses an earlier one's address and port towards the same server.
const (
	probeTimeout   = 500 * time.Millisecond
	connectTimeout = 3 * time.Second
)

// dial connects from inside the sandbox's namespace.
func dial(att *Attachment, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := inPath(att.NetnsPath, func() error {
		var err error
		c, err = net.DialTimeout(network, addr, connectTimeout)
		return err
	})
	return c, err
}

// tcpLine connects from the sandbox, optionally sends a line, and returns
// the first line it reads back.
func tcpLine(att *Attachment, addr, send string) (string, error) {
	c, err := dial(att, "tcp4", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(connectTimeout))
	if send != "" {
		if _, err := io.WriteString(c, send+"\n"); err != nil {
			return "", err
		}
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSuffix(line, "\n"), err
}

// udpExchange sends a datagram from the sandbox and returns the reply, if
// any arrives in time.
func udpExchange(att *Attachment, addr, payload string) (string, error) {
	c, err := dial(att, "udp4", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(probeTimeout))
	if _, err := io.WriteString(c, payload); err != nil {
		return "", err
	}
	buf := make([]byte, 1500)
	n, err := c.Read(buf)
	return string(buf[:n]), err
}

// udpSent reports whether the upstream sink received payload (sent from
// the sandbox to addr) within the probe timeout.
func udpSent(t *testing.T, att *Attachment, addr, payload string) bool {
	t.Helper()
	env.drainUDP()
	c, err := dial(att, "udp4", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	io.WriteString(c, payload)
	deadline := time.After(probeTimeout)
	for {
		select {
		case got := <-env.udp:
			if got == payload {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

func hp(a netip.Addr, port uint16) string { return netip.AddrPortFrom(a, port).String() }

// mounted reports whether path is a mount point in our mount namespace.
// pinned reports whether id's namespace is pinned in m's pin namespace.
func pinned(t *testing.T, m *Manager, id string) bool {
	ok, err := m.pins.pinned(id)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return !errors.Is(err, os.ErrNotExist)
}
