package network

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// sandboxIface is the name of the sandbox's end of the veth pair.
const sandboxIface = "eth0"

// ifaceName is the host-side veth name of sandbox id: "pd" and 10 hex
// digits of a hash of the table and the id, so it fits IFNAMSIZ, is the
// same after a restart and differs between daemons.
func (m *Manager) ifaceName(id string) string {
	h := sha256.Sum256([]byte(m.cfg.Table + "\x00" + id))
	return "pd" + hex.EncodeToString(h[:5])
}

// ifaceAlias is the host-side veth's alias, through which List finds veths
// whose lease is lost.
func (m *Manager) ifaceAlias(id string) string { return m.aliasPrefix() + id }

func (m *Manager) aliasPrefix() string { return "paddock:" + m.cfg.Table + ":" }

func ipNet(a netip.Addr, bits int) *net.IPNet {
	return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(bits, 32)}
}

// createVeth creates the veth pair of l: the host side gets HostAddr/30,
// the other end is created inside the namespace at nsPath as eth0 with
// SandboxAddr/30 and a default route via HostAddr.
func (m *Manager) createVeth(l *lease, nsPath string) (retErr error) {
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return fmt.Errorf("open netns: %w", err)
	}
	defer ns.Close()
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: l.Iface},
		PeerName:      sandboxIface,
		PeerNamespace: netlink.NsFd(int(ns)),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("add veth %s: %w", l.Iface, err)
	}
	defer func() {
		if retErr != nil {
			netlink.LinkDel(veth)
		}
	}()
	host, err := netlink.LinkByName(l.Iface)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetAlias(host, m.ifaceAlias(l.ID)); err != nil {
		return fmt.Errorf("set alias: %w", err)
	}
	// No IPv6 on the host side: nothing but the sandbox's IPv4 traffic
	// crosses the pair. Strict reverse-path filtering backs the rules'
	// source address check.
	for k, v := range map[string]string{
		"/proc/sys/net/ipv6/conf/" + l.Iface + "/disable_ipv6": "1",
		"/proc/sys/net/ipv4/conf/" + l.Iface + "/rp_filter":    "1",
	} {
		if err := os.WriteFile(k, []byte(v), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("sysctl %s: %w", k, err)
		}
	}
	if err := netlink.AddrAdd(host, &netlink.Addr{IPNet: ipNet(l.HostAddr, 30)}); err != nil {
		return fmt.Errorf("address %s: %w", l.Iface, err)
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return fmt.Errorf("up %s: %w", l.Iface, err)
	}

	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netlink in netns: %w", err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("up lo: %w", err)
	}
	eth, err := h.LinkByName(sandboxIface)
	if err != nil {
		return err
	}
	if err := h.AddrAdd(eth, &netlink.Addr{IPNet: ipNet(l.SandboxAddr, 30)}); err != nil {
		return fmt.Errorf("address eth0: %w", err)
	}
	if err := h.LinkSetUp(eth); err != nil {
		return fmt.Errorf("up eth0: %w", err)
	}
	if err := h.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: l.HostAddr.AsSlice()}); err != nil {
		return fmt.Errorf("default route: %w", err)
	}
	return nil
}

// deleteVeth deletes the veth pair whose host side is name (and with it
// the sandbox side). A missing link is not an error.
func deleteVeth(name string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		if _, ok := err.(netlink.LinkNotFoundError); ok {
			return nil
		}
		return err
	}
	if err := netlink.LinkDel(l); err != nil {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	return nil
}

// vethHostAddr returns the IPv4 address of the host-side veth name.
func vethHostAddr(name string) (netip.Addr, bool) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return netip.Addr{}, false
	}
	addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
	if err != nil || len(addrs) == 0 {
		return netip.Addr{}, false
	}
	a, ok := netip.AddrFromSlice(addrs[0].IP.To4())
	return a, ok
}

// vethIDs lists the ids of this table's veths, found by alias.
func (m *Manager) vethIDs() ([]string, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, l := range links {
		if id, ok := strings.CutPrefix(l.Attrs().Alias, m.aliasPrefix()); ok {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// checkPoolFree fails if an address of a host interface (other than this
// Manager's veths) falls in the pool.
func (m *Manager) checkPoolFree() error {
	links, err := netlink.LinkList()
	if err != nil {
		return err
	}
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Alias, m.aliasPrefix()) {
			continue
		}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			ip, ok := netip.AddrFromSlice(a.IP.To4())
			ones, _ := a.Mask.Size()
			if ok && netip.PrefixFrom(ip, ones).Masked().Overlaps(m.cfg.Pool) {
				return fmt.Errorf("pool %s overlaps %s on %s", m.cfg.Pool, a.IPNet, l.Attrs().Name)
			}
		}
	}
	return nil
}
