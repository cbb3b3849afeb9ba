package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/template"
)

// List returns the templates owner can see: base ones, shared ones and
// its own, by name.
func (t *Catalog) List(ctx context.Context, owner string) []Template {
	var out []Template
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
		out = append(out, Template{Name: ref, Source: "config", Shared: true, Status: st})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Shared && !out[j].Shared
	})
	return out
}

func (t *Catalog) baseAPI(name, runtime string) Template {
	src := "host system"
	if name != "base" {
		src = "base (config)"
	}
	return Template{Name: name, Source: src, Shared: true, OnBase: true, Runtime: runtime, Status: "ready"}
}

func (t *Catalog) toAPI(e *tplEntry) Template {
	out := Template{Name: e.ref(), Source: e.Source, CreatedAt: e.Created, Shared: e.Owner == "",
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
func (t *Catalog) Get(ctx context.Context, owner, s string) (*Template, error) {
	s = t.unalias(s)
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
		return &Template{Name: ref, Source: "config", Shared: true, Status: st}, nil
	}
	return nil, fmt.Errorf("template %s: %w", s, sandbox.ErrNotFound)
}

// Delete removes owner's template s. Shared templates cannot be deleted
// through the API; a template a live sandbox (or a build) uses cannot be
// deleted at all. Layers nothing else uses are removed at once.
func (t *Catalog) Delete(ctx context.Context, owner, s string) error {
	if _, ok := t.baseName(s); ok || t.isAlias(s) {
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
func (t *Catalog) inUse() map[string]int {
	if t.cfg.InUse != nil {
		return t.cfg.InUse.TemplatesInUse()
	}
	return map[string]int{}
}

// sweep deletes store images no catalog entry, cache entry, operation or
// sandbox uses, drops orphan records whose image is no longer used, and
// garbage-collects unreferenced layers.
func (t *Catalog) sweep(ctx context.Context) {
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
func (t *Catalog) withBudget(ctx context.Context, fn func() error) error {
	err := fn()
	for errors.Is(err, template.ErrBudget) && ctx.Err() == nil && t.evictCache(ctx) {
		err = fn()
	}
	return err
}

// evictCache drops the older half (at least one) of the build-cache
// entries no operation uses and collects their layers; it reports whether
// anything was dropped.
func (t *Catalog) evictCache(ctx context.Context) bool {
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
func (t *Catalog) hold(images ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, im := range images {
		if im != "" {
			t.active[im]++
		}
	}
}

func (t *Catalog) release(images ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, im := range images {
		if t.active[im]--; t.active[im] <= 0 {
			delete(t.active, im)
		}
	}
}

// checkNewName validates a name for a new per-key template.
func (t *Catalog) checkNewName(s string) (name, tag string, err error) {
	name, tag, err = parseTemplateName(s)
	if err != nil {
		return "", "", err
	}
	if _, ok := t.baseName(s); ok || strings.HasPrefix(s, "@") || t.isAlias(s) {
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
func (t *Catalog) register(owner, name, tag, img string, r tplRef, source string) *Template {
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
func (t *Catalog) importSource(ctx context.Context, owner, name, tag string, src *Source) (*Template, error) {
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
func (t *Catalog) copyImage(name string, parent tplRef, cfg template.ImageConfig) error {
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
// directory (symlinks resolved), with one error for every refused path.
func (t *Catalog) importPath(p string) (string, error) {
	real, err := template.ImportPath(t.cfg.ImportDirs, p)
	if err != nil {
		return "", fmt.Errorf("%w: %s", sandbox.ErrInvalid, template.ErrImportPath)
	}
	return real, nil
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
