package network

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// links lists the links of the namespace at path.
func links(t *testing.T, path string) []string {
	t.Helper()
	var names []string
	err := inPath(path, func() error {
		ls, err := netlink.LinkList()
		for _, l := range ls {
			names = append(names, l.Attrs().Name)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestOnOff: an offline namespace holds only lo; Update attaches it
// (off → full/allowlist) and detaches it (→ off) as often as asked, and a
// detached namespace stays cut off whatever is done inside it.
func TestOnOff(t *testing.T) {
	tm := newTestManager(t, "10.250.12.0/24")
	att := mustSetup(t, tm, "off1", Policy{Mode: ModeOff})
	if got := links(t, att.NetnsPath); len(got) != 1 || got[0] != "lo" {
		t.Fatalf("offline namespace links: %v, want [lo]", got)
	}
	if att.HostAddr.IsValid() || !att.Nameserver.IsValid() {
		t.Errorf("offline attachment: host %v nameserver %v", att.HostAddr, att.Nameserver)
	}
	wantRefused(t, att, hp(internetAddr, upTCPPort))
	if got, err := udpExchange(att, hp(internetAddr, 53), "q"); err == nil {
		t.Errorf("DNS answered offline: %q", got)
	}
	if err := tm.Update(t.Context(), "off1", Policy{Mode: ModeOff}); err != nil {
		t.Errorf("off → off: %v", err)
	}

	// On: eth0 appears in the same namespace.
	mustUpdate(t, tm, "off1", Policy{Mode: ModeFull})
	wantLine(t, att, hp(internetAddr, upTCPPort), "on", "on")
	c, err := dial(att, "tcp4", hp(internetAddr, upTCPPort))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr, ok := tm.Policy("off1")
	if !ok || addr.Mode != ModeFull {
		t.Fatalf("policy after on: %+v %v", addr, ok)
	}

	// Off: the link is gone, the open connection is dead, nothing new gets out.
	mustUpdate(t, tm, "off1", Policy{Mode: ModeOff})
	if got := links(t, att.NetnsPath); len(got) != 1 || got[0] != "lo" {
		t.Errorf("links after off: %v, want [lo]", got)
	}
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("x\n")); err == nil {
		if _, err = c.Read(make([]byte, 8)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("connection still open after off: %v", err)
		}
	}
	wantRefused(t, att, hp(internetAddr, upTCPPort))
	if _, ok := tm.Policy("off1"); ok {
		t.Error("detached sandbox still has a policy")
	}
	if _, err := os.Stat(tm.leasePath("off1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lease after off: %v", err)
	}

	// Everything inside (more than a sandbox's root may: full capabilities
	// in the namespace) gets nowhere: no link leads out of it.
	err = inPath(att.NetnsPath, func() error {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: "eth1"}
		if err := netlink.LinkAdd(veth); err != nil {
			return err
		}
		eth, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		netlink.AddrAdd(eth, addr4(att.Nameserver.Next(), 30))
		netlink.LinkSetUp(eth)
		if p, err := netlink.LinkByName("eth1"); err == nil {
			netlink.LinkSetUp(p)
		}
		return netlink.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Dst: &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}})
	})
	if err != nil {
		t.Logf("inside: %v", err)
	}
	wantRefused(t, att, hp(internetAddr, upTCPPort))
	inPath(att.NetnsPath, func() error {
		if l, err := netlink.LinkByName("eth0"); err == nil {
			return netlink.LinkDel(l)
		}
		return nil
	})

	// And on again, in allowlist mode this time.
	mustUpdate(t, tm, "off1", Policy{Mode: ModeAllowlist, Allow: []string{internetAddr.String()}})
	wantLine(t, att, hp(internetAddr, upTCPPort), "again", "again")
	if err := tm.Teardown(t.Context(), "off1"); err != nil {
		t.Fatal(err)
	}
	if err := tm.Update(t.Context(), "off1", Policy{Mode: ModeFull}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Update after Teardown: %v, want ErrNotFound", err)
	}
}
