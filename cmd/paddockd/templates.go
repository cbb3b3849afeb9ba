package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/paddock-sandbox/paddock/internal/backend/container"
	"github.com/paddock-sandbox/paddock/internal/manager"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/template"
)

// templateWiring connects the template store, the backend (which reads
// image layers through Images) and the manager's template service, which
// are created in that order but refer to each other.
type templateWiring struct {
	store   *template.Store
	backend *container.Backend
	tpls    *manager.Templates
}

// openTemplates opens the image store at <state-dir>/images with the
// config's disk budget. Set backend before anything calls the store.
func openTemplates(cfg Config, log *slog.Logger) (*templateWiring, error) {
	tw := &templateWiring{}
	st, err := template.Open(template.Config{
		Root:       filepath.Join(cfg.StateDir, "images"),
		DiskBudget: cfg.TemplateCacheBytes,
		Log:        log,
		InUse: func() []string {
			if tw.backend == nil {
				return nil
			}
			return tw.backend.LowersInUse()
		},
	})
	if err != nil {
		return nil, fmt.Errorf("template store: %w", err)
	}
	tw.store = st
	return tw, nil
}

// images is the backend's Config.Images.
func (tw *templateWiring) images(name string) (*template.Root, error) {
	if tw.tpls == nil {
		return nil, fmt.Errorf("%w: %q (templates are starting)", sandbox.ErrUnknownTemplate, name)
	}
	return tw.tpls.Root(name)
}

// start creates the manager's template service: shared templates from the
// config (imported in the background), base templates and their runtimes,
// and the directories API requests may import from.
func (tw *templateWiring) start(ctx context.Context, cfg Config, mgr *manager.Manager, log *slog.Logger) error {
	shared := map[string]manager.SharedTemplate{}
	bases := map[string]string{"base": ""}
	for name, t := range cfg.Templates {
		if !t.HasSource() {
			bases[name] = t.Runtime
			continue
		}
		src := template.Source{Registry: t.Image, Layout: t.OCILayout, Tarball: t.Tarball, Tag: t.Tag, Dir: t.Dir, Copy: t.Dir != ""}
		shared[name] = manager.SharedTemplate{Source: src, Runtime: t.Runtime}
	}
	dirs := cfg.TemplateImportDirs
	if len(dirs) == 0 {
		d := filepath.Join(cfg.StateDir, "import")
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
		dirs = []string{d}
	}
	tpls, err := manager.NewTemplates(mgr, manager.TemplatesConfig{
		Store: tw.store, CatalogPath: filepath.Join(cfg.StateDir, "templates.json"),
		Shared: shared, BaseRuntimes: bases, ImportDirs: dirs, Log: log,
	})
	if err != nil {
		return err
	}
	tw.tpls = tpls
	tpls.Start(ctx)
	return nil
}

func (tw *templateWiring) close() { tw.store.Close() }
