package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/backend/container"
	"github.com/paddock-sandbox/paddock/internal/manager"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/server"
	"github.com/paddock-sandbox/paddock/internal/store"
	"github.com/paddock-sandbox/paddock/internal/template"
	"github.com/paddock-sandbox/paddock/internal/template/catalog"
)

const defaultStateDir = "/var/lib/paddock"

// Config is the daemon configuration file (JSON). Flags given on the
// command line override it.
type Config struct {
	Listen             string                        `json:"listen,omitempty"`
	StateDir           string                        `json:"state_dir,omitempty"`
	MaxSandboxes       int                           `json:"max_sandboxes,omitempty"`
	MaxSandboxesPerKey int                           `json:"max_sandboxes_per_key,omitempty"`
	MaxFileBytes       int64                         `json:"max_file_bytes,omitempty"`
	Runtime            string                        `json:"runtime,omitempty"`
	Runtimes           map[string]string             `json:"runtimes,omitempty"`
	AgentBinary        string                        `json:"agent_binary,omitempty"`
	Templates          map[string]container.Template `json:"templates,omitempty"`
	Defaults           *sandbox.Resources            `json:"defaults,omitempty"`
	DefaultTimeout     int64                         `json:"default_timeout_seconds,omitempty"`
	LogLevel           string                        `json:"log_level,omitempty"`
	UIDBase            int64                         `json:"uid_base,omitempty"`
	CgroupParent       string                        `json:"cgroup_parent,omitempty"`
	// DiskMode is "quota" (default: sandboxes' writable layers share one
	// btrfs disk pool, a quota per sandbox) or "loop" (an ext4 image, loop
	// device and mount per sandbox); DiskPoolMiB sizes the pool's sparse
	// image when it is first made. See docs/operations.md.
	DiskMode    string `json:"disk_mode,omitempty"`
	DiskPoolMiB int64  `json:"disk_pool_mib,omitempty"`
	// SpareShimIdleSeconds retires an idle sandbox's spare command shim
	// after that many seconds without an exec (0: never; default 60).
	SpareShimIdleSeconds *int64 `json:"spare_shim_idle_seconds,omitempty"`
	// AgentHibernate lets the agent of a sandbox in which nothing runs
	// hibernate once its spare shim retired (default true).
	AgentHibernate *bool           `json:"agent_hibernate,omitempty"`
	Prices         *manager.Prices `json:"prices,omitempty"`
	// Retention of paused and stopped sandboxes (retention.go).
	Retention
	// WarmPool is the warm pool: idle sandboxes kept ready per template
	// (warmpool.go).
	WarmPool WarmPoolConfig `json:"warm_pool,omitempty"`
	// TemplateCacheBytes is the disk budget of the template store (image
	// layers and the build cache; 0 = none); TemplateImportDirs are the
	// host directories API requests may import oci_layout and tarball
	// sources from (default <state-dir>/import). See cmd/paddockd/templates.go.
	TemplateCacheBytes int64    `json:"template_cache_bytes,omitempty"`
	TemplateImportDirs []string `json:"template_import_dirs,omitempty"`
	// RegistryAllow are the registries template imports may fetch from
	// (see template.RegistryPolicy; default "*": public registries only).
	RegistryAllow []string      `json:"registry_allow,omitempty"`
	Network       NetworkConfig `json:"network,omitempty"`
	// Limits bound the HTTP surface and each key's share (surface.go).
	Limits LimitsConfig `json:"limits,omitempty"`
	// E2B configures the E2B-compatible endpoint (e2b.go).
	E2B E2BConfig `json:"e2b,omitempty"`
	// TemplateAliases map extra template names to a base or config
	// template ({"python-3.12": "base"}); see docs/templates.md.
	TemplateAliases map[string]string `json:"template_aliases,omitempty"`
	// MCPIdleTimeoutSeconds ends an idle /v1/mcp session, deleting its own
	// sandbox (default 300).
	MCPIdleTimeoutSeconds int64 `json:"mcp_idle_timeout_seconds,omitempty"`
	// Cluster turns on cluster mode on Kubernetes (cluster.go).
	Cluster ClusterConfig `json:"cluster,omitempty"`
	// Backend is "container" (default) or "pod"; Pod configures the
	// latter (podmode.go).
	Backend string    `json:"backend,omitempty"`
	Pod     PodConfig `json:"pod,omitempty"`
	// pprofListen is --pprof-listen (a flag only; pprof.go).
	pprofListen string
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	configPath := fs.String("config", "", "JSON config file (flags override it)")
	listen := fs.String("listen", "127.0.0.1:7419", "address to serve the API on")
	stateDir := fs.String("state-dir", defaultStateDir, "state directory (database, keys, sandboxes)")
	maxSandboxes := fs.Int("max-sandboxes", 100, "most live sandboxes on this host (503 no_capacity past it)")
	maxPerKey := fs.Int("max-sandboxes-per-key", 0, "most live sandboxes per API key (429 past it); default half of --max-sandboxes, -1 = no per-key limit")
	maxFile := fs.Int64("max-file-bytes", api.DefaultMaxFileBytes, "largest file upload or download through the files API")
	runtime := fs.String("runtime", "runc", "default OCI runtime: runc (pinned, built by make), crun (creates faster; its seccomp filter is compiled once per daemon), runsc, or a name from the config's runtimes")
	agentBin := fs.String("agent-binary", "", "paddock-agent binary (default: next to paddockd)")
	defTimeout := fs.Int64("default-timeout", 300, "default sandbox lease in seconds")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	cgroupParent := fs.String("cgroup-parent", "", `cgroup under which sandbox cgroups are made; each daemon on a host needs its own (default "paddock" for /var/lib/paddock, else "paddock-<hash of --state-dir>")`)
	diskMode := fs.String("disk-mode", container.DiskQuota, `where sandboxes' writable layers live: "quota" (one shared btrfs disk pool <state-dir>/disks.img, a subvolume with a quota of disk_mib per sandbox; needs mkfs.btrfs) or "loop" (an ext4 image, loop device and mount per sandbox)`)
	diskPool := fs.Int64("disk-pool-mib", 0, "size in MiB of the disk pool's sparse image when it is first made (default: the size of the file system holding --state-dir)")
	warmPool := addWarmPoolFlags(fs)
	spareIdle := fs.Duration("spare-shim-idle", defaultSpareShimIdle, "retire a sandbox's spare command shim (a process kept started so an exec need not start one) after this long without an exec; the next exec then starts its own, about 15 ms more (0 = keep it)")
	hibernate := fs.Bool("agent-hibernate", true, "once a sandbox's spare shim retired (--spare-shim-idle) and nothing runs in it, its guest agent (a Go process, about 1.3 MiB and six tasks) execs paddock-idle (one task, a few pages) in its place, which starts the agent again at the next call, about 16 ms more, once (runc and crun; not runsc)")
	pprofListen := fs.String("pprof-listen", "", "serve Go's profiling endpoints (/debug/pprof/) on this loopback address, e.g. 127.0.0.1:6060 (default off)")
	retention := addRetentionFlags(fs)
	uidBase := fs.Int64("uid-base", 1<<20, "first host uid mapped into sandboxes; sandbox n maps uid 0 to uid-base+n*65536 (give each daemon on a host its own range)")
	allowPrivate := fs.String("network-allow-private", "", "comma-separated CIDRs of loopback, link-local or private ranges tenants' network allow entries may open (default none; the sandbox pool never)")
	registryAllow := fs.String("registry-allow", "", `comma-separated registries template imports may fetch from: host, host:port or CIDR (may be private), "*" = any registry whose addresses are all public (default "*")`)
	limits := limitFlags(fs)
	applyE2B := e2bFlags(fs)
	applyCluster := clusterFlags(fs)
	applyPod := podFlags(fs)
	mcpIdle := fs.Duration("mcp-idle-timeout", server.DefaultMCPIdleTimeout, "end a /v1/mcp session after this long without a request, deleting its own sandbox (a sandbox it attached to is kept)")
	aliases := aliasFlag{}
	fs.Var(aliases, "template-alias", "make template `NAME=TARGET` an alias: creates with NAME get TARGET, a base or config template (repeatable; adds to the config's template_aliases)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: paddockd [serve] [flags]\n\nRuns the Paddock daemon (as root). Flags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		os.Exit(2)
	}
	cfg := Config{}
	if *configPath != "" {
		b, err := os.ReadFile(*configPath)
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return fmt.Errorf("config %s: %w", *configPath, err)
		}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	pick := func(name string, flagVal, cfgVal string) string {
		if set[name] || cfgVal == "" {
			return flagVal
		}
		return cfgVal
	}
	pickInt := func(name string, flagVal, cfgVal int64) int64 {
		if set[name] || cfgVal == 0 {
			return flagVal
		}
		return cfgVal
	}
	cfg.Listen = pick("listen", *listen, cfg.Listen)
	cfg.StateDir = pick("state-dir", *stateDir, cfg.StateDir)
	// Sandboxes' mounts, the template store and the cgroup name need an
	// absolute path; a relative one is taken from the working directory.
	abs, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return fmt.Errorf("--state-dir: %w", err)
	}
	cfg.StateDir = abs
	cfg.Runtime = pick("runtime", *runtime, cfg.Runtime)
	cfg.AgentBinary = pick("agent-binary", *agentBin, cfg.AgentBinary)
	cfg.LogLevel = pick("log-level", *logLevel, cfg.LogLevel)
	cfg.MaxSandboxes = int(pickInt("max-sandboxes", int64(*maxSandboxes), int64(cfg.MaxSandboxes)))
	cfg.MaxSandboxesPerKey = int(pickInt("max-sandboxes-per-key", int64(*maxPerKey), int64(cfg.MaxSandboxesPerKey)))
	cfg.MaxFileBytes = pickInt("max-file-bytes", *maxFile, cfg.MaxFileBytes)
	cfg.DefaultTimeout = pickInt("default-timeout", *defTimeout, cfg.DefaultTimeout)
	cfg.UIDBase = pickInt("uid-base", *uidBase, cfg.UIDBase)
	cfg.CgroupParent = pick("cgroup-parent", *cgroupParent, cfg.CgroupParent)
	cfg.DiskMode = pick("disk-mode", *diskMode, cfg.DiskMode)
	cfg.DiskPoolMiB = pickInt("disk-pool-mib", *diskPool, cfg.DiskPoolMiB)
	if set["network-allow-private"] {
		cfg.Network.AllowPrivate = splitList(*allowPrivate)
	}
	if set["registry-allow"] {
		cfg.RegistryAllow = splitList(*registryAllow)
	}
	limits(&cfg.Limits, set)
	applyE2B(&cfg.E2B, set)
	applyCluster(&cfg.Cluster, set)
	applyPod(&cfg, set)
	retention.apply(&cfg.Retention, set)
	cfg.TemplateAliases = aliases.into(cfg.TemplateAliases)
	if set["mcp-idle-timeout"] || cfg.MCPIdleTimeoutSeconds == 0 {
		cfg.MCPIdleTimeoutSeconds = int64(max(mcpIdle.Seconds(), 1))
	}
	warmPool.apply(&cfg.WarmPool, set)
	if set["spare-shim-idle"] || cfg.SpareShimIdleSeconds == nil {
		secs := int64(spareIdle.Round(time.Second).Seconds())
		cfg.SpareShimIdleSeconds = &secs
	}
	if set["agent-hibernate"] || cfg.AgentHibernate == nil {
		cfg.AgentHibernate = hibernate
	}
	if *cfg.SpareShimIdleSeconds < 0 {
		return fmt.Errorf("--spare-shim-idle must not be negative")
	}
	if cfg.pprofListen = *pprofListen; cfg.pprofListen != "" {
		if err := checkLoopback(cfg.pprofListen); err != nil {
			return fmt.Errorf("--pprof-listen: %w", err)
		}
	}
	return run(cfg)
}

// defaultSpareShimIdle is --spare-shim-idle's default: a model's next
// call in a conversation usually comes sooner.
const defaultSpareShimIdle = time.Minute

// spareShimIdle is the configured --spare-shim-idle.
func (c Config) spareShimIdle() time.Duration {
	if c.SpareShimIdleSeconds == nil {
		return defaultSpareShimIdle
	}
	return time.Duration(*c.SpareShimIdleSeconds) * time.Second
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func run(cfg Config) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return fmt.Errorf("log level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	switch cfg.Backend {
	case backendPod:
		return runPod(cfg, log) // podmode.go
	case backendContainer, "":
	default:
		return fmt.Errorf("--backend %q: want container or pod", cfg.Backend)
	}
	if os.Geteuid() != 0 {
		return errors.New("paddockd must run as root (it creates namespaces, cgroups and mounts)")
	}
	if cfg.UIDBase < 65536 || cfg.UIDBase+int64(max(cfg.MaxSandboxes*2, 64))*65536 > 1<<32-1 {
		return errors.New("--uid-base must be at least 65536 and leave room for 2*max-sandboxes ranges of 65536 below 2^32")
	}
	if cfg.MaxSandboxes < 1 {
		return errors.New("--max-sandboxes must be at least 1")
	}
	if _, err := parseAllowPrivate(cfg.Network.AllowPrivate); err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.StateDir, 0o711); err != nil {
		return err
	}
	cfg.TemplateCacheBytes = defaultTemplateBudget(cfg.StateDir, cfg.TemplateCacheBytes)
	if err := container.SetSubreaper(); err != nil {
		return fmt.Errorf("subreaper: %w", err)
	}
	runtimes, err := findRuntimes(&cfg)
	if err != nil {
		return err
	}
	// Wired in this order; see templates.go for the two closures.
	var b *container.Backend
	var cat *catalog.Catalog
	images, err := openImages(cfg, func() []string {
		if b == nil {
			return nil
		}
		return b.LowersInUse()
	}, log)
	if err != nil {
		return err
	}
	defer images.Close()
	b, err = container.New(container.Config{
		StateDir: cfg.StateDir, AgentBinary: cfg.AgentBinary, Runtimes: runtimes,
		DefaultRuntime: cfg.Runtime, Templates: cfg.Templates, MaxSlots: max(cfg.MaxSandboxes*2, 64), Log: log,
		UIDBase: uint32(cfg.UIDBase), CgroupParent: cfg.CgroupParent,
		DiskMode: cfg.DiskMode, DiskPoolMiB: cfg.DiskPoolMiB, SpareIdle: cfg.spareShimIdle(),
		Hibernate: cfg.AgentHibernate == nil || *cfg.AgentHibernate,
		Images:    func(name string) (*template.Root, error) { return cat.Root(name) },
	})
	if err != nil {
		return err
	}
	defer func() { // last: removes the cgroup parent once no sandbox is left
		if err := b.Close(context.Background()); err != nil {
			log.Warn("backend cleanup", "err", err)
		}
	}()
	if cat, err = newCatalog(cfg, images, b, log); err != nil {
		return err
	}
	if cfg.CgroupParent == "" {
		cfg.CgroupParent = container.DefaultCgroupParent(cfg.StateDir)
	}
	return runDaemon(cfg, daemonMode{backend: b, openTemplates: true, wire: func(ctx context.Context, st *store.Store) (modeDeps, error) {
		netw, clean, egress, stopNet, err := startNetwork(ctx, cfg, st, log)
		if err != nil {
			return modeDeps{}, err
		}
		return modeDeps{network: netw, netClean: clean, egress: egress, catalog: cat, stop: stopNet}, nil
	}}, log)
}

// serveAPI serves the REST API until ctx ends, with the reaper running,
// then shuts down; sandboxes keep running for the next start.
func serveAPI(ctx context.Context, cfg Config, mgr *manager.Manager, scfg server.Config, keys *store.Keys, templates []string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	scfg.MCP = server.MCPConfig{SelfURL: server.SelfURL(ln.Addr()), IdleTimeout: time.Duration(cfg.MCPIdleTimeoutSeconds) * time.Second}
	applyLimits(cfg, &scfg)
	apiSrv := server.New(scfg, mgr, keys, log)
	srv := apiSrv.HTTPServer(cfg.Listen)
	ln = apiSrv.Listener(ln)
	if cfg.Limits.PortsListen != "" {
		stopPorts, err := servePorts(ctx, cfg.Limits.PortsListen, apiSrv, log)
		if err != nil {
			ln.Close()
			return err
		}
		defer stopPorts()
	}
	reaperDone := make(chan struct{})
	go func() { mgr.Run(ctx); close(reaperDone) }()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("paddockd serving", "url", "http://"+ln.Addr().String(), "state_dir", cfg.StateDir,
		"runtime", cfg.Runtime, "templates", templates, "version", version)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down; sandboxes keep running and are re-adopted on the next start")
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	apiSrv.CloseMCP(sctx) // deletes MCP sessions' sandboxes through the API, so before Shutdown
	srv.Shutdown(sctx)
	<-reaperDone
	mgr.DrainPool(sctx) // idle pool sandboxes are not kept across a stop
	return nil
}

// findRuntimes locates the agent binary and the OCI runtimes (next to
// paddockd, then on PATH, unless the config names them).
func findRuntimes(cfg *Config) (map[string]string, error) {
	self, _ := os.Executable()
	if cfg.AgentBinary == "" {
		cfg.AgentBinary = filepath.Join(filepath.Dir(self), "paddock-agent")
	}
	runtimes := map[string]string{}
	for name, p := range cfg.Runtimes {
		runtimes[name] = p
	}
	for _, name := range []string{"runc", "crun", "runsc"} {
		if _, ok := runtimes[name]; ok {
			continue
		}
		if p := filepath.Join(filepath.Dir(self), name); isExecutable(p) {
			runtimes[name] = p
		} else if p, err := exec.LookPath(name); err == nil {
			runtimes[name] = p
		}
	}
	if _, ok := runtimes[cfg.Runtime]; !ok {
		return nil, fmt.Errorf("runtime %q not found (build it with `make`, install it, or name its path in the config's runtimes)", cfg.Runtime)
	}
	return runtimes, nil
}

// managerConfig is the manager's configuration from the daemon's.
func managerConfig(cfg Config) (manager.Config, error) {
	mcfg := manager.DefaultConfig()
	mcfg.MaxSandboxes, mcfg.MaxPerKey = cfg.MaxSandboxes, cfg.MaxSandboxesPerKey
	switch {
	case cfg.MaxSandboxesPerKey == 0: // the default: no key takes every slot
		mcfg.MaxPerKey = max(cfg.MaxSandboxes/2, 1)
	case cfg.MaxSandboxesPerKey < 0:
		mcfg.MaxPerKey = 0
	}
	mcfg.DefaultTimeout = time.Duration(cfg.DefaultTimeout) * time.Second
	if cfg.Defaults != nil {
		mcfg.Defaults = *cfg.Defaults
	}
	if cfg.Prices != nil {
		mcfg.Prices = *cfg.Prices
	}
	return mcfg, applyRetention(&mcfg, cfg.Retention)
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
