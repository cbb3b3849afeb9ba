package manager

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/paddock-sandbox/paddock/api"
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
type Templates struct {
	cfg   TemplatesConfig
	m     *Manager
	store *template.Store
	log   *slog.Logger

	mu      sync.Mutex
	cat     catalog
	pulling map[string]string // shared template → "pulling" or "failed: ..."
	active  map[string]int    // store images an operation in progress uses
}

// TemplatesConfig configures the template service.
type TemplatesConfig struct {
	Store *template.Store
	// CatalogPath is the catalog file (created if missing).
	CatalogPath string
	// Shared are the config templates with a source, imported at Start.
	Shared map[string]SharedTemplate
	// BaseRuntimes maps the base template and the config templates built
	// on it to their runtime ("" = the default).
	BaseRuntimes map[string]string
	// ImportDirs are the host directories API requests may name
	// oci_layout and tarball sources in.
	ImportDirs []string
	Log        *slog.Logger
}

// SharedTemplate is a config template with a source.
type SharedTemplate struct {
	Source  template.Source
	Runtime string
}

// imageBackend is what templates need of the backend beyond
// sandbox.Backend.
type imageBackend interface {
	Upper(id string) (template.Upper, error)
	TemplatesInUse() map[string]int
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

// NewTemplates starts the template service of m and loads its catalog.
func NewTemplates(m *Manager, cfg TemplatesConfig) (*Templates, error) {
	if cfg.Log == nil {
		cfg.Log = m.log
	}
	t := &Templates{cfg: cfg, m: m, store: cfg.Store, log: cfg.Log,
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
	m.tpl = t
	return t, nil
}

// Start imports the shared templates that are missing or changed (in the
// background) and removes leftovers; it sweeps unused images every
// interval until ctx ends.
func (t *Templates) Start(ctx context.Context) {
	t.mu.Lock()
	keep := t.cat.Templates[:0]
	var todo []string
	for _, e := range t.cat.Templates {
		if e.Owner != "" {
			keep = append(keep, e)
			continue
		}
		st, ok := t.sharedByRef(e.ref())
		if ok && e.Origin == originOf(st) && t.hasImage(e.Image) {
			keep = append(keep, e)
		} else {
			t.orphanLocked(e) // sandboxes may still run on it; sweep drops it after them
		}
	}
	t.cat.Templates = keep
	for name, st := range t.cfg.Shared {
		if e := t.find("", canonical(name)); e == nil || e.Origin != originOf(st) {
			todo = append(todo, name)
			t.pulling[canonical(name)] = "pulling"
		}
	}
	t.saveLocked()
	t.mu.Unlock()
	sort.Strings(todo)
	go func() {
		for _, name := range todo {
			t.importShared(ctx, name)
		}
		t.sweep(ctx)
		tick := time.NewTicker(10 * time.Minute)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				t.sweep(ctx)
			}
		}
	}()
}

func originOf(st SharedTemplate) string {
	b, _ := json.Marshal(st)
	return string(b)
}

func (t *Templates) sharedByRef(ref string) (SharedTemplate, bool) {
	for name, st := range t.cfg.Shared {
		if canonical(name) == ref {
			return st, true
		}
	}
	return SharedTemplate{}, false
}

// importShared pulls one shared config template.
func (t *Templates) importShared(ctx context.Context, name string) {
	st := t.cfg.Shared[name]
	ref := canonical(name)
	start := time.Now()
	img := newImageName()
	t.hold(img)
	defer t.release(img)
	err := t.withBudget(ctx, func() error {
		_, err := t.store.Pull(ctx, img, st.Source)
		return err
	})
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.pulling[ref] = "failed: " + err.Error()
		t.log.Error("template: importing shared template failed", "template", name, "err", err)
		return
	}
	n, tag, _ := parseTemplateName(ref)
	t.putLocked(&tplEntry{Name: n, Tag: tag, Image: img, Runtime: st.Runtime, Source: describeSource(st.Source),
		Origin: originOf(st), Created: time.Now().UTC()})
	delete(t.pulling, ref)
	t.log.Info("template: shared template ready", "template", ref, "source", describeSource(st.Source), "took", time.Since(start).Round(time.Millisecond))
}

func describeSource(src template.Source) string {
	switch {
	case src.Registry != "":
		return "image " + src.Registry
	case src.Layout != "":
		return "oci_layout " + src.Layout
	case src.Tarball != "":
		return "tarball " + src.Tarball
	}
	return "dir " + src.Dir
}

func newImageName() string {
	b := make([]byte, 10)
	rand.Read(b)
	return "t-" + hex.EncodeToString(b)
}

// saveLocked writes the catalog atomically. t.mu must be held.
func (t *Templates) saveLocked() error {
	b, err := json.MarshalIndent(&t.cat, "", "  ")
	if err != nil {
		return err
	}
	if err := store.WriteFileAtomic(t.cfg.CatalogPath, append(b, '\n'), 0o600); err != nil {
		t.log.Error("template: saving the catalog failed", "err", err)
	}
	return err
}

// find returns owner's entry for canonical ref ("" = shared), or nil.
func (t *Templates) find(owner, ref string) *tplEntry {
	for _, e := range t.cat.Templates {
		if e.Owner == owner && e.ref() == ref {
			return e
		}
	}
	return nil
}

// putLocked adds e, replacing the entry of the same owner and name; the
// replaced entry's image is kept as an orphan while sandboxes use it.
func (t *Templates) putLocked(e *tplEntry) {
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
func (t *Templates) orphanLocked(e *tplEntry) {
	t.cat.Cache["orphan:"+e.Image] = &cacheEntry{Image: e.Image, OnBase: e.OnBase, Runtime: e.Runtime, Used: time.Now().UTC()}
}

func (t *Templates) hasImage(name string) bool {
	_, err := t.store.Get(name)
	return err == nil
}

// baseName returns the config name of a base template s names ("base",
// or a config template without a source), if it is one.
func (t *Templates) baseName(s string) (string, bool) {
	if s == "" {
		s = "base"
	}
	if _, ok := t.cfg.BaseRuntimes[s]; ok {
		return s, true
	}
	c := canonical(s)
	for name := range t.cfg.BaseRuntimes {
		if canonical(name) == c {
			return name, true
		}
	}
	return "", false
}

// resolve finds the template owner means by s: a base template, owner's
// own template, or a shared one, in that order.
func (t *Templates) resolve(owner, s string) (tplRef, error) {
	if name, ok := t.baseName(s); ok {
		return tplRef{baseName: name, onBase: true, runtime: t.cfg.BaseRuntimes[name]}, nil
	}
	ref := canonical(s)
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.find(owner, ref)
	if e == nil {
		e = t.find("", ref)
	}
	if e != nil {
		return tplRef{image: e.Image, onBase: e.OnBase, runtime: e.Runtime}, nil
	}
	if st, ok := t.pulling[ref]; ok {
		if st == "pulling" {
			return tplRef{}, fmt.Errorf("%w: template %s is still being imported; try again shortly", sandbox.ErrNoCapacity, s)
		}
		return tplRef{}, fmt.Errorf("%w: %q: importing it %s", sandbox.ErrUnknownTemplate, s, st)
	}
	return tplRef{}, fmt.Errorf("%w: %q (available: %s)", sandbox.ErrUnknownTemplate, s, strings.Join(t.namesLocked(owner), ", "))
}

// namesLocked lists the template names owner can use. t.mu must be held.
func (t *Templates) namesLocked(owner string) []string {
	var out []string
	for name := range t.cfg.BaseRuntimes {
		out = append(out, name)
	}
	for _, e := range t.cat.Templates {
		if e.Owner == "" || e.Owner == owner {
			out = append(out, e.ref())
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// templateRef is the backend template name for owner's template s
// (validate has applied the default "base").
func (m *Manager) templateRef(owner, s string) (string, error) {
	if m.tpl == nil {
		return s, nil
	}
	r, err := m.tpl.resolve(owner, s)
	if err != nil {
		return "", err
	}
	return r.backendName(), nil
}

// Root resolves a backend template name ("@<store image>", or a shared
// config template with a source) to the layers of a sandbox root. The
// backend calls it (Config.Images).
func (t *Templates) Root(name string) (*template.Root, error) {
	var r tplRef
	if img, ok := strings.CutPrefix(name, "@"); ok {
		t.mu.Lock()
		r.image = img
		found := false
		for _, e := range t.cat.Templates {
			if e.Image == img {
				r.onBase, r.runtime, found = e.OnBase, e.Runtime, true
				break
			}
		}
		for _, c := range t.cat.Cache {
			if !found && c.Image == img {
				r.onBase, r.runtime, found = c.OnBase, c.Runtime, true
			}
		}
		t.mu.Unlock()
		if !found {
			return nil, fmt.Errorf("%w: %q", sandbox.ErrUnknownTemplate, name)
		}
	} else {
		var err error
		if r, err = t.resolve("", name); err != nil {
			return nil, err
		}
		if r.image == "" {
			return nil, fmt.Errorf("%w: %q is a base template", sandbox.ErrUnknownTemplate, name)
		}
	}
	im, err := t.store.Get(r.image)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", sandbox.ErrUnknownTemplate, name, err)
	}
	return &template.Root{Ref: name, Lower: im.LowerDirs, OnBase: r.onBase, Env: im.Config.Env, Runtime: r.runtime}, nil
}

// List returns the templates owner can see: base ones, shared ones and
// its own, by name.
func (t *Templates) List(owner string) []api.Template {
	var out []api.Template
	for name, rt := range t.cfg.BaseRuntimes {
		out = append(out, t.baseAPI(name, rt))
	}
	t.mu.Lock()
	var entries []*tplEntry
	for _, e := range t.cat.Templates {
		if e.Owner == "" || e.Owner == owner {
			entries = append(entries, e)
		}
	}
	pending := map[string]string{}
	for ref, st := range t.pulling {
		if t.find("", ref) == nil {
			pending[ref] = st
		}
	}
	t.mu.Unlock()
	for _, e := range entries {
		out = append(out, t.toAPI(e))
	}
	for ref, st := range pending {
		out = append(out, api.Template{Name: ref, Source: "config", Shared: true, Status: st})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Shared && !out[j].Shared
	})
	return out
}

func (t *Templates) baseAPI(name, runtime string) api.Template {
	src := "host system"
	if name != "base" {
		src = "base (config)"
	}
	return api.Template{Name: name, Source: src, Shared: true, OnBase: true, Runtime: runtime, Status: "ready"}
}

func (t *Templates) toAPI(e *tplEntry) api.Template {
	out := api.Template{Name: e.ref(), Source: e.Source, CreatedAt: e.Created, Shared: e.Owner == "",
		Owner: e.Owner, Runtime: e.Runtime, OnBase: e.OnBase, Status: "ready"}
	if im, err := t.store.Get(e.Image); err == nil {
		out.Digest, out.Size, out.Layers = im.Digest, im.Size, len(im.Layers)
		out.Env, out.Workdir, out.User, out.Cmd = im.Config.Env, im.Config.WorkingDir, im.Config.User, im.Config.Cmd
	} else {
		out.Status = "failed: " + err.Error()
	}
	return out
}

// Get returns the template owner sees as s.
func (t *Templates) Get(owner, s string) (*api.Template, error) {
	if name, ok := t.baseName(s); ok {
		a := t.baseAPI(name, t.cfg.BaseRuntimes[name])
		return &a, nil
	}
	ref := canonical(s)
	t.mu.Lock()
	e := t.find(owner, ref)
	if e == nil {
		e = t.find("", ref)
	}
	st, pending := t.pulling[ref]
	t.mu.Unlock()
	switch {
	case e != nil:
		a := t.toAPI(e)
		return &a, nil
	case pending:
		return &api.Template{Name: ref, Source: "config", Shared: true, Status: st}, nil
	}
	return nil, fmt.Errorf("template %s: %w", s, sandbox.ErrNotFound)
}

// Delete removes owner's template s. Shared templates cannot be deleted
// through the API; a template a live sandbox (or a build) uses cannot be
// deleted at all. Layers nothing else uses are removed at once.
func (t *Templates) Delete(ctx context.Context, owner, s string) error {
	if _, ok := t.baseName(s); ok {
		return fmt.Errorf("%w: template %s is shared (defined by the daemon config)", sandbox.ErrInvalid, s)
	}
	ref := canonical(s)
	inUse := t.inUse()
	t.mu.Lock()
	e := t.find(owner, ref)
	if e == nil {
		shared := t.find("", ref) != nil
		t.mu.Unlock()
		if shared {
			return fmt.Errorf("%w: template %s is shared (defined by the daemon config)", sandbox.ErrInvalid, s)
		}
		return fmt.Errorf("template %s: %w", s, sandbox.ErrNotFound)
	}
	if n := inUse["@"+e.Image] + t.active[e.Image]; n > 0 {
		t.mu.Unlock()
		return fmt.Errorf("%w: template %s is in use by %d sandbox(es) or build(s); delete them first", sandbox.ErrConflict, ref, n)
	}
	t.cat.Templates = slices.DeleteFunc(t.cat.Templates, func(x *tplEntry) bool { return x == e })
	t.saveLocked()
	t.mu.Unlock()
	t.log.Info("template deleted", "template", ref, "owner", owner)
	t.sweep(ctx)
	return nil
}

// inUse counts live sandboxes by backend template name.
func (t *Templates) inUse() map[string]int {
	if ib, ok := t.m.backend.(imageBackend); ok {
		return ib.TemplatesInUse()
	}
	return map[string]int{}
}

// sweep deletes store images no catalog entry, cache entry, operation or
// sandbox uses, drops orphan records whose image is no longer used, and
// garbage-collects unreferenced layers.
func (t *Templates) sweep(ctx context.Context) {
	inUse := t.inUse()
	images, err := t.store.List()
	if err != nil {
		return
	}
	t.mu.Lock()
	keep := map[string]bool{}
	for _, e := range t.cat.Templates {
		keep[e.Image] = true
	}
	for key, c := range t.cat.Cache {
		if strings.HasPrefix(key, "orphan:") && inUse["@"+c.Image] == 0 && t.active[c.Image] == 0 && !keep[c.Image] {
			delete(t.cat.Cache, key)
			continue
		}
		keep[c.Image] = true
	}
	var drop []string
	for _, im := range images {
		if !keep[im.Name] && inUse["@"+im.Name] == 0 && t.active[im.Name] == 0 {
			drop = append(drop, im.Name)
		}
	}
	for _, name := range drop {
		t.store.Delete(name)
	}
	t.saveLocked()
	t.mu.Unlock()
	if freed, err := t.store.GC(ctx); err != nil {
		t.log.Warn("template: gc", "err", err)
	} else if len(drop) > 0 || freed > 0 {
		t.log.Info("template: swept unused images", "images", len(drop), "freed_bytes", freed)
	}
}

// withBudget runs fn; when it fails for the store's disk budget it
// drops the least recently used build-cache entries and tries again.
func (t *Templates) withBudget(ctx context.Context, fn func() error) error {
	err := fn()
	for errors.Is(err, template.ErrBudget) && ctx.Err() == nil && t.evictCache(ctx) {
		err = fn()
	}
	return err
}

// evictCache drops the older half (at least one) of the build-cache
// entries no operation uses and collects their layers; it reports whether
// anything was dropped.
func (t *Templates) evictCache(ctx context.Context) bool {
	t.mu.Lock()
	type kv struct {
		key string
		c   *cacheEntry
	}
	var cands []kv
	for k, c := range t.cat.Cache {
		if !strings.HasPrefix(k, "orphan:") && t.active[c.Image] == 0 {
			cands = append(cands, kv{k, c})
		}
	}
	if len(cands) == 0 {
		t.mu.Unlock()
		return false
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].c.Used.Before(cands[j].c.Used) })
	n := max(1, len(cands)/2)
	for _, x := range cands[:n] {
		delete(t.cat.Cache, x.key)
		t.store.Delete(x.c.Image)
	}
	t.saveLocked()
	t.mu.Unlock()
	t.log.Info("template: evicted build cache entries for the disk budget", "entries", n)
	t.store.GC(ctx)
	return true
}

// hold marks store images as used by an operation until release.
func (t *Templates) hold(images ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, im := range images {
		if im != "" {
			t.active[im]++
		}
	}
}

func (t *Templates) release(images ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, im := range images {
		if t.active[im]--; t.active[im] <= 0 {
			delete(t.active, im)
		}
	}
}

// checkNewName validates a name for a new per-key template.
func (t *Templates) checkNewName(s string) (name, tag string, err error) {
	name, tag, err = parseTemplateName(s)
	if err != nil {
		return "", "", err
	}
	if _, ok := t.baseName(s); ok || strings.HasPrefix(s, "@") {
		return "", "", fmt.Errorf("%w: %s is a shared template's name", sandbox.ErrConflict, s)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	_, shared := t.sharedByRef(name + ":" + tag)
	if shared || t.find("", name+":"+tag) != nil {
		return "", "", fmt.Errorf("%w: %s:%s is a shared template's name", sandbox.ErrConflict, name, tag)
	}
	return name, tag, nil
}

// register saves owner's template name:tag pointing at store image img.
func (t *Templates) register(owner, name, tag, img string, r tplRef, source string) *api.Template {
	e := &tplEntry{Name: name, Tag: tag, Owner: owner, Image: img, OnBase: r.onBase, Runtime: r.runtime,
		Source: source, Created: time.Now().UTC()}
	t.mu.Lock()
	t.putLocked(e)
	t.mu.Unlock()
	t.log.Info("template saved", "template", e.ref(), "owner", owner, "source", source, "image", img)
	a := t.toAPI(e)
	return &a
}

// importSource makes owner's template from an image source or another
// template.
func (t *Templates) importSource(ctx context.Context, owner, name, tag string, src *api.TemplateSource) (*api.Template, error) {
	n := 0
	for _, s := range []string{src.Image, src.OCILayout, src.Tarball, src.Template} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return nil, fmt.Errorf("%w: from needs exactly one of image, oci_layout, tarball, template", sandbox.ErrInvalid)
	}
	if src.Template != "" {
		parent, err := t.resolve(owner, src.Template)
		if err != nil {
			return nil, err
		}
		img := newImageName()
		t.hold(img)
		defer t.release(img)
		if err := t.copyImage(img, parent, template.ImageConfig{}); err != nil {
			return nil, err
		}
		return t.register(owner, name, tag, img, parent, "template "+canonicalOrBase(src.Template)), nil
	}
	var ts template.Source
	switch {
	case src.Image != "":
		ts = template.Source{Registry: src.Image}
	case src.OCILayout != "":
		p, err := t.importPath(src.OCILayout)
		if err != nil {
			return nil, err
		}
		ts = template.Source{Layout: p, Tag: src.Tag}
	default:
		p, err := t.importPath(src.Tarball)
		if err != nil {
			return nil, err
		}
		ts = template.Source{Tarball: p, Tag: src.Tag}
	}
	img := newImageName()
	t.hold(img)
	defer t.release(img)
	err := t.withBudget(ctx, func() error {
		_, err := t.store.Pull(ctx, img, ts)
		return err
	})
	if err != nil {
		return nil, storeErr(err)
	}
	return t.register(owner, name, tag, img, tplRef{image: img}, describeSource(ts)), nil
}

func canonicalOrBase(s string) string {
	if !strings.Contains(s, ":") && (s == "base" || s == "") {
		return "base"
	}
	return canonical(s)
}

// copyImage saves store image name with parent's layers and config (a
// base template has none: cfg is used). Hold name first.
func (t *Templates) copyImage(name string, parent tplRef, cfg template.ImageConfig) error {
	im := template.Image{Name: name, Config: cfg}
	if parent.image != "" {
		src, err := t.store.Get(parent.image)
		if err != nil {
			return fmt.Errorf("%w: %v", sandbox.ErrUnknownTemplate, err)
		}
		im.Layers, im.Config, im.Digest, im.Source = src.Layers, src.Config, src.Digest, src.Source
	}
	_, err := t.store.Save(im)
	return storeErr(err)
}

// importPath checks that an API-named host path is inside an import
// directory (symlinks resolved).
func (t *Templates) importPath(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%w: %q is not an absolute path", sandbox.ErrInvalid, p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("%w: %s: not found in the template import directories", sandbox.ErrInvalid, p)
	}
	for _, d := range t.cfg.ImportDirs {
		rd, err := filepath.EvalSymlinks(d)
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(rd, real); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return real, nil
		}
	}
	return "", fmt.Errorf("%w: %s is outside the daemon's template import directories (config template_import_dirs)", sandbox.ErrInvalid, p)
}

// storeErr maps template store errors to the sandbox error classes.
func storeErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, template.ErrNotFound):
		return fmt.Errorf("%w: %v", sandbox.ErrUnknownTemplate, err)
	case errors.Is(err, template.ErrInvalid), errors.Is(err, template.ErrUnsafe), errors.Is(err, template.ErrInsecure):
		return fmt.Errorf("%w: %v", sandbox.ErrInvalid, err)
	case errors.Is(err, template.ErrLimit):
		return fmt.Errorf("%w: %v", sandbox.ErrTooLarge, err)
	case errors.Is(err, template.ErrBudget), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err // ErrBudget keeps its identity: the server answers 507
	}
	// What is left comes from fetching the source: a registry that does
	// not know the image, a file that is not an image, ...
	return fmt.Errorf("%w: %v", sandbox.ErrInvalid, err)
}

// keyHash names a cache entry's store image.
func keyHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// Templates returns the template service, nil when templates are off.
func (m *Manager) Templates() *Templates { return m.tpl }
