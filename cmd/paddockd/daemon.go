package main

import (
	"context"
	"fmt"
	"log/slog"
	"os/signal"
	"syscall"

	"github.com/paddock-sandbox/paddock/internal/agent"
	"github.com/paddock-sandbox/paddock/internal/manager"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/server"
	"github.com/paddock-sandbox/paddock/internal/store"
	"github.com/paddock-sandbox/paddock/internal/template/catalog"
)

// daemonMode is what a backend mode (container on this host, pod) brings
// to the daemon core, runDaemon.
type daemonMode struct {
	// backend runs the sandboxes.
	backend sandbox.Backend
	// noNetworkReason is the manager's 501 message for network modes the
	// mode cannot serve ("" = the manager's default).
	noNetworkReason string
	// openTemplates: wire returns a template catalog (templates built or
	// imported through the API), so the node creates from templates its
	// Lease does not list.
	openTemplates bool
	// wire, when set, makes the mode's extra manager dependencies once the
	// store and the signal context exist (container mode: networking,
	// egress proxy, the template catalog).
	wire func(ctx context.Context, st *store.Store) (modeDeps, error)
}

// modeDeps are a mode's extra manager dependencies.
type modeDeps struct {
	network manager.Network
	// netClean removes network state an earlier run left when network
	// is nil because networking could not start (nil otherwise).
	netClean manager.NetworkCleaner
	egress   *manager.Egress
	// catalog resolves templates and serves /v1/templates; nil: only the
	// backend's own templates, and /v1/templates answers 501.
	catalog *catalog.Catalog
	// stop releases them after the daemon has stopped serving.
	stop func()
}

// runDaemon is the daemon core shared by every backend mode: the store,
// API keys, port key, warm pool, manager (recovered), cluster membership,
// E2B endpoint, pprof and the REST API, until SIGTERM or SIGINT.
func runDaemon(cfg Config, m daemonMode, log *slog.Logger) error {
	b := m.backend
	st, err := store.Open(cfg.StateDir)
	if err != nil {
		return err
	}
	defer st.Close()
	keys, err := store.OpenKeys(cfg.StateDir)
	if err != nil {
		return err
	}
	portKey, err := st.PortKey()
	if err != nil {
		return fmt.Errorf("port key: %w", err)
	}
	poolCfg, err := cfg.WarmPool.poolConfig(b.Templates(), cfg.MaxSandboxes, log)
	if err != nil {
		return err
	}
	mcfg, err := managerConfig(cfg)
	if err != nil {
		return err
	}
	mcfg.WarmPool = poolCfg
	mcfg.SpareShimIdle = cfg.spareShimIdle()
	if m.noNetworkReason != "" {
		mcfg.NoNetworkReason = m.noNetworkReason
	}
	metrics := server.NewMetrics()
	cn, err := newClusterNode(cfg, st, b.Templates, m.openTemplates, log)
	if err != nil {
		return err
	}
	mcfg.Events = cn.events(metrics.Event)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var extra modeDeps
	if m.wire != nil {
		if extra, err = m.wire(ctx, st); err != nil {
			return err
		}
		if extra.stop != nil {
			defer extra.stop()
		}
	}
	ac := agent.NewClient(b.Dial)
	ac.KeepIdleFor(agent.IdleConnTimeout(cfg.spareShimIdle()))
	deps := manager.Deps{Store: st, Backend: b, Agent: ac, Network: extra.network, NetworkCleaner: extra.netClean, Egress: extra.egress, Log: log}
	scfg := server.Config{MaxFileBytes: cfg.MaxFileBytes, Version: version, Metrics: metrics, PortKey: portKey}
	if extra.catalog != nil { // a nil *Catalog in the interface would not read as "none"
		deps.Templates = extra.catalog
	}
	mgr := manager.New(mcfg, deps)
	if extra.catalog != nil {
		scfg.Templates = catalog.NewBuilder(extra.catalog, mgr, ac)
		extra.catalog.Start(ctx)
	}
	if err := mgr.Recover(ctx); err != nil {
		return err
	}
	if err := cn.start(ctx, log); err != nil {
		return err
	}
	stopE2B, err := serveE2B(ctx, cfg, mgr, keys, portKey, log)
	if err != nil {
		return err
	}
	defer stopE2B()
	if cfg.pprofListen != "" {
		stopPprof, err := servePprof(ctx, cfg.pprofListen, log)
		if err != nil {
			return err
		}
		defer stopPprof()
	}
	return serveAPI(ctx, cfg, mgr, scfg, keys, b.Templates(), log)
}
