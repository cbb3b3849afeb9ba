package network

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// flowFilter selects conntrack entries to delete.
type flowFilter func(f *netlink.ConntrackFlow) bool

func addrOf(ip []byte) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// Kernel-side conntrack dump filtering (Linux 5.8 and later; older kernels
// ignore the attribute and dump everything, which the filter functions
// then sift): constants from nf_conntrack_netlink.c and
// uapi/linux/netfilter/nfnetlink_conntrack.h.
const (
	ctaFilter          = 25
	ctaFilterOrigFlags = 1
	ctaFilterFIPSrc    = 1 << 0
	ctaFilterFIPDst    = 1 << 1
	ctaIPv4Src         = 1
	ctaIPv4Dst         = 2
	ctaProtoNum        = 1
	ctaProtoSrcPort    = 2
	ctaProtoDstPort    = 3
)

// deleteFlows deletes the IPv4 conntrack entries whose original source
// (src true) or destination is a and that fn selects, and returns how many
// it deleted. Only those entries are dumped: a host's table can hold
// hundreds of thousands.
func deleteFlows(a netip.Addr, src bool, fn flowFilter) (uint, error) {
	var raw [][]byte
	var err error
	for range 3 { // a dump interrupted by concurrent changes is retried
		if raw, err = dumpFlows(a, src); !errors.Is(err, nl.ErrDumpInterrupted) {
			break
		}
	}
	if err != nil && !errors.Is(err, nl.ErrDumpInterrupted) {
		return 0, fmt.Errorf("conntrack dump: %w", err)
	}
	var n uint
	var errs []error
	for _, msg := range raw {
		f, ok := parseFlow(msg)
		if !ok {
			continue
		}
		if orig := addrOf(f.Forward.SrcIP); (src && orig != a) || (!src && addrOf(f.Forward.DstIP) != a) || !fn(f) {
			continue
		}
		req := nl.NewNetlinkRequest(unix.NFNL_SUBSYS_CTNETLINK<<8|nl.IPCTNL_MSG_CT_DELETE, unix.NLM_F_ACK)
		req.AddData(&nl.Nfgenmsg{NfgenFamily: unix.AF_INET, Version: nl.NFNETLINK_V0})
		req.AddRawData(msg[nl.SizeofNfgenmsg:]) // the tuples, zone and id identify the entry
		if _, err := req.Execute(unix.NETLINK_NETFILTER, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, err)
			continue
		}
		n++
	}
	if len(errs) > 0 {
		return n, fmt.Errorf("conntrack delete: %d failed: %w", len(errs), errs[0])
	}
	return n, err
}

func dumpFlows(a netip.Addr, src bool) ([][]byte, error) {
	req := nl.NewNetlinkRequest(unix.NFNL_SUBSYS_CTNETLINK<<8|nl.IPCTNL_MSG_CT_GET, unix.NLM_F_DUMP)
	req.AddData(&nl.Nfgenmsg{NfgenFamily: unix.AF_INET, Version: nl.NFNETLINK_V0})
	ipAttr, flag := ctaIPv4Src, uint32(ctaFilterFIPSrc)
	if !src {
		ipAttr, flag = ctaIPv4Dst, ctaFilterFIPDst
	}
	tuple := nl.NewRtAttr(unix.NLA_F_NESTED|nl.CTA_TUPLE_ORIG, nil)
	ip := tuple.AddRtAttr(unix.NLA_F_NESTED|nl.CTA_TUPLE_IP, nil)
	ip.AddRtAttr(ipAttr, a.AsSlice())
	filter := nl.NewRtAttr(unix.NLA_F_NESTED|ctaFilter, nil)
	filter.AddRtAttr(ctaFilterOrigFlags, nl.Uint32Attr(flag))
	req.AddData(tuple)
	req.AddData(filter)
	return req.Execute(unix.NETLINK_NETFILTER, 0)
}

// parseFlow reads the tuples of a conntrack message (nfgenmsg and
// attributes).
func parseFlow(msg []byte) (*netlink.ConntrackFlow, bool) {
	if len(msg) < nl.SizeofNfgenmsg {
		return nil, false
	}
	attrs, err := nl.ParseRouteAttr(msg[nl.SizeofNfgenmsg:])
	if err != nil {
		return nil, false
	}
	f := &netlink.ConntrackFlow{FamilyType: msg[0]}
	for _, at := range attrs {
		var t *netlink.IPTuple
		switch at.Attr.Type &^ unix.NLA_F_NESTED {
		case nl.CTA_TUPLE_ORIG:
			t = &f.Forward
		case nl.CTA_TUPLE_REPLY:
			t = &f.Reverse
		default:
			continue
		}
		if !parseTuple(at.Value, t) {
			return nil, false
		}
	}
	return f, f.Forward.SrcIP != nil && f.Reverse.SrcIP != nil
}

func parseTuple(b []byte, t *netlink.IPTuple) bool {
	attrs, err := nl.ParseRouteAttr(b)
	if err != nil {
		return false
	}
	for _, at := range attrs {
		inner, err := nl.ParseRouteAttr(at.Value)
		if err != nil {
			return false
		}
		switch at.Attr.Type &^ unix.NLA_F_NESTED {
		case nl.CTA_TUPLE_IP:
			for _, x := range inner {
				switch x.Attr.Type {
				case ctaIPv4Src:
					t.SrcIP = net.IP(x.Value)
				case ctaIPv4Dst:
					t.DstIP = net.IP(x.Value)
				}
			}
		case nl.CTA_TUPLE_PROTO:
			for _, x := range inner {
				switch {
				case x.Attr.Type == ctaProtoNum && len(x.Value) >= 1:
					t.Protocol = x.Value[0]
				case x.Attr.Type == ctaProtoSrcPort && len(x.Value) >= 2:
					t.SrcPort = binary.BigEndian.Uint16(x.Value)
				case x.Attr.Type == ctaProtoDstPort && len(x.Value) >= 2:
					t.DstPort = binary.BigEndian.Uint16(x.Value)
				}
			}
		}
	}
	return true
}

// allFlows selects every entry.
func allFlows(*netlink.ConntrackFlow) bool { return true }

// deleteFlowsOf deletes every entry with sandbox address a at either end
// of the original direction.
func deleteFlowsOf(a netip.Addr) error {
	_, err1 := deleteFlows(a, true, allFlows)
	_, err2 := deleteFlows(a, false, allFlows)
	return errors.Join(err1, err2)
}

// disallowedFlows selects the connections the sandbox of l opened that
// pol would not let through the way they go now: the rules judge later
// packets of forwarded connections anyway, but NAT is decided on the first
// packet only, so a connection that now must go elsewhere (to or away from
// the proxy) or nowhere needs its entry gone. A connection still allowed,
// the same way, keeps its entry and lives on.
func (m *Manager) disallowedFlows(l *lease, pol *compiled) flowFilter {
	return func(f *netlink.ConntrackFlow) bool {
		if addrOf(f.Forward.SrcIP) != l.SandboxAddr {
			return false // opened by the host (or not ours)
		}
		proto, dst, port := f.Forward.Protocol, addrOf(f.Forward.DstIP), f.Forward.DstPort
		// Where does it go now?
		was := actForward
		if addrOf(f.Reverse.SrcIP) == l.HostAddr {
			switch {
			case proto == protoTCP && f.Reverse.SrcPort == m.cfg.ProxyPort:
				was = actProxy
			case (proto == protoTCP || proto == protoUDP) && f.Reverse.SrcPort == m.cfg.DNSPort:
				was = actDNS
			default:
				return true
			}
		}
		// Where would it go under pol? The host's address is never
		// forwarded to, but the proxy and resolver ports on it are open.
		now := pol.route(proto, dst, port)
		if dst == l.HostAddr && now == actForward {
			now = actDrop
		}
		if dst == l.HostAddr && now == actDrop && pol.mode != ModeOff {
			switch {
			case proto == protoTCP && port == m.cfg.ProxyPort:
				now = actProxy
			case (proto == protoTCP || proto == protoUDP) && port == m.cfg.DNSPort:
				now = actDNS
			}
		}
		return now == actDrop || now != was
	}
}
