//go:build !linux

package egress

import (
	"errors"
	"net"
	"net/netip"
)

// OriginalDst is only available on Linux.
func OriginalDst(c net.Conn) (netip.AddrPort, error) {
	return netip.AddrPort{}, errors.New("egress: original destination: only on linux")
}
