package network

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Nameserver is the address sandboxes name in resolv.conf: the first host
// address of the pool. Port 53 to any address is redirected to the
// daemon's resolver on the sandbox's own host side, so the address only
// has to be routed out of the sandbox, which it is whenever the sandbox is
// attached; offline, lookups fail at once (no route).
func (m *Manager) Nameserver() netip.Addr { return m.cfg.Pool.Addr().Next() }

// connect attaches the namespace at nsPath to the host for sandbox id
// with policy p (compiled as pol): it leases a /30 of the pool, persists
// the lease, installs the rules and only then creates the veth pair, whose
// sandbox end appears inside the namespace as eth0. Called with id's lock
// held; the caller rolls back on error (teardown or disconnect).
func (m *Manager) connect(id string, p Policy, pol *compiled, nsPath string) (*lease, error) {
	m.mu.Lock()
	if _, ok := m.leases[id]; ok {
		m.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrExists, id)
	}
	subnet, err := m.allocate()
	if err != nil {
		m.mu.Unlock()
		return nil, err
	}
	l := &lease{
		ID:          id,
		Iface:       m.ifaceName(id),
		HostAddr:    subnet.Addr().Next(),
		SandboxAddr: subnet.Addr().Next().Next(),
		Policy:      p,
	}
	m.remember(l)
	m.mu.Unlock()
	if err := m.writeLease(l); err != nil {
		return l, err
	}
	if err := m.batch(func(c *nftables.Conn) error { return m.addSandboxRules(c, l, pol) }); err != nil {
		return l, fmt.Errorf("nftables: %w", err)
	}
	// A previous sandbox on the same addresses may have left entries.
	if err := deleteFlowsOf(l.SandboxAddr); err != nil {
		m.log.Warn("network: conntrack flush", "id", id, "err", err)
	}
	if err := m.createVeth(l, nsPath); err != nil {
		return l, err
	}
	m.log.Info("network: attached", "id", id, "mode", pol.mode, "addr", l.SandboxAddr, "iface", l.Iface)
	return l, nil
}

// disconnect detaches sandbox id from the host and keeps its namespace:
// the veth pair goes first (deleted from the host side, so eth0 vanishes
// from the namespace and nothing inside can bring it back: the namespace
// belongs to the host's user namespace and holds no other link to the
// host), then the rules, the conntrack entries and the lease. Called with
// id's lock held; l may be nil.
func (m *Manager) disconnect(id string, l *lease) error {
	iface := m.ifaceName(id)
	if err := deleteVeth(iface); err != nil {
		return err
	}
	if err := m.removeSandboxRules(id, iface); err != nil {
		return err // the lease stays, so List still finds the rules
	}
	var errs []error
	if l != nil {
		if err := deleteFlowsOf(l.SandboxAddr); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(m.leasePath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		m.forget(id)
	}
	return errors.Join(errs...)
}

// switchOnOff handles the Updates that change whether sandbox id is
// attached: mode off detaches an attached sandbox (a no-op for an offline
// one), another mode attaches an offline one. Called with id's lock held;
// old is id's lease, nil when offline.
func (m *Manager) switchOnOff(id string, old *lease, p Policy, pol *compiled) error {
	nsPath := m.netnsPath(id)
	if _, err := os.Lstat(nsPath); err != nil {
		if old == nil {
			return fmt.Errorf("%w: %s", ErrNotFound, id)
		}
	}
	if pol.mode == ModeOff {
		if old == nil {
			return nil
		}
		if err := m.disconnect(id, old); err != nil {
			return fmt.Errorf("network detach %s: %w", id, err)
		}
		n, err := abortConnections(nsPath)
		if err != nil {
			m.log.Warn("network: abort connections", "id", id, "err", err)
		}
		m.log.Info("network: detached", "id", id, "aborted", n)
		return nil
	}
	if _, err := m.connect(id, p, pol, nsPath); err != nil {
		m.mu.RLock()
		l := m.leases[id]
		m.mu.RUnlock()
		if derr := m.disconnect(id, l); derr != nil {
			m.log.Warn("network: rollback incomplete", "id", id, "err", derr)
		}
		return fmt.Errorf("network attach %s: %w", id, err)
	}
	return nil
}

// loUp brings up lo in the namespace at nsPath (an offline sandbox still
// reaches its own services on localhost).
func loUp(nsPath string) error {
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return fmt.Errorf("open netns: %w", err)
	}
	defer ns.Close()
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
	return nil
}

// tcpListen is the TCP_LISTEN state of sock_diag.
const tcpListen = 10

// abortConnections aborts, inside the namespace at nsPath, every TCP
// socket connected to an address off the namespace's loopback
// (SOCK_DESTROY, as `ss -K` does): programs see ECONNABORTED at once
// instead of waiting for retransmissions to time out on a link that no
// longer exists. Listening sockets and connections over lo stay. It
// returns how many it aborted. The work runs on a thread of its own that
// enters the namespace and ends with it (onOwnThread).
func abortConnections(nsPath string) (int, error) {
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	onOwnThread(func() {
		n, err := func() (int, error) {
			ns, err := netns.GetFromPath(nsPath)
			if err != nil {
				return 0, err
			}
			defer ns.Close()
			if err := netns.Set(ns); err != nil {
				return 0, err
			}
			socks, err := netlink.SocketDiagTCP(unix.AF_INET)
			if err != nil {
				return 0, fmt.Errorf("sock_diag: %w", err)
			}
			n := 0
			var errs []error
			for _, s := range socks {
				if s.State == tcpListen || s.ID.Destination.IsLoopback() || s.ID.Destination.IsUnspecified() {
					continue
				}
				local := &net.TCPAddr{IP: s.ID.Source, Port: int(s.ID.SourcePort)}
				remote := &net.TCPAddr{IP: s.ID.Destination, Port: int(s.ID.DestinationPort)}
				if err := netlink.SocketDestroy(local, remote); err != nil && !errors.Is(err, unix.ENOENT) {
					errs = append(errs, err)
					continue
				}
				n++
			}
			return n, errors.Join(errs...)
		}()
		done <- result{n, err}
	})
	r := <-done
	return r.n, r.err
}
