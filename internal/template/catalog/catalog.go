// Package catalog names templates: the per-key and shared template names
// and tags over the images of package template's store (the rootfs
// store), the build cache, and the builds and snapshots that add to them.
//
// Catalog resolves names for the manager and the backend and needs
// neither. Builder runs builds and snapshots in sandboxes it asks the
// manager for through the small Sandboxes interface, so it is created
// after the manager: the manager resolves names through the Catalog, and
// nothing depends on the Builder but the HTTP server.
package catalog

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
	"github.com/paddock-sandbox/paddock/internal/template"
)

// Templates are named, tagged sandbox roots: the base template (the
// host's system), config templates built on it, shared image templates
// from the daemon config, and per-key templates made through the API
// (pulled, built from a recipe or Dockerfile, or snapshotted from a
// sandbox). Images and layers live in a template.Store; this service
// keeps the names in a small catalog file next to it:
//
//	templates: name, tag, owner ("" = shared), store image, built on
//	           base or not, runtime, source
//	cache:     build-step key → store image (c-<key>), pulled base
//	           images (p-<hash of the reference>), and images still used
//	           by sandboxes after their name moved (orphan:<image>)
//
// A sandbox of a catalog template is created with the backend template
// name "@<store image>", which Root resolves back to layers.
type Catalog struct {
	cfg   Config
	store *template.Store
	log   *slog.Logger

	mu      sync.Mutex
	cat     catalog
	pulling map[string]string // shared template → "pulling" or "failed: ..."
	active  map[string]int    // store images an operation in progress uses
}

// Config configures a Catalog.
type Config struct {
	Store *template.Store
	// CatalogPath is the catalog file (created if missing).
	CatalogPath string
	// Shared are the config templates with a source, imported at Start.
	Shared map[string]Shared
	// BaseRuntimes maps the base template and the config templates built
	// on it to their runtime ("" = the default).
	BaseRuntimes map[string]string
	// Aliases map extra template names to a base or config template
	// (see alias.go); create with an alias is create with its target.
	Aliases map[string]string
	// ImportDirs are the host directories API requests may name
	// oci_layout and tarball sources in.
	ImportDirs []string
	// InUse counts live sandboxes by backend template name, so that
	// sweeps keep their images (the backend; nil: none).
	InUse InUse
	Log   *slog.Logger
}

// InUse is what the catalog needs of the backend.
type InUse interface {
	TemplatesInUse() map[string]int
}

// Shared is a config template with a source.
type Shared struct {
	Source  template.Source
	Runtime string
}

type catalog struct {
	Version   int                    `json:"version"`
	Templates []*tplEntry            `json:"templates"`
	Cache     map[string]*cacheEntry `json:"cache"`
}

type tplEntry struct {
	Name    string    `json:"name"`
	Tag     string    `json:"tag"`
	Owner   string    `json:"owner,omitempty"`
	Image   string    `json:"image"`
	OnBase  bool      `json:"on_base,omitempty"`
	Runtime string    `json:"runtime,omitempty"`
	Source  string    `json:"source"`
	Origin  string    `json:"origin,omitempty"` // shared: the config source, to notice changes
	Created time.Time `json:"created_at"`
}

func (e *tplEntry) ref() string { return e.Name + ":" + e.Tag }

type cacheEntry struct {
	Image   string    `json:"image"`
	OnBase  bool      `json:"on_base,omitempty"`
	Runtime string    `json:"runtime,omitempty"`
	Used    time.Time `json:"used"`
}

// tplRef is a resolved template: a store image (or none for the base
// template itself), whether it sits on base, and its runtime.
type tplRef struct {
	image    string // store image; "" for a base template (baseName set)
	baseName string // the config name of a base template
	onBase   bool
	runtime  string
}

// backendName is the template name the backend gets for r.
func (r tplRef) backendName() string {
	if r.image == "" {
		return r.baseName
	}
	return "@" + r.image
}

var (
	tplNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	tplTagPattern  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)
)

// parseTemplateName splits "name[:tag]" (tag "latest" by default).
func parseTemplateName(s string) (name, tag string, err error) {
	name, tag, ok := strings.Cut(s, ":")
	if !ok {
		tag = "latest"
	}
	if !tplNamePattern.MatchString(name) || !tplTagPattern.MatchString(tag) {
		return "", "", fmt.Errorf("%w: template name %q: want name[:tag] of letters, digits, '.', '_' and '-'", sandbox.ErrInvalid, s)
	}
	return name, tag, nil
}

// canonical returns "name:tag" for s, or s itself if it does not parse.
func canonical(s string) string {
	n, t, err := parseTemplateName(s)
	if err != nil {
		return s
	}
	return n + ":" + t
}

// New loads the catalog of cfg. Call Start to import shared templates and
// sweep.
func New(cfg Config) (*Catalog, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if err := checkAliases(cfg); err != nil {
		return nil, err
	}
	t := &Catalog{cfg: cfg, store: cfg.Store, log: cfg.Log,
		pulling: map[string]string{}, active: map[string]int{}}
	t.cat.Cache = map[string]*cacheEntry{}
	b, err := os.ReadFile(cfg.CatalogPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("template catalog: %w", err)
	default:
		if err := json.Unmarshal(b, &t.cat); err != nil {
			return nil, fmt.Errorf("template catalog %s: %w", cfg.CatalogPath, err)
		}
		if t.cat.Cache == nil {
			t.cat.Cache = map[string]*cacheEntry{}
		}
	}
	t.cat.Version = 1
	return t, nil
}

func newImageName() string {
	b := make([]byte, 10)
	rand.Read(b)
	return "t-" + hex.EncodeToString(b)
}

// saveLocked writes the catalog atomically. t.mu must be held.
func (t *Catalog) saveLocked() error {
	b, err := json.MarshalIndent(&t.cat, "", "  ")
	if err != nil {
		return err
	}
	if err = store.WriteFileAtomic(t.cfg.CatalogPath, append(b, '\n'), 0o600); err != nil {
		t.log.Error("template: saving the catalog failed", "err", err)
	}
	return err
}

// find returns owner's entry for canonical ref ("" = shared), or nil.
func (t *Catalog) find(owner, ref string) *tplEntry {
	for _, e := range t.cat.Templates {
		if e.Owner == owner && e.ref() == ref {
			return e
		}
	}
	return nil
}

// putLocked adds e, replacing the entry of the same owner and name; the
// replaced entry's image is kept as an orphan while sandboxes use it.
func (t *Catalog) putLocked(e *tplEntry) {
	for i, old := range t.cat.Templates {
		if old.Owner == e.Owner && old.ref() == e.ref() {
			t.orphanLocked(old)
			t.cat.Templates[i] = e
			t.saveLocked()
			return
		}
	}
	t.cat.Templates = append(t.cat.Templates, e)
	t.saveLocked()
}

// orphanLocked remembers how to build roots from e's image after e is
// gone; sweep drops it once no sandbox uses the image.
func (t *Catalog) orphanLocked(e *tplEntry) {
	t.cat.Cache["orphan:"+e.Image] = &cacheEntry{Image: e.Image, OnBase: e.OnBase, Runtime: e.Runtime, Used: time.Now().UTC()}
}

func (t *Catalog) hasImage(name string) bool {
	_, err := t.store.Get(name)
	return err == nil
}
