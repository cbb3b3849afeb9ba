package main

import (
	"context"
	"flag"
	"log/slog"
	"net"
	"time"

	"github.com/paddock-sandbox/paddock/internal/e2b"
	"github.com/paddock-sandbox/paddock/internal/manager"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// E2BConfig configures the E2B-compatible endpoint (docs/e2b.md).
type E2BConfig struct {
	// Listen is its address; empty: the endpoint is off.
	Listen string `json:"listen,omitempty"`
	// Domain is the sandbox domain of <port>-<sandboxID>.<domain> host
	// names (E2B_DOMAIN mode).
	Domain string `json:"domain,omitempty"`
	// Templates maps E2B template ids or aliases to Paddock templates.
	Templates map[string]string `json:"templates,omitempty"`
}

// e2bFlags registers the endpoint's flags and returns a function that
// applies the ones given over the config file's values.
func e2bFlags(fs *flag.FlagSet) func(cfg *E2BConfig, set map[string]bool) {
	listen := fs.String("e2b-listen", "", "address of the E2B-compatible endpoint (off if empty; see docs/e2b.md)")
	domain := fs.String("e2b-domain", "", "sandbox domain of the E2B endpoint's <port>-<sandboxID>.<domain> host names")
	return func(cfg *E2BConfig, set map[string]bool) {
		if set["e2b-listen"] {
			cfg.Listen = *listen
		}
		if set["e2b-domain"] {
			cfg.Domain = *domain
		}
	}
}

// serveE2B serves the E2B endpoint until ctx ends; it returns at once if
// the endpoint is off.
func serveE2B(ctx context.Context, cfg Config, mgr *manager.Manager, keys *store.Keys, tokenKey []byte, log *slog.Logger) (stop func(), err error) {
	if cfg.E2B.Listen == "" {
		return func() {}, nil
	}
	srv, err := e2b.New(e2b.Config{Domain: cfg.E2B.Domain, Templates: cfg.E2B.Templates, TokenKey: tokenKey,
		MaxFileBytes: cfg.MaxFileBytes}, mgr, keys, log)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.E2B.Listen)
	if err != nil {
		return nil, err
	}
	hs := srv.HTTPServer(cfg.E2B.Listen)
	go func() {
		if err := hs.Serve(ln); err != nil && ctx.Err() == nil {
			log.Error("e2b endpoint stopped", "err", err)
		}
	}()
	log.Info("E2B-compatible endpoint serving", "url", "http://"+ln.Addr().String(), "domain", cfg.E2B.Domain)
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}, nil
}
