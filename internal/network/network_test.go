package network

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// hostServices starts a TCP listener on all host addresses (standing in
// for the daemon's API and any other host service), one on loopback only,
// and a UDP listener on all addresses that records what it receives.
func hostServices(t *testing.T) (anyPort, loopPort, udpPort uint16, udpGot chan string) {
	t.Helper()
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	lo, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); lo.Close(); pc.Close() })
	for _, l := range []net.Listener{ln, lo} {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				io.WriteString(c, "host service\n")
				c.Close()
			}
		}()
	}
	udpGot = make(chan string, 10)
	go func() {
		buf := make([]byte, 1500)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			udpGot <- string(buf[:n])
		}
	}()
	return uint16(ln.Addr().(*net.TCPAddr).Port), uint16(lo.Addr().(*net.TCPAddr).Port),
		uint16(pc.LocalAddr().(*net.UDPAddr).Port), udpGot
}

// hostAddrs lists the host's IPv4 addresses outside 127/8.
func hostAddrs(t *testing.T) []netip.Addr {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	var out []netip.Addr
	for _, a := range addrs {
		ip, _ := netip.AddrFromSlice(a.IP.To4())
		if !ip.IsLoopback() {
			out = append(out, ip)
		}
	}
	return out
}

func mustSetup(t *testing.T, tm *testManager, id string, p Policy) *Attachment {
	t.Helper()
	att, err := tm.Setup(t.Context(), id, p)
	if err != nil {
		t.Fatalf("Setup(%s): %v", id, err)
	}
	return att
}

func mustUpdate(t *testing.T, tm *testManager, id string, p Policy) {
	t.Helper()
	if err := tm.Update(t.Context(), id, p); err != nil {
		t.Fatalf("Update(%s): %v", id, err)
	}
}

func wantLine(t *testing.T, att *Attachment, addr, send, want string) {
	t.Helper()
	got, err := tcpLine(att, addr, send)
	if err != nil || got != want {
		t.Errorf("%s: got %q, %v; want %q", addr, got, err, want)
	}
}

func wantRefused(t *testing.T, att *Attachment, addr string) {
	t.Helper()
	if got, err := tcpLine(att, addr, "hi"); err == nil {
		t.Errorf("%s: reachable (got %q), want refused", addr, got)
	}
}

func TestAllowlist(t *testing.T) {
	tm := newTestManager(t, "10.250.10.0/24")
	p := Policy{Mode: ModeAllowlist, Allow: []string{"pypi.org", "*.npmjs.org", "git.example.com:8443"}}
	att := mustSetup(t, tm, "allow1", p)
	other := mustSetup(t, tm, "allow2", Policy{Mode: ModeAllowlist})
	anyPort, loopPort, udpPort, udpGot := hostServices(t)
	proxy := tm.cfg.ProxyPort

	t.Run("inside: eth0, default route, no IPv6", func(t *testing.T) {
		err := inPath(att.NetnsPath, func() error {
			eth, err := netlink.LinkByName("eth0")
			if err != nil {
				return err
			}
			addrs, _ := netlink.AddrList(eth, netlink.FAMILY_ALL)
			if len(addrs) != 1 || !addrs[0].IP.Equal(att.SandboxAddr.AsSlice()) {
				return fmt.Errorf("eth0 addresses %v", addrs)
			}
			routes, _ := netlink.RouteList(nil, netlink.FAMILY_V4)
			if !slices.ContainsFunc(routes, func(r netlink.Route) bool {
				return (r.Dst == nil || r.Dst.String() == "0.0.0.0/0") && r.Gw.Equal(att.HostAddr.AsSlice())
			}) {
				return fmt.Errorf("no default route via %s: %v", att.HostAddr, routes)
			}
			if b, _ := os.ReadFile("/proc/sys/net/ipv6/conf/eth0/disable_ipv6"); string(b) != "1\n" {
				return fmt.Errorf("IPv6 on eth0: disable_ipv6=%q", b)
			}
			if b, _ := os.ReadFile("/proc/sys/net/ipv4/ping_group_range"); string(b) != "0\t2147483647\n" {
				return fmt.Errorf("ping_group_range=%q", b)
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
		if b, _ := os.ReadFile("/proc/sys/net/ipv6/conf/" + att.HostIface + "/disable_ipv6"); string(b) != "1\n" {
			t.Errorf("IPv6 on %s: disable_ipv6=%q", att.HostIface, b)
		}
	})
	t.Run("proxy on own host address", func(t *testing.T) {
		wantLine(t, att, hp(att.HostAddr, proxy), "", "proxy "+hp(att.HostAddr, proxy))
	})
	t.Run("80 and 443 go to the proxy with their original destination", func(t *testing.T) {
		for _, port := range []uint16{80, 443, 8443} {
			wantLine(t, att, hp(internetAddr, port), "", "proxy "+hp(internetAddr, port))
		}
		// The metadata address too: the proxy, which never connects to
		// the original destination, decides.
		wantLine(t, att, hp(metadataAddr, 80), "", "proxy "+hp(metadataAddr, 80))
	})
	t.Run("raw IP connections refused", func(t *testing.T) {
		for _, a := range []netip.Addr{internetAddr, metadataAddr, privateAddr} {
			wantRefused(t, att, hp(a, upTCPPort))
		}
	})
	t.Run("host services unreachable", func(t *testing.T) {
		for _, a := range hostAddrs(t) {
			wantRefused(t, att, hp(a, anyPort))
			if a != att.HostAddr {
				wantRefused(t, att, hp(a, proxy)) // not even the proxy port of another address
			}
		}
		// 127.0.0.1 is the sandbox's own loopback.
		if _, err := dial(att, "tcp4", fmt.Sprintf("127.0.0.1:%d", loopPort)); err == nil {
			t.Error("host loopback service reachable")
		}
	})
	t.Run("UDP dropped", func(t *testing.T) {
		if udpSent(t, att, hp(internetAddr, upUDPPort), "allowlist-udp") {
			t.Error("UDP to the internet got through")
		}
		udpExchange(att, hp(att.HostAddr, udpPort), "to-host")
		select {
		case got := <-udpGot:
			t.Errorf("host UDP service received %q", got)
		case <-time.After(100 * time.Millisecond):
		}
	})
	t.Run("DNS goes to the resolver", func(t *testing.T) {
		for _, a := range []netip.Addr{internetAddr, att.HostAddr, netip.MustParseAddr("8.8.8.8")} {
			if got, err := udpExchange(att, hp(a, 53), "query"); err != nil || got != "dns" {
				t.Errorf("UDP DNS via %s: %q, %v", a, got, err)
			}
		}
		wantLine(t, att, hp(internetAddr, 53), "", "dns")
		if q := <-tm.svc.dnsQueries; q != "udp:query" {
			t.Errorf("resolver saw %q", q)
		}
	})
	t.Run("other sandboxes unreachable, sandboxes reachable from the host", func(t *testing.T) {
		var ln net.Listener
		err := inPath(other.NetnsPath, func() (err error) {
			ln, err = net.Listen("tcp4", ":7000")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				io.WriteString(c, "exposed\n")
				c.Close()
			}
		}()
		wantRefused(t, att, hp(other.SandboxAddr, 7000))
		wantRefused(t, att, hp(other.HostAddr, proxy))
		c, err := net.DialTimeout("tcp4", hp(other.SandboxAddr, 7000), probeTimeout)
		if err != nil {
			t.Fatalf("host to sandbox: %v", err)
		}
		defer c.Close()
		if line, _ := bufio.NewReader(c).ReadString('\n'); line != "exposed\n" {
			t.Errorf("host to sandbox: %q", line)
		}
	})
	t.Run("address entries are direct", func(t *testing.T) {
		p := p
		p.Allow = append(slices.Clone(p.Allow), "198.19.1.1/32", "10.99.0.1:8080")
		mustUpdate(t, tm, "allow1", p)
		wantLine(t, att, hp(internetAddr, upTCPPort), "hi", "hi")
		wantLine(t, att, hp(privateAddr, upTCPPort), "hi", "hi")
		if !udpSent(t, att, hp(internetAddr, upUDPPort), "allowed-udp") {
			t.Error("UDP to an allowed CIDR dropped")
		}
		if udpSent(t, att, hp(privateAddr, upUDPPort), "port-entry-udp") {
			t.Error("UDP to another port of a port entry got through")
		}
		// 443 of an allowed address goes direct, not to the proxy.
		wantRefused(t, att, hp(internetAddr, 443))
		wantRefused(t, att, hp(metadataAddr, upTCPPort))

		p.Deny = []string{"198.19.1.0/24"}
		mustUpdate(t, tm, "allow1", p)
		wantRefused(t, att, hp(internetAddr, upTCPPort))
		wantRefused(t, att, hp(internetAddr, 443)) // denied: not even the proxy
		wantLine(t, att, hp(privateAddr, upTCPPort), "hi", "hi")
	})
}

func TestFull(t *testing.T) {
	tm := newTestManager(t, "10.250.11.0/24")
	att := mustSetup(t, tm, "full1", Policy{Mode: ModeFull})
	anyPort, _, _, _ := hostServices(t)

	t.Run("public addresses", func(t *testing.T) {
		wantLine(t, att, hp(internetAddr, upTCPPort), "hello", "hello")
		if !udpSent(t, att, hp(internetAddr, upUDPPort), "full-udp") {
			t.Error("UDP to a public address dropped")
		}
		// Port 443 is not proxied in full mode.
		wantRefused(t, att, hp(internetAddr, 443))
	})
	t.Run("metadata, private and host addresses refused", func(t *testing.T) {
		wantRefused(t, att, hp(metadataAddr, upTCPPort))
		wantRefused(t, att, hp(privateAddr, upTCPPort))
		if udpSent(t, att, hp(metadataAddr, upUDPPort), "metadata-udp") {
			t.Error("UDP to the metadata address got through")
		}
		for _, a := range hostAddrs(t) {
			wantRefused(t, att, hp(a, anyPort))
		}
	})
	t.Run("DNS goes to the resolver", func(t *testing.T) {
		if got, err := udpExchange(att, hp(internetAddr, 53), "q"); err != nil || got != "dns" {
			t.Errorf("DNS: %q, %v", got, err)
		}
	})
	t.Run("allow and deny entries", func(t *testing.T) {
		mustUpdate(t, tm, "full1", Policy{Mode: ModeFull, Allow: []string{"10.99.0.1"}})
		wantLine(t, att, hp(privateAddr, upTCPPort), "hi", "hi")
		wantRefused(t, att, hp(metadataAddr, upTCPPort))

		mustUpdate(t, tm, "full1", Policy{Mode: ModeFull, Deny: []string{"198.19.1.1:8080"}})
		wantRefused(t, att, hp(internetAddr, upTCPPort))
		if !udpSent(t, att, hp(internetAddr, upUDPPort), "other-port") {
			t.Error("port deny entry blocked another port")
		}
		wantRefused(t, att, hp(privateAddr, upTCPPort))
	})
}

// TestRootInsideCannotBypass: the test has every capability inside the
// sandbox's namespace (more than a sandbox's root has) and still gets
// nowhere by changing its own side.
func TestRootInsideCannotBypass(t *testing.T) {
	tm := newTestManager(t, "10.250.13.0/24")
	att := mustSetup(t, tm, "spoof1", Policy{Mode: ModeFull})
	wantLine(t, att, hp(internetAddr, upTCPPort), "ok", "ok") // also resolves the gateway
	spoofed := netip.MustParseAddr("10.250.13.77")            // another address of the pool
	err := inPath(att.NetnsPath, func() error {
		eth, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		return netlink.AddrAdd(eth, addr4(spoofed, 32))
	})
	if err != nil {
		t.Fatal(err)
	}
	env.drainUDP()
	err = inPath(att.NetnsPath, func() error {
		c, err := net.DialUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(spoofed, 0)),
			net.UDPAddrFromAddrPort(netip.AddrPortFrom(internetAddr, upUDPPort)))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("spoofed"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-env.udp:
		t.Errorf("spoofed packet got through: %q", got)
	case <-time.After(probeTimeout):
	}
	// The real address still works.
	inPath(att.NetnsPath, func() error {
		eth, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		return netlink.AddrDel(eth, addr4(spoofed, 32))
	})
	wantLine(t, att, hp(internetAddr, upTCPPort), "ok", "ok")
}

func TestUpdateCutsConnections(t *testing.T) {
	tm := newTestManager(t, "10.250.14.0/24")
	att := mustSetup(t, tm, "cut1", Policy{Mode: ModeFull})

	// stream opens a connection on which the upstream sends a byte every
	// 20ms.
	stream := func() (net.Conn, *upConn) {
		c, err := dial(att, "tcp4", hp(internetAddr, upTCPPort))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, "stream\n"); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := c.Read(make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		uc := env.lastConn()
		if uc == nil {
			t.Fatal("upstream saw no connection")
		}
		return c, uc
	}
	// alive reports whether c keeps receiving for a while.
	alive := func(c net.Conn) bool {
		buf := make([]byte, 64)
		until := time.Now().Add(200 * time.Millisecond)
		for time.Now().Before(until) {
			c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			if _, err := c.Read(buf); err != nil {
				return false
			}
		}
		return true
	}

	c, uc := stream()
	// A change that still allows the connection leaves it alone.
	mustUpdate(t, tm, "cut1", Policy{Mode: ModeFull, Deny: []string{"203.0.113.0/24"}, Allow: []string{"10.99.0.0/16"}})
	if !alive(c) {
		t.Fatal("allowed connection cut by an unrelated update")
	}
	select {
	case err := <-uc.done:
		t.Fatalf("upstream end closed: %v", err)
	default:
	}

	// A change that forbids it cuts both ends within a second.
	start := time.Now()
	mustUpdate(t, tm, "cut1", Policy{Mode: ModeAllowlist, Allow: []string{"pypi.org"}})
	deadline := start.Add(time.Second)
	c.SetDeadline(deadline)
	var cerr error
	buf := make([]byte, 64)
	for cerr == nil {
		if _, cerr = c.Write([]byte("x\n")); cerr == nil {
			_, cerr = c.Read(buf)
		}
	}
	if errors.Is(cerr, os.ErrDeadlineExceeded) {
		t.Errorf("sandbox end still open after 1s")
	} else {
		t.Logf("sandbox end: %v after %v", cerr, time.Since(start))
	}
	select {
	case err := <-uc.done:
		t.Logf("upstream end: %v after %v", err, time.Since(start))
	case <-time.After(time.Until(deadline)):
		t.Errorf("upstream end still open after 1s")
	}
	// And a new connection is refused.
	wantRefused(t, att, hp(internetAddr, upTCPPort))
}
