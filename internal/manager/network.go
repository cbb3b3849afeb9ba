package manager

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/egress"
	"github.com/paddock-sandbox/paddock/internal/network"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// Network is the daemon's egress machinery: per-sandbox namespaces and
// packet rules, and the proxy that enforces names and injects secrets.
type Network struct {
	Net   *network.Manager
	Proxy *egress.Proxy
	// CAPEM is the proxy's CA certificate, trusted by sandboxes that use
	// secrets.
	CAPEM []byte
}

// SetNetwork enables network modes other than off. Call before Recover.
func (m *Manager) SetNetwork(n *Network) { m.net = n }

// caEnv points common TLS stacks at the sandbox's bundle, which trusts the
// egress proxy's CA (Python requests and pip, Node, OpenSSL, curl, git).
var caEnv = map[string]string{
	"SSL_CERT_FILE":       "/etc/ssl/certs/ca-certificates.crt",
	"REQUESTS_CA_BUNDLE":  "/etc/ssl/certs/ca-certificates.crt",
	"PIP_CERT":            "/etc/ssl/certs/ca-certificates.crt",
	"CURL_CA_BUNDLE":      "/etc/ssl/certs/ca-certificates.crt",
	"NODE_EXTRA_CA_CERTS": "/etc/ssl/certs/paddock-egress-ca.pem",
}

// validateNetwork checks a create request's network and secrets and fills
// rec's network fields, placeholders and env.
func (m *Manager) validateNetwork(owner string, req api.CreateSandboxRequest, rec *store.Record) error {
	p := store.NetworkPolicy{Mode: api.NetworkOff}
	if req.Network != nil {
		p = store.NetworkPolicy{Mode: req.Network.Mode, Allow: req.Network.Allow, Deny: req.Network.Deny}
		if p.Mode == "" {
			p.Mode = api.NetworkOff
		}
	}
	if err := checkPolicy(p); err != nil {
		return err
	}
	if p.Mode != api.NetworkOff && m.net == nil {
		return fmt.Errorf("%w: networking is not available on this daemon (see its log)", sandbox.ErrNotSupported)
	}
	if len(req.Secrets) > 0 && p.Mode != api.NetworkAllowlist {
		// Only allowlist mode sends HTTPS through the egress proxy, which is
		// what substitutes secrets.
		return fmt.Errorf("%w: secrets need network mode allowlist (the secret's hosts in allow)", sandbox.ErrInvalid)
	}
	ph, err := m.placeholders(owner, req.Secrets)
	if err != nil {
		return err
	}
	rec.Network, rec.Secrets, rec.Placeholders = p, req.Secrets, ph
	if len(ph) > 0 {
		if rec.Env == nil {
			rec.Env = map[string]string{}
		}
		for k, v := range caEnv {
			if _, set := rec.Env[k]; !set {
				rec.Env[k] = v
			}
		}
		for name, v := range ph {
			rec.Env[name] = v
		}
	}
	return nil
}

func checkPolicy(p store.NetworkPolicy) error {
	if !slices.Contains([]string{api.NetworkOff, api.NetworkAllowlist, api.NetworkFull}, p.Mode) {
		return fmt.Errorf("%w: network mode must be off, allowlist or full", sandbox.ErrInvalid)
	}
	if p.Mode == api.NetworkOff {
		if len(p.Allow)+len(p.Deny) > 0 {
			return fmt.Errorf("%w: allow and deny need network mode allowlist or full", sandbox.ErrInvalid)
		}
		return nil
	}
	if err := netPolicy(p).Validate(); err != nil {
		return fmt.Errorf("%w: %v", sandbox.ErrInvalid, err)
	}
	if err := (egress.Rules{Mode: p.Mode, Allow: p.Allow, Deny: p.Deny}).Validate(); err != nil {
		return fmt.Errorf("%w: %v", sandbox.ErrInvalid, err)
	}
	return nil
}

func netPolicy(p store.NetworkPolicy) network.Policy {
	return network.Policy{Mode: network.Mode(p.Mode), Allow: p.Allow, Deny: p.Deny}
}

// setupNetwork prepares a networked sandbox's namespace before the
// backend creates it; nil for mode off.
func (m *Manager) setupNetwork(ctx context.Context, rec *store.Record) (*sandbox.NetworkConfig, error) {
	if rec.Network.Mode == "" || rec.Network.Mode == api.NetworkOff {
		return nil, nil
	}
	att, err := m.net.Net.Setup(ctx, rec.ID, netPolicy(rec.Network))
	if err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	cfg := &sandbox.NetworkConfig{NetnsPath: att.NetnsPath, Nameserver: att.HostAddr.String()}
	if len(rec.Secrets) > 0 {
		cfg.CACertPEM = m.net.CAPEM
	}
	return cfg, nil
}

// teardownNetwork removes a sandbox's network state (idempotent).
func (m *Manager) teardownNetwork(ctx context.Context, id string) {
	if m.net == nil {
		return
	}
	m.net.Proxy.CloseSandbox(id)
	if err := m.net.Net.Teardown(ctx, id); err != nil {
		m.log.Error("network teardown", "sandbox", id, "err", err)
	}
}

// recoverNetwork removes network state of sandboxes not adopted and
// re-applies the rules of adopted ones.
func (m *Manager) recoverNetwork(ctx context.Context, adopted map[string]bool) {
	if m.net == nil {
		return
	}
	ids, err := m.net.Net.List(ctx)
	if err != nil {
		m.log.Error("network: list", "err", err)
	}
	for _, id := range ids {
		if !adopted[id] {
			m.teardownNetwork(ctx, id)
		}
	}
}

// UpdateNetwork replaces owner's sandbox's allow and deny lists. They apply
// at once to new connections, and connections no longer allowed are cut.
// The mode can change between allowlist and full, not to or from off.
func (m *Manager) UpdateNetwork(ctx context.Context, owner, id string, p api.NetworkPolicy) (*store.Record, error) {
	r, err := m.Running(owner, id)
	if err != nil {
		return nil, err
	}
	if m.net == nil {
		return nil, fmt.Errorf("%w: networking is not available on this daemon (see its log)", sandbox.ErrNotSupported)
	}
	np := store.NetworkPolicy{Mode: p.Mode, Allow: p.Allow, Deny: p.Deny}
	if np.Mode == "" {
		np.Mode = r.Network.Mode
	}
	if err := checkPolicy(np); err != nil {
		return nil, err
	}
	oldOff := r.Network.Mode == "" || r.Network.Mode == api.NetworkOff
	if oldOff != (np.Mode == api.NetworkOff) {
		return nil, fmt.Errorf("%w: a sandbox's network cannot be switched on or off after create; create a new sandbox", sandbox.ErrConflict)
	}
	if len(r.Secrets) > 0 && np.Mode != api.NetworkAllowlist {
		return nil, fmt.Errorf("%w: a sandbox with secrets must stay in mode allowlist", sandbox.ErrConflict)
	}
	unlock := m.lockID(id)
	defer unlock()
	if np.Mode != api.NetworkOff {
		if err := m.net.Net.Update(ctx, id, netPolicy(np)); err != nil {
			return nil, fmt.Errorf("network update: %w", err)
		}
	}
	rec, err := m.store.Update(id, func(r *store.Record) error { r.Network = np; return nil })
	if err != nil {
		return nil, err
	}
	if m.net != nil {
		m.net.Proxy.PolicyChanged(id)
	}
	return rec, nil
}

// setupBuildNetwork attaches a template build's sandbox to the network
// with policy p (nil config for mode off). Build sandboxes have no store
// record, so their policy is kept in memory for the egress proxy.
func (m *Manager) setupBuildNetwork(ctx context.Context, id string, p store.NetworkPolicy) (*sandbox.NetworkConfig, error) {
	if p.Mode == "" || p.Mode == api.NetworkOff {
		return nil, nil
	}
	m.mu.Lock()
	m.buildNets[id] = p
	m.mu.Unlock()
	return m.setupNetwork(ctx, &store.Record{ID: id, Network: p})
}

// teardownBuildNetwork removes a build sandbox's network state.
func (m *Manager) teardownBuildNetwork(id string) {
	m.mu.Lock()
	_, ok := m.buildNets[id]
	delete(m.buildNets, id)
	m.mu.Unlock()
	if ok {
		m.teardownNetwork(context.Background(), id)
	}
}

// EgressLookup names the sandbox behind a source address and its rules,
// for the egress proxy.
func (m *Manager) EgressLookup(src netip.Addr) (string, egress.Rules, bool) {
	if m.net == nil {
		return "", egress.Rules{}, false
	}
	id, ok := m.net.Net.SandboxByAddr(src)
	if !ok {
		return "", egress.Rules{}, false
	}
	r, err := m.store.Get(id)
	if err != nil {
		m.mu.Lock()
		p, ok := m.buildNets[id]
		m.mu.Unlock()
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

// EgressSecrets returns the secrets bound to a sandbox, for the proxy.
func (m *Manager) EgressSecrets(id string) []egress.Secret {
	r, err := m.store.Get(id)
	if err != nil {
		return nil
	}
	var out []egress.Secret
	for _, name := range r.Secrets {
		s, err := m.store.Secret(r.Owner, name)
		if err != nil || r.Placeholders[name] == "" {
			continue
		}
		out = append(out, egress.Secret{Name: name, Value: s.Value, Placeholder: r.Placeholders[name], Hosts: s.Hosts})
	}
	return out
}
