package main

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"

	"github.com/paddock-sandbox/paddock/internal/egress"
	"github.com/paddock-sandbox/paddock/internal/manager"
	"github.com/paddock-sandbox/paddock/internal/network"
	"golang.org/x/sys/unix"
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
}

// startNetwork sets up the network manager and the egress proxy; on
// failure networking is disabled with a warning (mode off still works).
func startNetwork(ctx context.Context, cfg Config, mgr *manager.Manager, log *slog.Logger) (stop func(), err error) {
	nc := cfg.Network
	if nc.Disabled {
		log.Info("networking disabled by configuration")
		return func() {}, nil
	}
	pool := network.DefaultPool
	if nc.Pool != "" {
		if pool, err = netip.ParsePrefix(nc.Pool); err != nil {
			return nil, fmt.Errorf("network pool: %w", err)
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
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	blocked, _ := egress.HostPrefixes()
	ecfg := egress.Config{
		Lookup: mgr.EgressLookup, Secrets: mgr.EgressSecrets, CA: &ca, Blocked: blocked,
		MaxConnsPerSandbox: nc.MaxConnections, BytesPerSecond: nc.BytesPerSecond, Log: log,
	}
	if len(nc.Hosts) > 0 {
		hosts := map[string][]netip.Addr{}
		for name, addrs := range nc.Hosts {
			for _, a := range addrs {
				ip, err := netip.ParseAddr(a)
				if err != nil {
					return nil, fmt.Errorf("network hosts %s: %w", name, err)
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
			return nil, fmt.Errorf("upstream CA: %w", err)
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
		return nil, fmt.Errorf("egress proxy: %w", err)
	}
	udp, err := net.ListenPacket("udp", net.JoinHostPort("0.0.0.0", strconv.Itoa(int(nc.DNSPort))))
	if err != nil {
		tcp.Close()
		return nil, fmt.Errorf("egress DNS: %w", err)
	}
	dnsTCP, err := net.Listen("tcp", net.JoinHostPort("0.0.0.0", strconv.Itoa(int(nc.DNSPort))))
	if err != nil {
		tcp.Close()
		udp.Close()
		return nil, fmt.Errorf("egress DNS: %w", err)
	}
	nm, err := network.New(network.Config{StateDir: cfg.StateDir, Pool: pool, ProxyPort: nc.ProxyPort,
		DNSPort: nc.DNSPort, Table: cfg.CgroupParent, Log: log})
	if err != nil {
		tcp.Close()
		udp.Close()
		dnsTCP.Close()
		return nil, err
	}
	pctx, cancel := context.WithCancel(ctx)
	go proxy.ServeTCP(pctx, tcp)
	go proxy.ServeDNS(pctx, udp)
	go proxy.ServeDNSTCP(pctx, dnsTCP)
	mgr.SetNetwork(&manager.Network{Net: nm, Proxy: proxy, CAPEM: caPEM})
	log.Info("networking ready", "pool", pool, "proxy_port", nc.ProxyPort, "dns_port", nc.DNSPort)
	return func() {
		cancel()
		tcp.Close()
		udp.Close()
		dnsTCP.Close()
		releaseNetnsDir(cfg.StateDir, cfg.CgroupParent, log)
	}, nil
}

// releaseNetnsDir unmounts <state>/netns, the shared mount point of pinned
// namespaces, and drops the daemon's nftables table when no sandbox
// namespace is pinned there any more, so a stopped daemon with no
// networked sandboxes leaves neither behind (its port rules would
// otherwise stand in the way of another daemon). The next start creates
// both again; a daemon with networked sandboxes keeps them for re-adoption.
func releaseNetnsDir(stateDir, table string, log *slog.Logger) {
	dir := filepath.Join(stateDir, "netns")
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) > 0 {
		return
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && err != unix.EINVAL {
		log.Warn("unmount netns dir", "dir", dir, "err", err)
	}
	if err := network.RemoveTable(table); err != nil {
		log.Warn("remove nftables table", "table", table, "err", err)
	}
}
