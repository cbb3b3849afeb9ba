package network

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Names of the table-wide objects (see the package documentation).
const (
	chainPrerouting  = "prerouting"
	chainInput       = "input"
	chainForward     = "forward"
	chainPostrouting = "postrouting"
	setIfaces        = "ifaces"  // ifname: every sandbox's host-side veth
	mapPre           = "pre"     // ifname → jump pre-<id>
	mapIn            = "in"      // ifname → jump in-<id>
	mapFwd           = "fwd"     // ifname → jump fwd-<id>
	setBlocked       = "blocked" // ipv4 ranges full mode never reaches
)

// Prefixes of the per-sandbox objects; the id follows.
const (
	prefixPre   = "pre-"
	prefixIn    = "in-"
	prefixFwd   = "fwd-"
	prefixAllow = "allow-"
	prefixDeny  = "deny-"
)

var (
	sandboxChainPrefixes = []string{prefixPre, prefixIn, prefixFwd}
	sandboxSetPrefixes   = []string{prefixAllow, prefixDeny}
)

func (m *Manager) table() *nftables.Table {
	return &nftables.Table{Name: m.cfg.Table, Family: nftables.TableFamilyINet}
}

// batch runs fn on a fresh connection and sends what it queued as one
// transaction: the kernel applies all of it or none. Batches are
// serialized (the nftables package allocates set ids from a global
// counter).
func (m *Manager) batch(fn func(c *nftables.Conn) error) error {
	m.nftMu.Lock()
	defer m.nftMu.Unlock()
	c, err := nftables.New()
	if err != nil {
		return err
	}
	if err := fn(c); err != nil {
		return err
	}
	return c.Flush()
}

// query runs fn, which only reads, on a fresh connection.
func (m *Manager) query(fn func(c *nftables.Conn) error) error {
	m.nftMu.Lock()
	defer m.nftMu.Unlock()
	c, err := nftables.New()
	if err != nil {
		return err
	}
	return fn(c)
}

// --- expression helpers (register 1 unless noted) ---

func ifname(s string) []byte {
	b := make([]byte, 16)
	copy(b, s)
	return b
}

func be16(v uint16) []byte { return binaryutil.BigEndian.PutUint16(v) }

func loadMeta(k expr.MetaKey) expr.Any { return &expr.Meta{Key: k, Register: 1} }

func cmp(op expr.CmpOp, data []byte) expr.Any {
	return &expr.Cmp{Op: op, Register: 1, Data: data}
}

func nfproto(p byte) []expr.Any {
	return []expr.Any{loadMeta(expr.MetaKeyNFPROTO), cmp(expr.CmpOpEq, []byte{p})}
}

func notNfproto(p byte) []expr.Any {
	return []expr.Any{loadMeta(expr.MetaKeyNFPROTO), cmp(expr.CmpOpNeq, []byte{p})}
}

func l4proto(p byte) []expr.Any {
	return []expr.Any{loadMeta(expr.MetaKeyL4PROTO), cmp(expr.CmpOpEq, []byte{p})}
}

func dport(p uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		cmp(expr.CmpOpEq, be16(p)),
	}
}

func loadAddr(offset uint32) expr.Any {
	return &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4}
}

func saddrNeq(a netip.Addr) []expr.Any {
	b := a.As4()
	return []expr.Any{loadAddr(12), cmp(expr.CmpOpNeq, b[:])}
}

func daddrEq(a netip.Addr) []expr.Any {
	b := a.As4()
	return []expr.Any{loadAddr(16), cmp(expr.CmpOpEq, b[:])}
}

func daddrIn(p netip.Prefix) []expr.Any {
	mask := net4Mask(p.Bits())
	b := p.Masked().Addr().As4()
	return []expr.Any{
		loadAddr(16),
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: []byte{0, 0, 0, 0}},
		cmp(expr.CmpOpEq, b[:]),
	}
}

func net4Mask(bits int) []byte {
	v := ^uint32(0) << (32 - bits)
	if bits == 0 {
		v = 0
	}
	return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

func daddrInSet(name string) []expr.Any {
	return []expr.Any{loadAddr(16), &expr.Lookup{SourceRegister: 1, SetName: name}}
}

func ctEstablished() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
			Xor:  binaryutil.NativeEndian.PutUint32(0)},
		cmp(expr.CmpOpNeq, binaryutil.NativeEndian.PutUint32(0)),
	}
}

func ifIn(key expr.MetaKey, set string) []expr.Any {
	return []expr.Any{loadMeta(key), &expr.Lookup{SourceRegister: 1, SetName: set}}
}

func vmap(key expr.MetaKey, m string) []expr.Any {
	return []expr.Any{loadMeta(key), &expr.Lookup{SourceRegister: 1, SetName: m, DestRegister: 0, IsDestRegSet: true}}
}

func dnat(to netip.Addr, port uint16) []expr.Any {
	b := to.As4()
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: b[:]},
		&expr.Immediate{Register: 2, Data: be16(port)},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true},
	}
}

func verdict(k expr.VerdictKind) expr.Any { return &expr.Verdict{Kind: k} }

func rejectTCP() expr.Any { return &expr.Reject{Type: unix.NFT_REJECT_TCP_RST} }

func rejectOther() expr.Any {
	return &expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED}
}

func cat(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// intervals turns prefixes into the elements of an interval set: merged,
// sorted ranges, each a start element and an end element holding the first
// address after the range (omitted when the range reaches 255.255.255.255).
func intervals(ps []netip.Prefix) []nftables.SetElement {
	type rng struct{ lo, hi uint64 } // hi exclusive
	var rs []rng
	for _, p := range ps {
		b := p.Masked().Addr().As4()
		lo := uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])
		rs = append(rs, rng{lo, lo + 1<<(32-p.Bits())})
	}
	slices.SortFunc(rs, func(a, b rng) int { return int(int64(a.lo) - int64(b.lo)) })
	var merged []rng
	for _, r := range rs {
		if n := len(merged); n > 0 && r.lo <= merged[n-1].hi {
			merged[n-1].hi = max(merged[n-1].hi, r.hi)
			continue
		}
		merged = append(merged, r)
	}
	key := func(v uint64) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }
	var els []nftables.SetElement
	for _, r := range merged {
		els = append(els, nftables.SetElement{Key: key(r.lo)})
		if r.hi <= 0xffffffff {
			els = append(els, nftables.SetElement{Key: key(r.hi), IntervalEnd: true})
		}
	}
	return els
}

func ipv4Set(t *nftables.Table, name string) *nftables.Set {
	return &nftables.Set{Table: t, Name: name, KeyType: nftables.TypeIPAddr, Interval: true}
}

func ifnameSet(t *nftables.Table, name string, isMap bool) *nftables.Set {
	s := &nftables.Set{Table: t, Name: name, KeyType: nftables.TypeIFName}
	if isMap {
		s.IsMap, s.DataType = true, nftables.TypeVerdict
	}
	return s
}

// initTable creates the table, its base chains, sets and maps if they are
// missing and replaces the base chains' rules, in one transaction that
// leaves the per-sandbox chains, sets and map elements of a previous run
// in place.
func (m *Manager) initTable(c *nftables.Conn) error {
	t := c.AddTable(m.table())
	accept := nftables.ChainPolicyAccept
	chain := func(name string, typ nftables.ChainType, hook *nftables.ChainHook, prio *nftables.ChainPriority) *nftables.Chain {
		ch := c.AddChain(&nftables.Chain{Name: name, Table: t, Type: typ, Hooknum: hook, Priority: prio, Policy: &accept})
		c.FlushChain(ch)
		return ch
	}
	pre := chain(chainPrerouting, nftables.ChainTypeNAT, nftables.ChainHookPrerouting, nftables.ChainPriorityNATDest)
	in := chain(chainInput, nftables.ChainTypeFilter, nftables.ChainHookInput, nftables.ChainPriorityFilter)
	fwd := chain(chainForward, nftables.ChainTypeFilter, nftables.ChainHookForward, nftables.ChainPriorityFilter)
	post := chain(chainPostrouting, nftables.ChainTypeNAT, nftables.ChainHookPostrouting, nftables.ChainPriorityNATSource)

	for _, s := range []*nftables.Set{
		ifnameSet(t, setIfaces, false), ifnameSet(t, mapPre, true),
		ifnameSet(t, mapIn, true), ifnameSet(t, mapFwd, true),
	} {
		if err := c.AddSet(s, nil); err != nil {
			return err
		}
	}
	blocked := ipv4Set(t, setBlocked)
	if err := c.AddSet(blocked, nil); err != nil {
		return err
	}
	c.FlushSet(blocked)
	if err := c.SetAddElements(blocked, intervals(blockedRanges)); err != nil {
		return err
	}

	rule := func(ch *nftables.Chain, e []expr.Any) { c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: e}) }
	drop := verdict(expr.VerdictDrop)

	// prerouting: each sandbox's DNAT chain.
	rule(pre, vmap(expr.MetaKeyIIFNAME, mapPre))

	// input: each sandbox's input chain; a veth without one drops. The
	// proxy and DNS ports are reachable from sandboxes and loopback only,
	// whatever address the egress servers listen on.
	rule(in, vmap(expr.MetaKeyIIFNAME, mapIn))
	rule(in, cat(ifIn(expr.MetaKeyIIFNAME, setIfaces), []expr.Any{drop}))
	lo := []expr.Any{loadMeta(expr.MetaKeyIIFNAME), cmp(expr.CmpOpNeq, ifname("lo"))}
	rule(in, cat(lo, l4proto(protoTCP), dport(m.cfg.ProxyPort), []expr.Any{drop}))
	rule(in, cat(lo, l4proto(protoTCP), dport(m.cfg.DNSPort), []expr.Any{drop}))
	rule(in, cat(lo, l4proto(protoUDP), dport(m.cfg.DNSPort), []expr.Any{drop}))

	// forward: into a sandbox only replies; out of a sandbox, its chain.
	rule(fwd, cat(ifIn(expr.MetaKeyOIFNAME, setIfaces), ctEstablished(), []expr.Any{verdict(expr.VerdictAccept)}))
	bothSandboxes := cat(ifIn(expr.MetaKeyOIFNAME, setIfaces), ifIn(expr.MetaKeyIIFNAME, setIfaces))
	rule(fwd, cat(bothSandboxes, l4proto(protoTCP), []expr.Any{rejectTCP()}))
	rule(fwd, cat(bothSandboxes, []expr.Any{rejectOther()}))
	rule(fwd, cat(ifIn(expr.MetaKeyOIFNAME, setIfaces), []expr.Any{drop}))
	rule(fwd, vmap(expr.MetaKeyIIFNAME, mapFwd))
	rule(fwd, cat(ifIn(expr.MetaKeyIIFNAME, setIfaces), []expr.Any{drop}))

	// postrouting: what a sandbox sends out leaves with the host's address.
	rule(post, cat(ifIn(expr.MetaKeyIIFNAME, setIfaces), []expr.Any{&expr.Masq{}}))
	return nil
}

// addSandboxRules queues the creation (if missing) and the complete
// replacement of the chains and sets of lease l, and its map elements. The
// same code sets a sandbox up, updates it and re-applies it after a
// restart.
func (m *Manager) addSandboxRules(c *nftables.Conn, l *lease, pol *compiled) error {
	t := m.table()
	id := l.ID
	chain := func(name string) *nftables.Chain {
		ch := c.AddChain(&nftables.Chain{Name: name + id, Table: t})
		c.FlushChain(ch)
		return ch
	}
	pre, in, fwd := chain(prefixPre), chain(prefixIn), chain(prefixFwd)

	var allowNets, denyNets []netip.Prefix
	var allowPorts, denyPorts []Entry
	for _, e := range pol.allow {
		if e.Port == 0 {
			allowNets = append(allowNets, e.Prefix)
		} else {
			allowPorts = append(allowPorts, e)
		}
	}
	for _, e := range pol.deny {
		if e.Port == 0 {
			denyNets = append(denyNets, e.Prefix)
		} else {
			denyPorts = append(denyPorts, e)
		}
	}
	allowSet, denySet := ipv4Set(t, prefixAllow+id), ipv4Set(t, prefixDeny+id)
	for s, nets := range map[*nftables.Set][]netip.Prefix{allowSet: allowNets, denySet: denyNets} {
		if err := c.AddSet(s, nil); err != nil {
			return err
		}
		c.FlushSet(s)
		if els := intervals(nets); len(els) > 0 {
			if err := c.SetAddElements(s, els); err != nil {
				return err
			}
		}
	}

	rule := func(ch *nftables.Chain, parts ...[]expr.Any) {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: cat(parts...)})
	}
	// refuse rejects what matches: TCP with a reset, the rest with an ICMP
	// administratively-prohibited error, so tools fail at once instead of
	// waiting for a timeout. Nothing gets through either way.
	refuse := func(ch *nftables.Chain, match ...[]expr.Any) {
		rule(ch, cat(match...), l4proto(protoTCP), []expr.Any{rejectTCP()})
		rule(ch, cat(match...), []expr.Any{rejectOther()})
	}
	v := func(k expr.VerdictKind) []expr.Any { return []expr.Any{verdict(k)} }
	accept, drop, ret := v(expr.VerdictAccept), v(expr.VerdictDrop), v(expr.VerdictReturn)
	on := pol.mode != ModeOff

	// pre-<id> (nat, prerouting; sees the first packet of a connection):
	// DNS to the resolver; then, in allowlist mode, the proxied ports of
	// every destination neither denied nor allowed directly to the proxy.
	rule(pre, notNfproto(unix.NFPROTO_IPV4), ret)
	if on {
		for _, p := range []byte{protoUDP, protoTCP} {
			rule(pre, l4proto(p), dport(53), dnat(l.HostAddr, m.cfg.DNSPort))
		}
	}
	if len(pol.ports) > 0 {
		rule(pre, daddrInSet(denySet.Name), ret)
		for _, e := range denyPorts {
			rule(pre, daddrIn(e.Prefix), l4proto(protoTCP), dport(e.Port), ret)
		}
		rule(pre, daddrInSet(allowSet.Name), ret)
		for _, e := range allowPorts {
			rule(pre, daddrIn(e.Prefix), l4proto(protoTCP), dport(e.Port), ret)
		}
		for _, p := range pol.ports {
			rule(pre, l4proto(protoTCP), dport(p), dnat(l.HostAddr, m.cfg.ProxyPort))
		}
	}

	// in-<id> (filter, input: anything addressed to the host): replies to
	// connections the host opened; else only the proxy and the resolver on
	// the sandbox's own host address, from the sandbox's own address.
	rule(in, ctEstablished(), accept)
	rule(in, notNfproto(unix.NFPROTO_IPV4), drop)
	rule(in, saddrNeq(l.SandboxAddr), drop)
	if on {
		rule(in, daddrEq(l.HostAddr), l4proto(protoTCP), dport(m.cfg.ProxyPort), accept)
		rule(in, daddrEq(l.HostAddr), l4proto(protoTCP), dport(m.cfg.DNSPort), accept)
		rule(in, daddrEq(l.HostAddr), l4proto(protoUDP), dport(m.cfg.DNSPort), accept)
	}
	refuse(in)

	// fwd-<id> (filter, forward): every packet of every connection is
	// judged, not only the first, so a rule change applies to established
	// connections at once.
	rule(fwd, notNfproto(unix.NFPROTO_IPV4), drop)
	rule(fwd, saddrNeq(l.SandboxAddr), drop)
	if on {
		refuse(fwd, daddrIn(m.cfg.Pool))
		refuse(fwd, daddrInSet(denySet.Name))
		for _, e := range denyPorts {
			for _, p := range []byte{protoTCP, protoUDP} {
				refuse(fwd, daddrIn(e.Prefix), l4proto(p), dport(e.Port))
			}
		}
		rule(fwd, daddrInSet(allowSet.Name), accept)
		for _, e := range allowPorts {
			for _, p := range []byte{protoTCP, protoUDP} {
				rule(fwd, daddrIn(e.Prefix), l4proto(p), dport(e.Port), accept)
			}
		}
		if pol.mode == ModeFull {
			refuse(fwd, daddrInSet(setBlocked))
			rule(fwd, accept)
		}
	}
	refuse(fwd)

	// Jumps from the base chains.
	key := ifname(l.Iface)
	jump := func(ch *nftables.Chain) []nftables.SetElement {
		return []nftables.SetElement{{Key: key, VerdictData: &expr.Verdict{Kind: expr.VerdictJump, Chain: ch.Name}}}
	}
	for name, ch := range map[string]*nftables.Chain{mapPre: pre, mapIn: in, mapFwd: fwd} {
		if err := c.SetAddElements(ifnameSet(t, name, true), jump(ch)); err != nil {
			return err
		}
	}
	return c.SetAddElements(ifnameSet(t, setIfaces, false), []nftables.SetElement{{Key: key}})
}

// nftState is what exists of this Manager's table.
type nftState struct {
	table      bool
	chains     map[string]bool
	sets       map[string]bool
	mapEntries map[string]map[string]bool // map or set name → iface names present
}

func (m *Manager) readNFT() (*nftState, error) {
	st := &nftState{chains: map[string]bool{}, sets: map[string]bool{}, mapEntries: map[string]map[string]bool{}}
	err := m.query(func(c *nftables.Conn) error {
		tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
		if err != nil {
			return err
		}
		for _, tb := range tables {
			st.table = st.table || tb.Name == m.cfg.Table
		}
		if !st.table {
			return nil
		}
		chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
		if err != nil {
			return err
		}
		for _, ch := range chains {
			if ch.Table.Name == m.cfg.Table {
				st.chains[ch.Name] = true
			}
		}
		sets, err := c.GetSets(m.table())
		if err != nil {
			return err
		}
		for _, s := range sets {
			st.sets[s.Name] = true
		}
		for _, name := range []string{setIfaces, mapPre, mapIn, mapFwd} {
			if !st.sets[name] {
				continue
			}
			els, err := c.GetSetElements(ifnameSet(m.table(), name, name != setIfaces))
			if err != nil {
				return err
			}
			names := map[string]bool{}
			for _, e := range els {
				names[strings.TrimRight(string(e.Key), "\x00")] = true
			}
			st.mapEntries[name] = names
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read nftables: %w", err)
	}
	return st, nil
}

// ids lists the sandbox ids that have a chain or a set in the table.
func (st *nftState) ids() []string {
	var ids []string
	add := func(name string, prefixes []string) {
		for _, p := range prefixes {
			if id, ok := strings.CutPrefix(name, p); ok && validID(id) {
				ids = append(ids, id)
			}
		}
	}
	for name := range st.chains {
		add(name, sandboxChainPrefixes)
	}
	for name := range st.sets {
		add(name, sandboxSetPrefixes)
	}
	return ids
}

// removeSandboxRules deletes whatever exists of sandbox id's map
// elements, chains and sets, in one transaction.
func (m *Manager) removeSandboxRules(id, iface string) error {
	st, err := m.readNFT()
	if err != nil || !st.table {
		return err
	}
	t := m.table()
	err = m.batch(func(c *nftables.Conn) error {
		for _, name := range []string{mapPre, mapIn, mapFwd, setIfaces} {
			if !st.mapEntries[name][iface] {
				continue
			}
			s := ifnameSet(t, name, name != setIfaces)
			if err := c.SetDeleteElements(s, []nftables.SetElement{{Key: ifname(iface)}}); err != nil {
				return err
			}
		}
		for _, p := range sandboxChainPrefixes {
			if st.chains[p+id] {
				ch := &nftables.Chain{Name: p + id, Table: t}
				c.FlushChain(ch)
				c.DelChain(ch)
			}
		}
		for _, p := range sandboxSetPrefixes {
			if st.sets[p+id] {
				c.DelSet(ipv4Set(t, p+id))
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("remove rules of %s: %w", id, err)
	}
	return nil
}
