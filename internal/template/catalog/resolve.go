package catalog

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/template"
)

// baseName returns the config name of a base template s names ("base",
// or a config template without a source), if it is one.
func (t *Catalog) baseName(s string) (string, bool) {
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
func (t *Catalog) resolve(owner, s string) (tplRef, error) {
	s = t.unalias(s)
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
func (t *Catalog) namesLocked(owner string) []string {
	var out []string
	for name := range t.cfg.BaseRuntimes {
		out = append(out, name)
	}
	for _, e := range t.cat.Templates {
		if e.Owner == "" || e.Owner == owner {
			out = append(out, e.ref())
		}
	}
	out = append(out, t.aliasNames()...)
	sort.Strings(out)
	return slices.Compact(out)
}

// Resolve returns the backend template name of owner's template s: the
// name the manager creates sandboxes with (manager.Templates).
func (t *Catalog) Resolve(ctx context.Context, owner, s string) (string, error) {
	r, err := t.resolve(owner, s)
	if err != nil {
		return "", err
	}
	return r.backendName(), nil
}

// Root resolves a backend template name ("@<store image>", or a shared
// config template with a source) to the layers of a sandbox root. The
// backend calls it (Config.Images).
func (t *Catalog) Root(name string) (*template.Root, error) {
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
