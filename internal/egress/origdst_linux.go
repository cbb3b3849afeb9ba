package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ip6tSOOriginalDst is IP6T_SO_ORIGINAL_DST from linux/netfilter_ipv6/ip6_tables.h.
const ip6tSOOriginalDst = 80

// OriginalDst returns the destination a connection had before it was
// DNAT'ed to the proxy, from conntrack through the SO_ORIGINAL_DST socket
// option (IP6T_SO_ORIGINAL_DST for IPv6). It fails for connections that
// were not translated.
func OriginalDst(c net.Conn) (netip.AddrPort, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return netip.AddrPort{}, errors.New("egress: original destination: not a socket")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	la, _ := c.LocalAddr().(*net.TCPAddr)
	v4 := la != nil && la.IP.To4() != nil
	var out netip.AddrPort
	var serr error
	err = rc.Control(func(fd uintptr) {
		if v4 {
			// struct sockaddr_in fits the 16 bytes of an ipv6_mreq.
			m, err := unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST)
			if err != nil {
				serr = err
				return
			}
			raw := m.Multiaddr
			port := uint16(raw[2])<<8 | uint16(raw[3])
			out = netip.AddrPortFrom(netip.AddrFrom4([4]byte(raw[4:8])), port)
			return
		}
		// struct sockaddr_in6 fits the 32 bytes of an ip6_mtuinfo.
		m, err := unix.GetsockoptIPv6MTUInfo(int(fd), unix.SOL_IPV6, ip6tSOOriginalDst)
		if err != nil {
			serr = err
			return
		}
		pb := (*[2]byte)(unsafe.Pointer(&m.Addr.Port))
		port := uint16(pb[0])<<8 | uint16(pb[1])
		out = netip.AddrPortFrom(netip.AddrFrom16(m.Addr.Addr).Unmap(), port)
	})
	if err != nil {
		return netip.AddrPort{}, err
	}
	if serr != nil {
		return netip.AddrPort{}, fmt.Errorf("egress: original destination: %w", serr)
	}
	return out, nil
}
