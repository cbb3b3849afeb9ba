package network

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"sync"

	"github.com/google/nftables"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// Errors classifying Manager failures.
var (
	// ErrPoolExhausted: every /30 of Config.Pool is leased.
	ErrPoolExhausted = errors.New("sandbox address pool exhausted")
	// ErrExists: Setup of an id that already has a network.
	ErrExists = errors.New("sandbox network already exists")
	// ErrNotFound: Update of an id without a network.
	ErrNotFound = errors.New("sandbox network not found")
	// ErrInvalidID: an id that cannot name files, chains and sets.
	ErrInvalidID = errors.New("invalid sandbox id")
)

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

func validID(id string) bool { return idPattern.MatchString(id) }

// DefaultPool is the address pool used when Config.Pool is unset.
var DefaultPool = netip.MustParsePrefix("10.88.0.0/16")

// Config configures a Manager.
type Config struct {
	// StateDir is the daemon's state directory; the Manager uses its
	// netns.mnt (the pin of the namespace that pins the sandboxes'
	// network namespaces; netns/ is where its root was mounted) and
	// network/ (address leases).
	StateDir string
	// Pool is the IPv4 range sandbox addresses come from, one /30 per
	// sandbox (host side .1, sandbox .2). Default DefaultPool. It must not
	// overlap an address of a host interface.
	Pool netip.Prefix
	// ProxyPort and DNSPort are the host-side ports of the egress proxy
	// (TCP) and the DNS resolver (UDP and TCP). Both servers listen on each
	// sandbox's HostAddr or on 0.0.0.0; the rules let sandboxes and
	// loopback, and nothing else, reach these ports.
	ProxyPort, DNSPort uint16
	// Table is the nftables table (family inet) holding all of this
	// daemon's rules, one per daemon on a host. Default "paddock".
	Table string
	// Refuse, if set, reports whether an Allow address entry is beyond the
	// operator's ceiling (egress.Ceiling); such entries are left out of
	// the rules. The API refuses them in new policies; this keeps a policy
	// stored before the ceiling from opening them.
	Refuse func(netip.Prefix) bool
	// Log receives what the Manager does. Default: discarded.
	Log *slog.Logger
}

// Attachment is how a sandbox is attached to the network.
type Attachment struct {
	ID string
	// NetnsPath is the pinned network namespace the runtime spec must
	// name (specs.LinuxNamespace{Type: "network", Path: NetnsPath}): a
	// /proc/<pid>/task/<tid>/root path into the pin namespace, valid
	// while this Manager runs, so it is used at once, never stored. The
	// spec must then not set net.* sysctls: the sandbox's user namespace
	// does not own this namespace, so the runtime cannot write them
	// (Setup already sets net.ipv4.ping_group_range to all groups).
	NetnsPath string
	// SandboxAddr is the sandbox's address on eth0; HostAddr the host
	// side's, the sandbox's default gateway. Any address works as the
	// sandbox's nameserver (port 53 is redirected to the resolver);
	// HostAddr is the natural choice.
	SandboxAddr, HostAddr netip.Addr
	// HostIface is the host side of the veth pair.
	HostIface string
	// Nameserver is the address for the sandbox's resolv.conf: port 53
	// to any address goes to the daemon's resolver once the sandbox is
	// attached, so one fixed address (Manager.Nameserver) serves every
	// attachment, including one made after an offline start. SandboxAddr,
	// HostAddr and HostIface are zero for an offline namespace.
	Nameserver netip.Addr
}

// Manager sets up, changes and removes sandboxes' network attachments.
// Its methods are safe for concurrent use.
type Manager struct {
	cfg   Config
	log   *slog.Logger
	slots int // number of /30s in the pool

	nftMu sync.Mutex // serializes nftables transactions

	mu      sync.RWMutex
	leases  map[string]*lease
	byAddr  map[netip.Addr]string
	subnets map[netip.Prefix]string
	idLocks map[string]*idLock

	pins *pins // the pin namespace of the sandboxes' network namespaces
}

type idLock struct {
	mu   sync.Mutex
	refs int
}

// lock serializes operations on one id.
func (m *Manager) lock(id string) func() {
	m.mu.Lock()
	l := m.idLocks[id]
	if l == nil {
		l = &idLock{}
		m.idLocks[id] = l
	}
	l.refs++
	m.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		m.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(m.idLocks, id)
		}
		m.mu.Unlock()
	}
}

// New returns a Manager. It enables IPv4 forwarding on the host
// (net.ipv4.ip_forward=1, which sandboxes' traffic needs to leave), creates
// the nftables table and its base chains if missing, reloads the leases of
// a previous run and re-applies their rules, so sandboxes that outlived a
// daemon restart keep their addresses and policy. It does not remove
// anything: see List and Teardown for recovery.
func New(cfg Config) (*Manager, error) {
	if cfg.StateDir == "" {
		return nil, errors.New("network: StateDir is required")
	}
	if cfg.ProxyPort == 0 || cfg.DNSPort == 0 {
		return nil, errors.New("network: ProxyPort and DNSPort are required")
	}
	if !cfg.Pool.IsValid() {
		cfg.Pool = DefaultPool
	}
	if !cfg.Pool.Addr().Is4() || cfg.Pool.Bits() > 30 || cfg.Pool.Bits() < 8 {
		return nil, fmt.Errorf("network: pool %s: want an IPv4 prefix between /8 and /30", cfg.Pool)
	}
	cfg.Pool = cfg.Pool.Masked()
	if cfg.Table == "" {
		cfg.Table = "paddock"
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{
		cfg:     cfg,
		log:     cfg.Log,
		slots:   1 << (30 - cfg.Pool.Bits()),
		leases:  map[string]*lease{},
		byAddr:  map[netip.Addr]string{},
		subnets: map[netip.Prefix]string{},
		idLocks: map[string]*idLock{},
	}
	if err := m.checkPoolFree(); err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	if err := os.MkdirAll(m.leaseDir(), 0o700); err != nil {
		return nil, err
	}
	if err := store.CleanTemps(m.leaseDir(), 0); err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	if err := enableForwarding(); err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}

	ids, err := m.leaseIDs()
	if err != nil {
		return nil, fmt.Errorf("network: leases: %w", err)
	}
	type loaded struct {
		l   *lease
		pol *compiled
	}
	var ok []loaded
	for _, id := range ids {
		l, err := m.readLease(id)
		if err != nil {
			m.log.Warn("network: ignoring unreadable lease", "id", id, "err", err)
			continue
		}
		pol, err := m.compile(l.Policy)
		if err != nil {
			m.log.Warn("network: ignoring lease with invalid policy", "id", id, "err", err)
			continue
		}
		l.Iface = m.ifaceName(id)
		m.remember(l)
		ok = append(ok, loaded{l, pol})
	}
	err = m.batch(func(c *nftables.Conn) error {
		if err := m.initTable(c); err != nil {
			return err
		}
		for _, x := range ok {
			if err := m.addSandboxRules(c, x.l, x.pol); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("network: nftables table %s: %w", cfg.Table, err)
	}
	if m.pins, err = openPins(m.cfg.StateDir); err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	if err := m.migrateHostPins(); err != nil {
		m.pins.stop()
		return nil, fmt.Errorf("network: %w", err)
	}
	m.log.Info("network: ready", "table", cfg.Table, "pool", cfg.Pool, "leases", len(ok))
	return m, nil
}

// enableForwarding sets net.ipv4.ip_forward=1.
func enableForwarding() error {
	const path = "/proc/sys/net/ipv4/ip_forward"
	b, err := os.ReadFile(path)
	if err == nil && len(b) > 0 && b[0] == '1' {
		return nil
	}
	if err := os.WriteFile(path, []byte("1"), 0); err != nil {
		return fmt.Errorf("enable IPv4 forwarding: %w", err)
	}
	return nil
}

// remember records l in memory. Called with m.mu held or before m is
// shared.
func (m *Manager) remember(l *lease) {
	m.leases[l.ID] = l
	m.byAddr[l.SandboxAddr] = l.ID
	m.subnets[l.subnet()] = l.ID
}

func (m *Manager) forget(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l := m.leases[id]; l != nil {
		delete(m.byAddr, l.SandboxAddr)
		delete(m.subnets, l.subnet())
		delete(m.leases, id)
	}
}

// Setup gives sandbox id a pinned network namespace. With a policy of
// mode allowlist or full it is attached to the host at once (see
// connect): a veth pair, a /30 of the pool and the sandbox's rules, which
// are in place before the link comes up. With mode off it holds only lo,
// and Update can attach it later. On error nothing of it is left.
func (m *Manager) Setup(ctx context.Context, id string, p Policy) (att *Attachment, retErr error) {
	if !validID(id) {
		return nil, fmt.Errorf("%w: %q", ErrInvalidID, id)
	}
	pol, err := compile(p)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	unlock := m.lock(id)
	defer unlock()

	// Traces of an earlier network with this id (see List) must be torn
	// down first; Setup does not overwrite them.
	if _, err := os.Lstat(m.netnsPath(id)); err == nil {
		return nil, fmt.Errorf("%w: %s (stale namespace %s)", ErrExists, id, m.netnsPath(id))
	}
	m.mu.RLock()
	_, leased := m.leases[id]
	m.mu.RUnlock()
	if leased {
		return nil, fmt.Errorf("%w: %s", ErrExists, id)
	}
	defer func() {
		if retErr != nil {
			m.mu.RLock()
			l := m.leases[id]
			m.mu.RUnlock()
			if err := m.teardown(id, l); err != nil {
				m.log.Warn("network: rollback incomplete", "id", id, "err", err)
			}
			retErr = fmt.Errorf("network setup %s: %w", id, retErr)
		}
	}()
	nsPath := m.netnsPath(id)
	if err := createNetns(m.pins, id); err != nil {
		return nil, err
	}
	att = &Attachment{ID: id, NetnsPath: nsPath, Nameserver: m.Nameserver()}
	if pol.mode == ModeOff {
		if err := loUp(nsPath); err != nil {
			return nil, err
		}
		m.log.Info("network: set up offline", "id", id)
		return att, nil
	}
	l, err := m.connect(id, p, pol, nsPath)
	if err != nil {
		return nil, err
	}
	att.SandboxAddr, att.HostAddr, att.HostIface = l.SandboxAddr, l.HostAddr, l.Iface
	return att, nil
}

// Update replaces the policy of sandbox id in one nftables transaction,
// then deletes the conntrack entries of the sandbox's connections the new
// policy no longer lets through the way they go, which cuts them. (The
// egress proxy judges the connections it carries itself.) Mode off
// detaches the sandbox (disconnect: its veth pair is deleted from the host
// side, its rules and connections go); another mode attaches an offline
// sandbox's namespace (connect). ErrNotFound: id has no namespace.
func (m *Manager) Update(ctx context.Context, id string, p Policy) error {
	pol, err := m.compile(p)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	unlock := m.lock(id)
	defer unlock()
	m.mu.RLock()
	old := m.leases[id]
	m.mu.RUnlock()
	if old == nil || pol.mode == ModeOff {
		return m.switchOnOff(id, old, p, pol)
	}
	l := *old
	l.Policy = p
	if err := m.batch(func(c *nftables.Conn) error { return m.addSandboxRules(c, &l, pol) }); err != nil {
		return fmt.Errorf("network update %s: nftables: %w", id, err)
	}
	m.mu.Lock()
	m.leases[id] = &l
	m.mu.Unlock()
	n, ferr := deleteFlows(l.SandboxAddr, true, m.disallowedFlows(&l, pol))
	if err := m.writeLease(&l); err != nil {
		return err
	}
	if ferr != nil {
		return fmt.Errorf("network update %s: rules applied, but conntrack flush failed: %w", id, ferr)
	}
	m.log.Info("network: updated", "id", id, "mode", pol.mode, "cut", n)
	return nil
}

// Teardown removes every trace of sandbox id's network: map elements,
// chains and sets, the veth pair, conntrack entries, the pinned namespace
// and the lease. It works on partial state (a crash during Setup, a lost
// lease) and is idempotent.
func (m *Manager) Teardown(ctx context.Context, id string) error {
	if !validID(id) {
		return fmt.Errorf("%w: %q", ErrInvalidID, id)
	}
	unlock := m.lock(id)
	defer unlock()
	m.mu.RLock()
	l := m.leases[id]
	m.mu.RUnlock()
	if l == nil {
		l, _ = m.readLease(id)
	}
	if err := m.teardown(id, l); err != nil {
		return fmt.Errorf("network teardown %s: %w", id, err)
	}
	m.log.Info("network: torn down", "id", id)
	return nil
}

// teardown does Teardown's work; l may be nil.
func (m *Manager) teardown(id string, l *lease) error {
	iface := m.ifaceName(id)
	var sandboxAddr netip.Addr
	if l != nil {
		sandboxAddr = l.SandboxAddr
	} else if host, ok := vethHostAddr(iface); ok {
		sandboxAddr = host.Next()
	}
	// The link goes first: while it exists, the sandbox's traffic must
	// meet its rules.
	var errs []error
	if err := deleteVeth(iface); err != nil {
		errs = append(errs, err)
	} else if err := m.removeSandboxRules(id, iface); err != nil {
		errs = append(errs, err)
	}
	if sandboxAddr.IsValid() {
		if err := deleteFlowsOf(sandboxAddr); err != nil {
			errs = append(errs, err)
		}
	}
	if err := m.pins.unpin(id); err != nil {
		errs = append(errs, err)
	}
	if err := os.Remove(m.leasePath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		m.forget(id)
	}
	return errors.Join(errs...)
}

// List returns, sorted, the ids with any trace of a network: a pinned
// namespace, a lease, a veth (found by its alias) or a chain or set in the
// table. After a restart, the caller tears down those it does not know.
func (m *Manager) List(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	ids, err := m.leaseIDs()
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		seen[id] = true
	}
	pinned, err := m.pins.list()
	if err != nil {
		return nil, err
	}
	for _, id := range pinned {
		if validID(id) {
			seen[id] = true
		}
	}
	ids, err = m.vethIDs()
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		seen[id] = true
	}
	st, err := m.readNFT()
	if err != nil {
		return nil, err
	}
	for _, id := range st.ids() {
		seen[id] = true
	}
	m.mu.RLock()
	for id := range m.leases {
		seen[id] = true
	}
	m.mu.RUnlock()
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	slices.Sort(out)
	return out, nil
}

// SandboxByAddr returns the sandbox whose address is addr: the egress
// proxy and resolver map a connection's source address to its sandbox
// with it.
func (m *Manager) SandboxByAddr(addr netip.Addr) (id string, ok bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	id, ok = m.byAddr[addr.Unmap()]
	return id, ok
}

// Policy returns the policy in force for sandbox id.
func (m *Manager) Policy(id string) (Policy, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	l, ok := m.leases[id]
	if !ok {
		return Policy{}, false
	}
	p := l.Policy
	p.Allow, p.Deny = slices.Clone(p.Allow), slices.Clone(p.Deny)
	return p, true
}
