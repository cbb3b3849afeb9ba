package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-sandbox/paddock/internal/server"
)

// LimitsConfig is the "limits" section of the config file: the bounds on
// the daemon's own HTTP surface and each key's share. Zero fields take
// the defaults of `paddockd serve --help`.
type LimitsConfig struct {
	MaxConns             int     `json:"max_conns,omitempty"`
	MaxConnsPerAddr      int     `json:"max_conns_per_addr,omitempty"`
	ReadHeaderTimeoutSec float64 `json:"read_header_timeout_seconds,omitempty"`
	BodyIdleTimeoutSec   float64 `json:"body_idle_timeout_seconds,omitempty"`
	WriteIdleTimeoutSec  float64 `json:"write_idle_timeout_seconds,omitempty"`
	IdleTimeoutSec       float64 `json:"idle_timeout_seconds,omitempty"`
	BigBodiesPerKey      int     `json:"big_bodies_per_key,omitempty"`
	MaxMCPSessions       int     `json:"max_mcp_sessions,omitempty"`
	MaxMCPSessionsPerKey int     `json:"max_mcp_sessions_per_key,omitempty"`
	TemplateBytesPerKey  int64   `json:"template_bytes_per_key,omitempty"`
	PortsDomain          string  `json:"ports_domain,omitempty"`
	PortsListen          string  `json:"ports_listen,omitempty"`
}

// limitFlags defines the flags of LimitsConfig on fs and returns the
// function that applies the ones given over the config file's.
func limitFlags(fs *flag.FlagSet) func(l *LimitsConfig, set map[string]bool) {
	maxConns := fs.Int("max-conns", 0, fmt.Sprintf("most open connections per listener; past it new connections get 503 (default %d, or a quarter of the open-file limit if lower)", server.DefaultMaxConns))
	perAddr := fs.Int("max-conns-per-addr", server.DefaultMaxConnsPerAddr, "most open connections of one client address (an IPv4 address or an IPv6 /64); past it 503")
	hdr := fs.Duration("read-header-timeout", server.DefaultReadHeaderTimeout, "time a client has to send a request's headers")
	body := fs.Duration("body-idle-timeout", server.DefaultBodyIdleTimeout, "a request body that sends nothing for this long is cut (the connection closed)")
	write := fs.Duration("write-idle-timeout", server.DefaultWriteIdleTimeout, "an answer the client does not read for this long is cut (streams may be silent any time)")
	idle := fs.Duration("idle-timeout", server.DefaultIdleTimeout, "a keep-alive connection idle this long is closed")
	big := fs.Int("big-bodies-per-key", server.DefaultBigBodiesPerKey, "large exec bodies (over 1 MiB) one key uploads at once; more wait for the key's own slots")
	mcpMax := fs.Int("max-mcp-sessions", server.DefaultMCPMaxSessions, "most concurrent MCP sessions on /v1/mcp")
	mcpKey := fs.Int("max-mcp-sessions-per-key", 0, "most MCP sessions of one API key (default a quarter of --max-mcp-sessions; -1: no per-key bound)")
	tplKey := fs.Int64("template-bytes-per-key", 0, "disk one key's templates may take; a build or snapshot past it is refused with no_space (default a quarter of the template store budget; -1: none)")
	domain := fs.String("ports-domain", "", "serve sandbox ports on their own origins, <port>-<sandbox id>.DOMAIN (a wildcard DNS name for this daemon; may end in :port)")
	plisten := fs.String("ports-listen", "", "also listen here for own-origin ports only (wildcard listener for --ports-domain; the API is not served there)")
	return func(l *LimitsConfig, set map[string]bool) {
		pickI := func(name string, f int, c *int) {
			if set[name] || *c == 0 {
				*c = f
			}
		}
		pickD := func(name string, f time.Duration, c *float64) {
			if set[name] || *c == 0 {
				*c = f.Seconds()
			}
		}
		pickI("max-conns", *maxConns, &l.MaxConns)
		pickI("max-conns-per-addr", *perAddr, &l.MaxConnsPerAddr)
		pickD("read-header-timeout", *hdr, &l.ReadHeaderTimeoutSec)
		pickD("body-idle-timeout", *body, &l.BodyIdleTimeoutSec)
		pickD("write-idle-timeout", *write, &l.WriteIdleTimeoutSec)
		pickD("idle-timeout", *idle, &l.IdleTimeoutSec)
		pickI("big-bodies-per-key", *big, &l.BigBodiesPerKey)
		pickI("max-mcp-sessions", *mcpMax, &l.MaxMCPSessions)
		pickI("max-mcp-sessions-per-key", *mcpKey, &l.MaxMCPSessionsPerKey)
		if set["template-bytes-per-key"] || l.TemplateBytesPerKey == 0 {
			l.TemplateBytesPerKey = *tplKey
		}
		if set["ports-domain"] || l.PortsDomain == "" {
			l.PortsDomain = *domain
		}
		if set["ports-listen"] || l.PortsListen == "" {
			l.PortsListen = *plisten
		}
	}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// applyLimits fills the server configuration from cfg.
func applyLimits(cfg Config, scfg *server.Config) {
	l := cfg.Limits
	scfg.Limits = server.HTTPLimits{
		ReadHeaderTimeout: seconds(l.ReadHeaderTimeoutSec), BodyIdleTimeout: seconds(l.BodyIdleTimeoutSec),
		WriteIdleTimeout: seconds(l.WriteIdleTimeoutSec), IdleTimeout: seconds(l.IdleTimeoutSec),
		Conns: server.ConnLimits{MaxConns: l.MaxConns, MaxConnsPerAddr: l.MaxConnsPerAddr},
	}
	scfg.BigBodiesPerKey = l.BigBodiesPerKey
	scfg.Ports = server.PortsConfig{Domain: l.PortsDomain}
	scfg.MCP.MaxSessions, scfg.MCP.MaxSessionsPerKey = l.MaxMCPSessions, l.MaxMCPSessionsPerKey
	switch scfg.TemplateBytesPerKey = l.TemplateBytesPerKey; {
	case l.TemplateBytesPerKey < 0:
		scfg.TemplateBytesPerKey = 0
	case l.TemplateBytesPerKey == 0 && cfg.TemplateCacheBytes > 0:
		scfg.TemplateBytesPerKey = cfg.TemplateCacheBytes / 4
	}
}

// defaultTemplateBudget is the template store's disk budget when the
// config sets none: half the free space of the state directory's file
// system at start, at least 1 GiB. -1 in the config means no budget.
func defaultTemplateBudget(stateDir string, configured int64) int64 {
	switch {
	case configured < 0:
		return 0
	case configured > 0:
		return configured
	}
	var st unix.Statfs_t
	if unix.Statfs(stateDir, &st) != nil {
		return 1 << 30
	}
	return max(int64(st.Bavail)*st.Bsize/2, 1<<30)
}

// servePorts serves the wildcard ports listener until ctx ends.
func servePorts(ctx context.Context, addr string, apiSrv *server.Server, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--ports-listen: %w", err)
	}
	srv := apiSrv.HTTPServer(addr)
	srv.Handler = apiSrv.PortsHandler()
	go func() {
		if err := srv.Serve(apiSrv.Listener(ln)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("ports listener", "err", err)
		}
	}()
	log.Info("serving sandbox ports on their own origins", "listen", ln.Addr().String())
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}, nil
}
