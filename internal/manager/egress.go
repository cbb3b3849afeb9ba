package manager

import (
	"net/netip"
	"sync"

	"github.com/paddock-sandbox/paddock/internal/egress"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// Egress answers the egress proxy's questions (egress.Config's Lookup and
// Secrets) from the store, and from the policies of template build
// sandboxes, which have no record. It is created before the proxy and the
// manager, and given to both.
type Egress struct {
	store  *store.Store
	byAddr func(netip.Addr) (string, bool)

	mu     sync.Mutex
	builds map[string]store.NetworkPolicy
}

// NewEgress returns the egress source over st; byAddr names the sandbox
// behind a source address (network.Manager.SandboxByAddr), nil when
// networking is disabled.
func NewEgress(st *store.Store, byAddr func(netip.Addr) (string, bool)) *Egress {
	if byAddr == nil {
		byAddr = func(netip.Addr) (string, bool) { return "", false }
	}
	return &Egress{store: st, byAddr: byAddr, builds: map[string]store.NetworkPolicy{}}
}

func (e *Egress) setBuild(id string, p store.NetworkPolicy) {
	e.mu.Lock()
	e.builds[id] = p
	e.mu.Unlock()
}

// dropBuild forgets a build sandbox's policy and reports whether it had one.
func (e *Egress) dropBuild(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.builds[id]
	delete(e.builds, id)
	return ok
}

// Lookup names the sandbox behind a source address and its rules.
func (e *Egress) Lookup(src netip.Addr) (string, egress.Rules, bool) {
	id, ok := e.byAddr(src)
	if !ok {
		return "", egress.Rules{}, false
	}
	r, err := e.store.Get(id)
	if err != nil {
		e.mu.Lock()
		p, ok := e.builds[id]
		e.mu.Unlock()
		if ok {
			return id, egress.Rules{Mode: p.Mode, Allow: p.Allow, Deny: p.Deny}, true
		}
		return "", egress.Rules{}, false
	}
	if r.State != sandbox.Running {
		return "", egress.Rules{}, false
	}
	return id, egress.Rules{Mode: r.Network.Mode, Allow: r.Network.Allow, Deny: r.Network.Deny}, true
}

// Secrets returns the secrets bound to a sandbox.
func (e *Egress) Secrets(id string) []egress.Secret {
	r, err := e.store.Get(id)
	if err != nil {
		return nil
	}
	var out []egress.Secret
	for _, name := range r.Secrets {
		s, err := e.store.Secret(r.Owner, name)
		if err != nil || r.Placeholders[name] == "" {
			continue
		}
		out = append(out, egress.Secret{Name: name, Value: s.Value, Placeholder: r.Placeholders[name], Hosts: s.Hosts})
	}
	return out
}
