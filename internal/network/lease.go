package network

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/paddock-sandbox/paddock/internal/store"
)

// lease is what the Manager persists per sandbox in
// <StateDir>/network/<id>.json: the addresses (so a restarted daemon keeps
// them and the proxy can still map a source address to its sandbox) and
// the policy in force.
type lease struct {
	ID          string     `json:"id"`
	Iface       string     `json:"iface"`
	HostAddr    netip.Addr `json:"host_addr"`
	SandboxAddr netip.Addr `json:"sandbox_addr"`
	Policy      Policy     `json:"policy"`
}

// subnet is the /30 that holds l's two addresses.
func (l *lease) subnet() netip.Prefix { return netip.PrefixFrom(l.HostAddr, 30).Masked() }

func (m *Manager) leaseDir() string           { return filepath.Join(m.cfg.StateDir, "network") }
func (m *Manager) leasePath(id string) string { return filepath.Join(m.leaseDir(), id+".json") }
func (m *Manager) netnsPath(id string) string { return m.pins.path(id) }

// writeLease persists l atomically.
func (m *Manager) writeLease(l *lease) error {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	if err := store.WriteFileAtomic(m.leasePath(l.ID), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write lease %s: %w", l.ID, err)
	}
	return nil
}

func (m *Manager) readLease(id string) (*lease, error) {
	b, err := os.ReadFile(m.leasePath(id))
	if err != nil {
		return nil, err
	}
	var l lease
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("lease %s: %w", id, err)
	}
	if l.ID != id || !l.HostAddr.Is4() || !l.SandboxAddr.Is4() {
		return nil, fmt.Errorf("lease %s: malformed", id)
	}
	return &l, nil
}

// leaseIDs lists the ids that have a lease file.
func (m *Manager) leaseIDs() ([]string, error) {
	ents, err := os.ReadDir(m.leaseDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && validID(id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// allocate picks the lowest free /30 of the pool. Called with m.mu held.
func (m *Manager) allocate() (netip.Prefix, error) {
	base := m.cfg.Pool.Addr().As4()
	start := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	for i := range m.slots {
		v := start + uint32(i)*4
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), 30)
		if _, used := m.subnets[p]; !used {
			return p, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("%w: all %d subnets of %s are in use", ErrPoolExhausted, m.slots, m.cfg.Pool)
}
