package manager

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/paddock-sandbox/paddock/internal/egress"
	"github.com/paddock-sandbox/paddock/internal/network"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// Network attaches sandboxes to the host's network: a namespace with
// packet rules per sandbox, and the egress proxy that enforces names and
// substitutes secrets. It is what the manager needs of internal/network
// and internal/egress (cmd/paddockd wires them). A nil Network means
// networking is disabled on this daemon: only mode off is accepted.
type Network interface {
	// Attach prepares id's namespace with policy p before the backend
	// creates the sandbox (mode off: a namespace holding only lo, which
	// Update can attach later); withCA adds the proxy's CA to its trust
	// store.
	Attach(ctx context.Context, id string, p sandbox.NetworkPolicy, withCA bool) (*sandbox.NetworkConfig, error)
	// Update applies new rules to an attached sandbox at once and cuts the
	// connections they no longer allow. Mode off detaches it (its link
	// gone, every connection cut); another mode attaches an offline one.
	// network.ErrNotFound: id has no namespace of the daemon's.
	Update(ctx context.Context, id string, p sandbox.NetworkPolicy) error
	// PolicyChanged tells the egress proxy that id's stored policy
	// changed, so that it re-checks id's open connections.
	PolicyChanged(id string)
	// Check reports whether p's entries stay within the operator's
	// ceiling (egress.Ceiling); errors say which entry and why.
	Check(p sandbox.NetworkPolicy) error
	// Detach and List remove and find sandboxes' network state.
	NetworkCleaner
}

// NetworkCleaner removes sandboxes' network state. A Network is one; a
// daemon whose networking could not start (its egress proxy's port was
// taken, say) still gets one (Deps.NetworkCleaner), for the namespaces an
// earlier run pinned: its sandboxes' deletes and its recovery remove them.
type NetworkCleaner interface {
	// Detach removes id's network state; it is idempotent.
	Detach(ctx context.Context, id string) error
	// List returns the ids that have network state on the host.
	List(ctx context.Context) ([]string, error)
}

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
func (m *Manager) validateNetwork(owner string, req sandbox.CreateRequest, rec *store.Record) error {
	p := store.NetworkPolicy{Mode: sandbox.NetworkOff}
	if req.Network != nil {
		p = store.NetworkPolicy{Mode: req.Network.Mode, Allow: req.Network.Allow, Deny: req.Network.Deny}
		if p.Mode == "" {
			p.Mode = sandbox.NetworkOff
		}
	}
	if err := m.checkPolicy(p); err != nil {
		return err
	}
	if p.Mode != sandbox.NetworkOff && m.net == nil {
		return m.noNetwork()
	}
	if len(req.Secrets) > 0 && p.Mode != sandbox.NetworkAllowlist {
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

func (m *Manager) checkPolicy(p store.NetworkPolicy) error {
	if !slices.Contains([]string{sandbox.NetworkOff, sandbox.NetworkAllowlist, sandbox.NetworkFull}, p.Mode) {
		return fmt.Errorf("%w: network mode must be off, allowlist or full", sandbox.ErrInvalid)
	}
	if p.Mode == sandbox.NetworkOff {
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
	if m.net != nil {
		if err := m.net.Check(domainPolicy(p)); err != nil {
			return fmt.Errorf("%w: %v", sandbox.ErrInvalid, err)
		}
	}
	return nil
}

func netPolicy(p store.NetworkPolicy) network.Policy {
	return network.Policy{Mode: network.Mode(p.Mode), Allow: p.Allow, Deny: p.Deny}
}

// domainPolicy is the domain form of a stored policy.
func domainPolicy(p store.NetworkPolicy) sandbox.NetworkPolicy {
	return sandbox.NetworkPolicy{Mode: p.Mode, Allow: p.Allow, Deny: p.Deny}
}

// setupNetwork prepares a sandbox's network namespace before the backend
// creates it: attached to the host for modes allowlist and full, holding
// only lo for mode off, so that UpdateNetwork can switch it on later
// (and, for a stopped sandbox started again, Attach with its stored
// policy). nil when networking is disabled on this daemon.
func (m *Manager) setupNetwork(ctx context.Context, rec *store.Record) (*sandbox.NetworkConfig, error) {
	if m.net == nil {
		return nil, nil
	}
	p := domainPolicy(rec.Network)
	if p.Mode == "" {
		p.Mode = sandbox.NetworkOff
	}
	cfg, err := m.net.Attach(ctx, rec.ID, p, len(rec.Secrets) > 0)
	if err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	return cfg, nil
}

// teardownNetwork removes a sandbox's network state (idempotent).
func (m *Manager) teardownNetwork(ctx context.Context, id string) {
	if m.netClean == nil {
		return // networking disabled: no sandbox has network state
	}
	if err := m.netClean.Detach(ctx, id); err != nil {
		m.log.Error("network teardown", "sandbox", id, "err", err)
	}
}

// recoverNetwork removes network state of sandboxes not adopted and
// re-applies the rules of adopted ones.
func (m *Manager) recoverNetwork(ctx context.Context, adopted map[string]bool) {
	if m.netClean == nil {
		return
	}
	ids, err := m.netClean.List(ctx)
	if err != nil {
		m.log.Error("network: list", "err", err)
	}
	for _, id := range ids {
		if !adopted[id] {
			m.teardownNetwork(ctx, id)
		}
	}
}

// UpdateNetwork replaces owner's sandbox's network policy. Allow and deny
// edits apply at once to new connections, and connections no longer
// allowed are cut. Every mode change is accepted: off → allowlist or full
// attaches the running sandbox's namespace to the host, allowlist or full
// → off detaches it and cuts every connection at once. A sandbox with
// secrets stays in allowlist or off (only the proxy substitutes secrets).
func (m *Manager) UpdateNetwork(ctx context.Context, owner, id string, p sandbox.NetworkPolicy) (*store.Record, error) {
	r, err := m.Running(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	if m.net == nil {
		return nil, m.noNetwork()
	}
	np := store.NetworkPolicy{Mode: p.Mode, Allow: p.Allow, Deny: p.Deny}
	if np.Mode == "" {
		np.Mode = r.Network.Mode
	}
	if np.Mode == "" {
		np.Mode = sandbox.NetworkOff
	}
	if err := m.checkPolicy(np); err != nil {
		return nil, err
	}
	if len(r.Secrets) > 0 && np.Mode == sandbox.NetworkFull {
		return nil, fmt.Errorf("%w: a sandbox with secrets must stay in mode allowlist (or off)", sandbox.ErrConflict)
	}
	unlock := m.lockID(id)
	defer unlock()
	if err := m.net.Update(ctx, id, domainPolicy(np)); err != nil {
		if errors.Is(err, network.ErrNotFound) {
			return nil, fmt.Errorf("%w: this sandbox was created without a network namespace of this daemon's (before networking was enabled); create a new sandbox", sandbox.ErrConflict)
		}
		return nil, fmt.Errorf("network update: %w", err)
	}
	rec, err := m.store.Update(id, func(r *store.Record) error { r.Network = np; return nil })
	if err != nil {
		return nil, err
	}
	m.net.PolicyChanged(id)
	return rec, nil
}

// setupBuildNetwork attaches a template build's sandbox to the network
// with policy p (nil config for mode off). Build sandboxes have no store
// record, so the egress source keeps their policy while they run.
func (m *Manager) setupBuildNetwork(ctx context.Context, id string, p store.NetworkPolicy) (*sandbox.NetworkConfig, error) {
	if p.Mode == "" || p.Mode == sandbox.NetworkOff {
		return nil, nil
	}
	m.egress.setBuild(id, p)
	return m.setupNetwork(ctx, &store.Record{ID: id, Network: p})
}

// teardownBuildNetwork removes a build sandbox's network state.
func (m *Manager) teardownBuildNetwork(id string) {
	if m.egress.dropBuild(id) {
		m.teardownNetwork(context.Background(), id)
	}
}

// noNetwork is the error of network modes other than off on a daemon
// without networking.
func (m *Manager) noNetwork() error {
	if m.cfg.NoNetworkReason != "" {
		return fmt.Errorf("%w: %s", sandbox.ErrNotSupported, m.cfg.NoNetworkReason)
	}
	return fmt.Errorf("%w: networking is not available on this daemon (see its log)", sandbox.ErrNotSupported)
}
