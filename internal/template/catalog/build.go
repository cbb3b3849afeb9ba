package catalog

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/template"
)

// Build limits.
const (
	defaultStepTimeout = 600 * time.Second
	maxStepOutput      = 4 << 20
	// networkHint ends the error of a failed apt, pip or npm step.
	networkHint = "apt, pip and npm steps download packages, and sandboxes have no network access yet: " +
		"they need a package mirror reachable from inside the sandbox (see docs/templates.md)"
)

// CreateTemplate makes owner's template from req: imported from a source,
// or built from a recipe or a Dockerfile (whose COPY and ADD read bc, or
// req.Context when bc is nil). emit, if not nil, receives the build's
// progress events; the error, if any, is returned and not emitted.
func (t *Builder) CreateTemplate(ctx context.Context, owner string, req BuildRequest, bc template.BuildContext, emit func(BuildEvent)) (*Template, error) {
	if emit == nil {
		emit = func(BuildEvent) {}
	}
	name, tag, err := t.checkNewName(req.Name)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, set := range []bool{req.From != nil, req.Recipe != nil, req.Dockerfile != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, fmt.Errorf("%w: set exactly one of from, recipe and dockerfile", sandbox.ErrInvalid)
	}
	if req.From != nil {
		emit(BuildEvent{Type: EventStep, Steps: 0, Instruction: "IMPORT " + describeAPISource(req.From)})
		start := time.Now()
		tpl, err := t.importSource(ctx, owner, name, tag, req.From)
		if err == nil {
			emit(BuildEvent{Type: EventDone, Template: tpl, DurationMS: time.Since(start).Milliseconds()})
		}
		return tpl, err
	}
	o := buildOpts{timeout: defaultStepTimeout, noCache: req.NoCache}
	if s := req.StepTimeoutSeconds; s != 0 {
		o.timeout = time.Duration(s) * time.Second
		if s < 0 {
			o.timeout = -1
		}
	}
	o.spec, err = t.sb.CheckBuild(ctx, owner, BuildSpec{Resources: req.Resources,
		Network: req.Network, StepTimeout: o.timeout})
	if err != nil {
		return nil, err
	}
	recipe, source := req.Recipe, ""
	if req.Dockerfile != "" {
		if bc == nil {
			if bc, err = template.ContextFromMap(req.Context); err != nil {
				return nil, storeErr(err)
			}
		}
		df, err := template.ParseDockerfile(req.Dockerfile, bc, req.BuildArgs)
		if err != nil {
			return nil, storeErr(err)
		}
		for _, w := range df.Warnings {
			emit(BuildEvent{Type: EventOutput, Stream: "stderr", Output: "warning: " + w + "\n"})
		}
		recipe, source = &df.Recipe, "dockerfile from "+df.Recipe.From
	} else {
		if err := template.ValidateRecipe(recipe); err != nil {
			return nil, storeErr(err)
		}
		source = "recipe from " + recipe.From
	}
	return t.build(ctx, owner, name, tag, recipe, source, o, emit)
}

func describeAPISource(s *Source) string {
	switch {
	case s.Image != "":
		return "image " + s.Image
	case s.OCILayout != "":
		return "oci_layout " + s.OCILayout
	case s.Tarball != "":
		return "tarball " + s.Tarball
	}
	return "template " + s.Template
}

type buildOpts struct {
	spec    BuildSpec // resources and network of the build sandboxes
	timeout time.Duration
	noCache bool
}

// build runs a recipe: every step is looked up in the cache by its key
// (the owner, the starting template, and every step so far) and only run
// when missing.
func (t *Builder) build(ctx context.Context, owner, name, tag string, rec *api.Recipe, source string, o buildOpts, emit func(BuildEvent)) (*Template, error) {
	start := time.Now()
	total := len(rec.Steps)
	emit(BuildEvent{Type: EventStep, Step: 0, Steps: total, Instruction: "FROM " + rec.From})
	cur, identity, cached, err := t.buildFrom(ctx, owner, rec.From, emit)
	if err != nil {
		return nil, fmt.Errorf("FROM %s: %w", rec.From, err)
	}
	held := []string{cur.image}
	t.hold(cur.image)
	defer func() { t.release(held...) }()
	if cached {
		emit(BuildEvent{Type: EventCached, Step: 0, Steps: total, Instruction: "FROM " + rec.From})
	}
	var cfg template.ImageConfig
	var layers []string
	if cur.image != "" {
		im, err := t.store.Get(cur.image)
		if err != nil {
			return nil, storeErr(err)
		}
		cfg, layers = im.Config, im.Layers
	}
	key := template.FromKey(owner, identity, cur.runtime)
	for i, st := range rec.Steps {
		k, _ := template.StepKind(st)
		key = template.StepKey(key, st)
		ev := BuildEvent{Type: EventStep, Step: i + 1, Steps: total, Instruction: template.Describe(st)}
		emit(ev)
		stepStart := time.Now()
		if c := t.cacheHit(key); c != nil && !o.noCache {
			im, err := t.store.Get(c.Image)
			if err == nil {
				cur = tplRef{image: c.Image, onBase: cur.onBase, runtime: cur.runtime}
				t.hold(cur.image)
				held = append(held, cur.image)
				cfg, layers = im.Config, im.Layers
				ev.Type = EventCached
				emit(ev)
				continue
			}
		}
		img := "c-" + key[:40]
		t.hold(img) // before it exists: a concurrent sweep must not take it
		held = append(held, img)
		var saved *template.Image
		if template.ChangesFiles(k) {
			saved, err = t.runStep(ctx, owner, cur, cfg, k, st, img, o, i+1, emit)
		} else {
			saved, err = t.store.Save(template.Image{Name: img, Layers: layers, Config: template.ApplyConfig(cfg, k, st)})
			err = storeErr(err)
		}
		if err != nil {
			return nil, fmt.Errorf("step %d/%d (%s): %w", i+1, total, ev.Instruction, err)
		}
		t.mu.Lock()
		t.cat.Cache[key] = &cacheEntry{Image: img, OnBase: cur.onBase, Runtime: cur.runtime, Used: time.Now().UTC()}
		t.saveLocked()
		t.mu.Unlock()
		cur = tplRef{image: img, onBase: cur.onBase, runtime: cur.runtime}
		cfg, layers = saved.Config, saved.Layers
		t.log.Debug("template build step", "template", name+":"+tag, "step", i+1, "kind", k,
			"ms", time.Since(stepStart).Milliseconds())
	}
	final := newImageName()
	t.hold(final)
	held = append(held, final)
	if err := t.copyImage(final, cur, cfg); err != nil {
		return nil, err
	}
	tpl := t.register(owner, name, tag, final, cur, source)
	emit(BuildEvent{Type: EventDone, Steps: total, Template: tpl, DurationMS: time.Since(start).Milliseconds()})
	return tpl, nil
}

// cacheHit returns the cache entry for key if its image is in the store.
func (t *Catalog) cacheHit(key string) *cacheEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.cat.Cache[key]
	if c == nil {
		return nil
	}
	c.Used = time.Now().UTC()
	return c
}

// buildFrom resolves a recipe's from: a template owner can use, else a
// registry image, pulled once and cached. identity names its content for
// cache keys; cached reports a pull that was not needed.
func (t *Builder) buildFrom(ctx context.Context, owner, from string, emit func(BuildEvent)) (r tplRef, identity string, cached bool, err error) {
	r, err = t.resolve(owner, from)
	if err == nil {
		if r.image == "" {
			return r, "base:" + r.baseName, false, nil
		}
		im, err := t.store.Get(r.image)
		if err != nil {
			return r, "", false, storeErr(err)
		}
		return r, fmt.Sprintf("image:%s:%v", im.Digest, r.onBase), false, nil
	}
	if !errors.Is(err, sandbox.ErrUnknownTemplate) || !template.IsReference(from) {
		return r, "", false, err
	}
	unknown := err
	key := "pull:" + from
	img := "p-" + keyHash(from)[:40]
	if c := t.cacheHit(key); c != nil {
		if im, err := t.store.Get(img); err == nil {
			return tplRef{image: img}, "image:" + im.Digest + ":false", true, nil
		}
	}
	emit(BuildEvent{Type: EventOutput, Stream: "stdout", Output: "pulling image " + from + "\n"})
	t.hold(img)
	defer t.release(img)
	var im *template.Image
	err = t.withBudget(ctx, func() error {
		var err error
		im, err = t.store.Pull(ctx, img, template.Source{Registry: from})
		return err
	})
	if err != nil {
		if errors.Is(err, template.ErrBudget) || errors.Is(err, context.Canceled) {
			return r, "", false, err
		}
		return r, "", false, fmt.Errorf("%w, and pulling it as an image failed: %v", unknown, err)
	}
	t.mu.Lock()
	t.cat.Cache[key] = &cacheEntry{Image: img, Used: time.Now().UTC()}
	t.saveLocked()
	t.mu.Unlock()
	return tplRef{image: img}, "image:" + im.Digest + ":false", false, nil
}

// runStep runs a file-changing step in a new sandbox of cur and commits
// the sandbox's writable layer as store image img.
func (t *Builder) runStep(ctx context.Context, owner string, cur tplRef, cfg template.ImageConfig, k string, st api.RecipeStep,
	img string, o buildOpts, n int, emit func(BuildEvent)) (*template.Image, error) {
	step := func(ctx context.Context, id string) error {
		if k == template.StepCopy {
			return t.copyStep(ctx, id, cfg.WorkingDir, st.Copy, emit)
		}
		return t.execStep(ctx, id, cfg.WorkingDir, template.ShellCommand(k, st), k, o, emit)
	}
	var im *template.Image
	commit := func(ctx context.Context, up template.Upper) error {
		var parent *template.Image
		if cur.image != "" {
			var err error
			if parent, err = t.store.Get(cur.image); err != nil {
				return storeErr(err)
			}
		}
		err := t.withBudget(ctx, func() error {
			var err error
			im, err = t.store.Commit(ctx, img, parent, up.Dir, up.UIDBase, up.MaxBytes, cfg)
			return err
		})
		return storeErr(err)
	}
	spec := o.spec
	spec.Template = cur.backendName()
	if err := t.sb.RunBuild(ctx, owner, spec, step, commit); err != nil {
		return nil, err
	}
	return im, nil
}

// execStep runs cmd with /bin/sh in the build sandbox, streaming output.
func (t *Builder) execStep(ctx context.Context, id, wd, cmd, kind string, o buildOpts, emit func(BuildEvent)) error {
	if wd == "" {
		wd = "/"
	}
	if wd != "/" {
		if _, err := t.agent.Mkdir(ctx, id, wd, "0755"); err != nil {
			return fmt.Errorf("workdir %s: %w", wd, err)
		}
	}
	req := &api.ExecRequest{Argv: []string{"/bin/sh", "-c", cmd}, Cwd: wd,
		TimeoutSeconds: o.timeout.Seconds(), MaxOutputBytes: maxStepOutput}
	evs, err := t.agent.ExecStream(ctx, id, req)
	if err != nil {
		if strings.Contains(err.Error(), "/bin/sh") {
			return fmt.Errorf("%w (RUN steps need /bin/sh in the template)", err)
		}
		return err
	}
	defer evs.Close()
	for {
		ev, err := evs.Next()
		if err != nil {
			return fmt.Errorf("%w: exec stream ended early: %v", sandbox.ErrUnavailable, err)
		}
		switch ev.Type {
		case api.EventStdout, api.EventStderr:
			emit(BuildEvent{Type: EventOutput, Stream: ev.Type, Output: string(ev.Data)})
		case api.EventError:
			msg := "exec failed"
			if ev.Error != nil {
				msg = ev.Error.Message
			}
			return fmt.Errorf("%w: %s", sandbox.ErrInvalid, msg)
		case api.EventExit:
			res := ev.ExecResult
			if res == nil {
				return fmt.Errorf("%w: exit event without a result", sandbox.ErrUnavailable)
			}
			var fail string
			switch {
			case res.TimedOut:
				fail = fmt.Sprintf("timed out after %s", o.timeout)
			case res.Signal != nil:
				fail = "killed by " + *res.Signal
			case res.ExitCode != nil && *res.ExitCode != 0:
				fail = fmt.Sprintf("exited with code %d", *res.ExitCode)
			default:
				return nil
			}
			if template.NeedsNetwork(kind) {
				fail += "; " + networkHint
			}
			return fmt.Errorf("%w: the command %s", sandbox.ErrInvalid, fail)
		}
	}
}

// copyStep writes a copy step's file or unpacks its archive through the
// agent, so paths resolve inside the sandbox as they will later.
func (t *Builder) copyStep(ctx context.Context, id, wd string, c *api.CopyStep, emit func(BuildEvent)) error {
	dst := template.ResolveDir(wd, c.Dst)
	if len(c.TarBase64) == 0 {
		if strings.HasSuffix(c.Dst, "/") {
			return fmt.Errorf("%w: copy dst %q must name the file", sandbox.ErrInvalid, c.Dst)
		}
		data := c.SrcBase64
		if len(data) == 0 {
			data = []byte(c.Content)
		}
		mode := c.Mode
		if mode == "" {
			mode = "0644"
		}
		_, err := t.agent.WriteFile(ctx, id, dst, mode, bytes.NewReader(data), int64(len(data)))
		return err
	}
	if _, err := t.agent.Mkdir(ctx, id, dst, "0755"); err != nil {
		return err
	}
	tr := tar.NewReader(bytes.NewReader(c.TarBase64))
	files := 0
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: copy archive: %v", sandbox.ErrInvalid, err)
		}
		rel := path.Clean("/" + hdr.Name)
		if rel == "/" {
			continue
		}
		target := path.Join(dst, rel)
		mode := fmt.Sprintf("%04o", hdr.Mode&0o7777)
		switch hdr.Typeflag {
		case tar.TypeDir:
			_, err = t.agent.Mkdir(ctx, id, target, mode)
		case tar.TypeReg:
			data, rerr := io.ReadAll(tr)
			if rerr != nil {
				return fmt.Errorf("%w: copy archive: %v", sandbox.ErrInvalid, rerr)
			}
			_, err = t.agent.WriteFile(ctx, id, target, mode, bytes.NewReader(data), int64(len(data)))
			files++
		default:
			emit(BuildEvent{Type: EventOutput, Stream: "stderr",
				Output: fmt.Sprintf("warning: %s skipped (only files and directories are copied)\n", hdr.Name)})
		}
		if err != nil {
			return fmt.Errorf("copy %s: %w", target, err)
		}
	}
	emit(BuildEvent{Type: EventOutput, Stream: "stdout", Output: fmt.Sprintf("copied %d files to %s\n", files, dst)})
	return nil
}

// Snapshot freezes owner's sandbox id (if running), turns its writable
// layer into a new layer on top of its template's layers, thaws it, and
// saves the result as owner's template name.
func (t *Builder) Snapshot(ctx context.Context, owner, id, name string) (*Template, error) {
	n, tag, err := t.checkNewName(name)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	var tpl *Template
	err = t.sb.Freeze(ctx, owner, id, func(ctx context.Context, up template.Upper) error {
		parent, err := t.parentOf(up.Ref)
		if err != nil {
			return err
		}
		t.hold(parent.image)
		defer t.release(parent.image)
		var pim *template.Image
		var cfg template.ImageConfig
		if parent.image != "" {
			if pim, err = t.store.Get(parent.image); err != nil {
				return storeErr(err)
			}
			cfg = pim.Config
		}
		img := newImageName()
		t.hold(img)
		defer t.release(img)
		err = t.withBudget(ctx, func() error {
			_, err := t.store.Commit(ctx, img, pim, up.Dir, up.UIDBase, up.MaxBytes, cfg)
			return err
		})
		if err != nil {
			return storeErr(err)
		}
		tpl = t.register(owner, n, tag, img, parent, "snapshot of "+id)
		return nil
	})
	if err != nil {
		return nil, err
	}
	t.log.Info("sandbox snapshot", "sandbox", id, "template", tpl.Name, "ms", time.Since(start).Milliseconds())
	return tpl, nil
}

// parentOf returns the template a sandbox was created from, by the name
// the backend was given.
func (t *Catalog) parentOf(backendName string) (tplRef, error) {
	if img, ok := strings.CutPrefix(backendName, "@"); ok {
		t.mu.Lock()
		defer t.mu.Unlock()
		for _, e := range t.cat.Templates {
			if e.Image == img {
				return tplRef{image: img, onBase: e.OnBase, runtime: e.Runtime}, nil
			}
		}
		for _, c := range t.cat.Cache {
			if c.Image == img {
				return tplRef{image: img, onBase: c.OnBase, runtime: c.Runtime}, nil
			}
		}
		return tplRef{}, fmt.Errorf("%w: the sandbox's template image %s is gone", sandbox.ErrConflict, img)
	}
	return t.resolve("", backendName)
}
