package catalog

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/paddock-sandbox/paddock/internal/template"
)

// Start imports the shared templates that are missing or changed (in the
// background) and removes leftovers; it sweeps unused images every
// interval until ctx ends.
func (t *Catalog) Start(ctx context.Context) {
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

func originOf(st Shared) string {
	b, _ := json.Marshal(st)
	return string(b)
}

func (t *Catalog) sharedByRef(ref string) (Shared, bool) {
	for name, st := range t.cfg.Shared {
		if canonical(name) == ref {
			return st, true
		}
	}
	return Shared{}, false
}

// importShared pulls one shared config template.
func (t *Catalog) importShared(ctx context.Context, name string) {
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
