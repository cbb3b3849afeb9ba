package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/paddock-sandbox/paddock/internal/egress"
	"github.com/paddock-sandbox/paddock/internal/template"
	"github.com/paddock-sandbox/paddock/internal/template/catalog"
)

// The template store, the backend and the catalog refer to each other:
// the store's garbage collector asks which image layers sandboxes use
// (the backend), the backend asks for the layers of a template's root
// (the catalog), and the catalog's sweeps ask which templates sandboxes
// use (the backend). serve creates them in that order; the first two
// references are closures over variables set before anything calls them
// (the store collects garbage and the backend resolves roots only once
// sandboxes are created, after wiring).

// openImages opens the image store at <state-dir>/images with the
// config's disk budget; lowers reports the layers the backend uses.
func openImages(cfg Config, lowers func() []string, log *slog.Logger) (*template.Store, error) {
	host, _ := egress.HostPrefixes()
	regs, err := template.NewRegistryPolicy(cfg.RegistryAllow, host)
	if err != nil {
		return nil, err
	}
	st, err := template.Open(template.Config{
		Root:       filepath.Join(cfg.StateDir, "images"),
		DiskBudget: cfg.TemplateCacheBytes, // defaulted in run
		Registries: regs,
		Log:        log,
		InUse:      lowers,
	})
	if err != nil {
		return nil, fmt.Errorf("template store: %w", err)
	}
	return st, nil
}

// newCatalog creates the template catalog: shared templates from the
// config (imported in the background by Start), base templates and their
// runtimes, and the directories API requests may import from.
func newCatalog(cfg Config, st *template.Store, inUse catalog.InUse, log *slog.Logger) (*catalog.Catalog, error) {
	shared := map[string]catalog.Shared{}
	bases := map[string]string{"base": ""}
	for name, t := range cfg.Templates {
		if !t.HasSource() {
			bases[name] = t.Runtime
			continue
		}
		src := template.Source{Registry: t.Image, Layout: t.OCILayout, Tarball: t.Tarball, Tag: t.Tag, Dir: t.Dir, Copy: t.Dir != ""}
		shared[name] = catalog.Shared{Source: src, Runtime: t.Runtime}
	}
	dirs := cfg.TemplateImportDirs
	if len(dirs) == 0 {
		d := filepath.Join(cfg.StateDir, "import")
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
		dirs = []string{d}
	}
	return catalog.New(catalog.Config{
		Store: st, CatalogPath: filepath.Join(cfg.StateDir, "templates.json"),
		Shared: shared, BaseRuntimes: bases, Aliases: cfg.TemplateAliases, ImportDirs: dirs, InUse: inUse, Log: log,
	})
}

// aliasFlag collects --template-alias NAME=TEMPLATE flags.
type aliasFlag map[string]string

func (a aliasFlag) String() string { return "" }

func (a aliasFlag) Set(v string) error {
	name, target, ok := strings.Cut(v, "=")
	if !ok || name == "" || target == "" {
		return fmt.Errorf("want NAME=TEMPLATE, got %q", v)
	}
	a[name] = target
	return nil
}

// into adds the flags' aliases to cfg (flags win) and returns it.
func (a aliasFlag) into(cfg map[string]string) map[string]string {
	if len(a) == 0 {
		return cfg
	}
	if cfg == nil {
		cfg = map[string]string{}
	}
	for k, v := range a {
		cfg[k] = v
	}
	return cfg
}
