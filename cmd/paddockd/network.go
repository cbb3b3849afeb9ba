package main

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"

	"github.com/paddock-sandbox/paddock/internal/egress"
	"github.com/paddock-sandbox/paddock/internal/manager"
	"github.com/paddock-sandbox/paddock/internal/network"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// NetworkConfig is the "network" section of the config file.
type NetworkConfig struct {
	// Disabled turns networking off: only mode "off" sandboxes.
	Disabled bool `json:"disabled,omitempty"`
	// Pool is the IPv4 range of sandbox addresses (default 10.88.0.0/16).
	Pool string `json:"pool,omitempty"`
	// ProxyPort and DNSPort are the host ports of the egress proxy and
	// resolver (defaults 15001 and 15053); sandboxes' traffic is redirected
	// to them and nothing else can reach them.
	ProxyPort uint16 `json:"proxy_port,omitempty"`
	DNSPort   uint16 `json:"dns_port,omitempty"`
	// BytesPerSecond limits each sandbox's egress per direction (0 = none);
	// MaxConnections caps its concurrent connections (default 256).
	BytesPerSecond int64 `json:"bytes_per_second,omitempty"`
	MaxConnections int   `json:"max_connections,omitempty"`
	// Hosts pins names to addresses for the proxy's own resolution (like
	// /etc/hosts), checked before DNS.
	Hosts map[string][]string `json:"hosts,omitempty"`
	// UpstreamCA is a PEM file of extra roots the proxy trusts when it
	// forwards requests carrying secrets.
	UpstreamCA string `json:"upstream_ca,omitempty"`
	// AllowPrivate are the special ranges (loopback, link-local, private,
	// the host's addresses) tenants' allow entries may open
	// (--network-allow-private); see egress.Ceiling.
	AllowPrivate []string `json:"allow_private,omitempty"`
}

// netAttacher is the manager's Network: namespaces and packet rules from
// internal/network, connections from the egress proxy.
type netAttacher struct {
	nm      *network.Manager
	proxy   *egress.Proxy
	caPEM   []byte
	ceiling *egress.Ceiling
}

var _ manager.Network = (*netAttacher)(nil)

func netPolicy(p sandbox.NetworkPolicy) network.Policy {
	return network.Policy{Mode: network.Mode(p.Mode), Allow: p.Allow, Deny: p.Deny}
}

func (a *netAttacher) Attach(ctx context.Context, id string, p sandbox.NetworkPolicy, withCA bool) (*sandbox.NetworkConfig, error) {
	att, err := a.nm.Setup(ctx, id, netPolicy(p))
	if err != nil {
		return nil, err
	}
	ns := att.HostAddr
	if !ns.IsValid() { // offline: any address serves once attached
		ns = att.Nameserver
	}
	cfg := &sandbox.NetworkConfig{NetnsPath: att.NetnsPath, Nameserver: ns.String()}
	if withCA {
		cfg.CACertPEM = a.caPEM
	}
	return cfg, nil
}

func (a *netAttacher) Update(ctx context.Context, id string, p sandbox.NetworkPolicy) error {
	if err := a.nm.Update(ctx, id, netPolicy(p)); err != nil {
		return err
	}
	if p.Mode == sandbox.NetworkOff {
		a.proxy.CloseSandbox(id) // the proxy's upstream ends too
	}
	return nil
}

func (a *netAttacher) Check(p sandbox.NetworkPolicy) error {
	return a.ceiling.CheckRules(egress.Rules{Mode: p.Mode, Allow: p.Allow, Deny: p.Deny})
}

func (a *netAttacher) PolicyChanged(id string) { a.proxy.PolicyChanged(id) }

func (a *netAttacher) Detach(ctx context.Context, id string) error {
	a.proxy.CloseSandbox(id)
	return a.nm.Teardown(ctx, id)
}

func (a *netAttacher) List(ctx context.Context) ([]string, error) { return a.nm.List(ctx) }

// startNetwork sets up the network manager and the egress proxy, whose
// policy source eg reads st. A nil Network (configuration or failure)
// means networking is disabled; mode off still works. When networking
// fails to start after the network manager did (the proxy's port is
// taken), the manager is kept as clean: it removes what an earlier run
// pinned for sandboxes this run deletes or does not adopt.
func startNetwork(ctx context.Context, cfg Config, st *store.Store, log *slog.Logger) (_ manager.Network, clean manager.NetworkCleaner, eg *manager.Egress, stop func(), err error) {
	nc := cfg.Network
	eg = manager.NewEgress(st, nil)
	if nc.Disabled {
		log.Info("networking disabled by configuration")
		return nil, nil, eg, func() {}, nil
	}
	att, eg, stop, nm, err := startEgress(ctx, cfg, st, log)
	if err != nil {
		log.Warn("networking unavailable: sandboxes get network mode off only", "err", err)
		stop = func() {}
		if nm != nil {
			// Kept to tear down what earlier runs left; with nothing
			// left, the table goes now (its port rules would stand in
			// the way of the daemon holding the port), and the pin
			// namespace at stop.
			if ids, err := nm.List(ctx); err == nil && len(ids) == 0 {
				if err := network.RemoveTable(cfg.CgroupParent); err != nil {
					log.Warn("remove nftables table", "table", cfg.CgroupParent, "err", err)
				}
			}
			clean = netCleaner{nm}
			stop = func() { releaseNetwork(nm, cfg.CgroupParent, log) }
		}
		return nil, clean, manager.NewEgress(st, nil), stop, nil
	}
	return att, nil, eg, stop, nil
}

// netCleaner is the network manager of a daemon whose networking could
// not start, kept to remove earlier runs' network state.
type netCleaner struct{ nm *network.Manager }

func (c netCleaner) Detach(ctx context.Context, id string) error { return c.nm.Teardown(ctx, id) }

func (c netCleaner) List(ctx context.Context) ([]string, error) { return c.nm.List(ctx) }

// startEgress creates the network manager, the egress proxy and its
// listeners.
func startEgress(ctx context.Context, cfg Config, st *store.Store, log *slog.Logger) (_ *netAttacher, _ *manager.Egress, stop func(), _ *network.Manager, err error) {
	nc := cfg.Network
	pool := network.DefaultPool
	if nc.Pool != "" {
		if pool, err = netip.ParsePrefix(nc.Pool); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("network pool: %w", err)
		}
	}
	if nc.ProxyPort == 0 {
		nc.ProxyPort = 15001
	}
	if nc.DNSPort == 0 {
		nc.DNSPort = 15053
	}
	ca, caPEM, err := egress.NewCA(cfg.StateDir)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("egress CA: %w", err)
	}
	blocked, _ := egress.HostPrefixes()
	opened, err := parseAllowPrivate(nc.AllowPrivate)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	ceiling := &egress.Ceiling{Host: blocked, Pool: []netip.Prefix{pool}, Allow: opened}
	nm, err := network.New(network.Config{StateDir: cfg.StateDir, Pool: pool, ProxyPort: nc.ProxyPort,
		DNSPort: nc.DNSPort, Table: cfg.CgroupParent, Log: log,
		Refuse: func(p netip.Prefix) bool { return ceiling.CheckPrefix(p) != nil }})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	eg := manager.NewEgress(st, nm.SandboxByAddr)
	ecfg := egress.Config{
		Lookup: eg.Lookup, Secrets: eg.Secrets, CA: &ca, Blocked: blocked, Ceiling: ceiling,
		MaxConnsPerSandbox: nc.MaxConnections, BytesPerSecond: nc.BytesPerSecond, Log: log,
	}
	if len(nc.Hosts) > 0 {
		hosts := map[string][]netip.Addr{}
		for name, addrs := range nc.Hosts {
			for _, a := range addrs {
				ip, err := netip.ParseAddr(a)
				if err != nil {
					return nil, nil, nil, nm, fmt.Errorf("network hosts %s: %w", name, err)
				}
				hosts[name] = append(hosts[name], ip)
			}
		}
		ecfg.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			if a, ok := hosts[host]; ok {
				return a, nil
			}
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if nc.UpstreamCA != "" {
		pem, err := os.ReadFile(nc.UpstreamCA)
		if err != nil {
			return nil, nil, nil, nm, fmt.Errorf("upstream CA: %w", err)
		}
		pool, _ := x509.SystemCertPool()
		if pool == nil {
			pool = x509.NewCertPool()
		}
		pool.AppendCertsFromPEM(pem)
		ecfg.UpstreamRoots = pool
	}
	proxy := egress.New(ecfg)
	tcp, err := net.Listen("tcp", net.JoinHostPort("0.0.0.0", strconv.Itoa(int(nc.ProxyPort))))
	if err != nil {
		return nil, nil, nil, nm, fmt.Errorf("egress proxy: %w", err)
	}
	udp, err := net.ListenPacket("udp", net.JoinHostPort("0.0.0.0", strconv.Itoa(int(nc.DNSPort))))
	if err != nil {
		tcp.Close()
		return nil, nil, nil, nm, fmt.Errorf("egress DNS: %w", err)
	}
	dnsTCP, err := net.Listen("tcp", net.JoinHostPort("0.0.0.0", strconv.Itoa(int(nc.DNSPort))))
	if err != nil {
		tcp.Close()
		udp.Close()
		return nil, nil, nil, nm, fmt.Errorf("egress DNS: %w", err)
	}
	pctx, cancel := context.WithCancel(ctx)
	go proxy.ServeTCP(pctx, tcp)
	go proxy.ServeDNS(pctx, udp)
	go proxy.ServeDNSTCP(pctx, dnsTCP)
	log.Info("networking ready", "pool", pool, "proxy_port", nc.ProxyPort, "dns_port", nc.DNSPort)
	return &netAttacher{nm: nm, proxy: proxy, caPEM: caPEM, ceiling: ceiling}, eg, func() {
		cancel()
		tcp.Close()
		udp.Close()
		dnsTCP.Close()
		releaseNetwork(nm, cfg.CgroupParent, log)
	}, nm, nil
}

// releaseNetwork stops the network manager's thread in its pin
// namespace and, when no sandbox namespace is pinned any more, ends the
// pin namespace and drops the daemon's nftables table, so a stopped
// daemon with no networked sandboxes leaves neither behind (its port
// rules would stay in force otherwise). With sandboxes left, both stay
// for the next start.
func releaseNetwork(nm *network.Manager, table string, log *slog.Logger) {
	left, err := nm.Close()
	if err != nil {
		log.Warn("network: close", "err", err)
		return
	}
	if left > 0 {
		return
	}
	if err := network.RemoveTable(table); err != nil {
		log.Warn("remove nftables table", "table", table, "err", err)
	}
}

// parseAllowPrivate parses the operator's opened ranges
// (--network-allow-private); serve checks them before anything starts, so
// a typo stops the daemon instead of disabling networking.
func parseAllowPrivate(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("network allow_private (--network-allow-private): %q: want a CIDR such as 10.20.0.0/16", s)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
