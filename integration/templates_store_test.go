package integration

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// TestTemplateSnapshot snapshots running sandboxes (on the image template
// and on base) and checks that new sandboxes of the snapshots see their
// files, and that the originals keep running.
func TestTemplateSnapshot(t *testing.T) {
	ctx := ctxT(t)
	c := shared.client(0)
	toyTemplate(t)
	sb := newSandbox(t, &api.CreateSandboxRequest{Template: "toy"})
	if _, err := sb.Files().Write(ctx, "/data/snap.txt", []byte("snapshotted\n"), 0); err != nil {
		t.Fatal(err)
	}
	mustRun(t, sb, "mkdir -p /srv/deep/dir && echo deep > /srv/deep/dir/f && rm /etc/motd")
	tpl, err := sb.Snapshot(ctx, "toy-snap:one")
	if err != nil {
		t.Fatal(err)
	}
	if tpl.Layers != 4 || !strings.HasPrefix(tpl.Source, "snapshot of "+sb.ID) {
		t.Errorf("snapshot template %+v", tpl)
	}
	if err := sb.Refresh(ctx); err != nil || sb.State != api.StateRunning {
		t.Fatalf("the sandbox is %s after the snapshot (%v)", sb.State, err)
	}
	mustRun(t, sb, "echo after > /data/after.txt")

	sb2 := newSandbox(t, &api.CreateSandboxRequest{Template: "toy-snap:one"})
	if got := mustRun(t, sb2, "cat /data/snap.txt /srv/deep/dir/f"); got != "snapshotted\ndeep\n" {
		t.Errorf("snapshot files: %q", got)
	}
	if out, code := run(t, sb2, "cat /etc/motd"); code == 0 {
		t.Errorf("a file deleted before the snapshot is back: %q", out)
	}
	if out, code := run(t, sb2, "cat /data/after.txt"); code == 0 {
		t.Errorf("a file written after the snapshot is in it: %q", out)
	}
	if got, _ := run(t, sb2, "env"); !strings.Contains(got, "GREETING=hi\n") {
		t.Errorf("the snapshot lost the image env: %s", got)
	}

	// A paused base sandbox stays paused.
	base := newSandbox(t, nil)
	mustRun(t, base, "echo from-base > /workspace/w.txt")
	if err := base.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := base.Snapshot(ctx, "base-snap"); err != nil {
		t.Fatal(err)
	}
	if err := base.Refresh(ctx); err != nil || base.State != api.StatePaused {
		t.Fatalf("paused sandbox is %s after the snapshot (%v)", base.State, err)
	}
	sb3 := newSandbox(t, &api.CreateSandboxRequest{Template: "base-snap"})
	if got := mustRun(t, sb3, "cat /workspace/w.txt && python3 -c 'print(6*7)'"); got != "from-base\n42\n" {
		t.Errorf("base snapshot: %q", got)
	}
	if _, err := c.Sandbox("sbnosuch").Snapshot(ctx, "x"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("snapshot of a missing sandbox: %v", err)
	}
}

// TestTemplateDeleteInUse refuses to delete a template a sandbox uses.
func TestTemplateDeleteInUse(t *testing.T) {
	ctx := ctxT(t)
	c := shared.client(0)
	toyTemplate(t)
	if _, err := c.CreateTemplate(ctx, api.CreateTemplateRequest{Name: "toy-del", From: &api.TemplateSource{Template: "toy"}}); err != nil {
		t.Fatal(err)
	}
	sb, err := c.Create(ctx, &api.CreateSandboxRequest{Template: "toy-del"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteTemplate(ctx, "toy-del"); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("delete in use: %v, want 409", err)
	}
	mustRun(t, sb, "cat /etc/motd")
	if err := sb.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteTemplate(ctx, "toy-del:latest"); err != nil {
		t.Fatalf("delete after the sandbox ended: %v", err)
	}
	if _, err := c.Template(ctx, "toy-del"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("get after delete: %v", err)
	}
	if err := c.DeleteTemplate(ctx, "base"); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("delete base: %v", err)
	}
	if _, err := c.CreateTemplate(ctx, api.CreateTemplateRequest{Name: "base", From: &api.TemplateSource{Template: "toy"}}); !errors.Is(err, client.ErrConflict) {
		t.Errorf("a template named base: %v", err)
	}
}

// TestTemplateTenants checks that one key cannot see or use another's
// templates.
func TestTemplateTenants(t *testing.T) {
	ctx := ctxT(t)
	alice, bob := shared.client(0), shared.client(1)
	if _, err := alice.CreateTemplate(ctx, api.CreateTemplateRequest{Name: "alice-only", Recipe: &api.Recipe{From: "base",
		Steps: []api.RecipeStep{{Run: "echo alice > /opt/owner"}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Template(ctx, "alice-only"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("bob gets alice's template: %v", err)
	}
	if _, err := bob.Create(ctx, &api.CreateSandboxRequest{Template: "alice-only"}); !errors.Is(err, client.ErrUnknownTemplate) {
		t.Errorf("bob creates from alice's template: %v", err)
	}
	if _, err := bob.CreateTemplate(ctx, api.CreateTemplateRequest{Name: "bob-steal", Recipe: &api.Recipe{From: "alice-only",
		Steps: []api.RecipeStep{{Run: "true"}}}}); !errors.Is(err, client.ErrUnknownTemplate) {
		t.Errorf("bob builds from alice's template: %v", err)
	}
	if _, err := bob.CreateTemplate(ctx, api.CreateTemplateRequest{Name: "bob-copy", From: &api.TemplateSource{Template: "alice-only"}}); !errors.Is(err, client.ErrUnknownTemplate) {
		t.Errorf("bob copies alice's template: %v", err)
	}
	if err := bob.DeleteTemplate(ctx, "alice-only"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("bob deletes alice's template: %v", err)
	}
	list, err := bob.Templates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range list {
		if x.Name == "alice-only:latest" || (!x.Shared && x.Owner != "" && strings.HasPrefix(x.Name, "toy")) {
			t.Errorf("bob lists %+v", x)
		}
	}
	// Bob's own template of the same name is his.
	if _, err := bob.CreateTemplate(ctx, api.CreateTemplateRequest{Name: "alice-only", Recipe: &api.Recipe{From: "base",
		Steps: []api.RecipeStep{{Run: "echo bob > /opt/owner"}}}}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"alice\n", "bob\n"} {
		sb := newSandboxOn(t, shared, i, &api.CreateSandboxRequest{Template: "alice-only"})
		if got := mustRun(t, sb, "cat /opt/owner"); got != want {
			t.Errorf("key %d sees %q", i, got)
		}
	}
}

// TestTemplateRefusesMaliciousLayers pulls images whose layers climb out
// of their directory: the import fails and nothing lands on the host.
func TestTemplateRefusesMaliciousLayers(t *testing.T) {
	ctx := ctxT(t)
	c := shared.client(0)
	marker := "paddock-escape-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	for name, ents := range map[string][]tarEntry{
		"dotdot":  {tfile("../../../../../../tmp/"+marker, 0o644, []byte("x"))},
		"symlink": {{hdr: tar.Header{Name: "out", Typeflag: tar.TypeSymlink, Linkname: "/tmp"}}, tfile("out/"+marker, 0o644, []byte("x"))},
	} {
		img, err := mutate.AppendLayers(empty.Image, layerFrom(t, tarBytes(t, ents...)))
		if err != nil {
			t.Fatal(err)
		}
		ref := pushImage(t, "paddock/evil-"+name+":v1", img)
		_, err = c.CreateTemplate(ctx, api.CreateTemplateRequest{Name: "evil-" + name, From: &api.TemplateSource{Image: ref}})
		if !errors.Is(err, client.ErrBadRequest) || !strings.Contains(err.Error(), "unsafe") {
			t.Errorf("%s: %v, want 400 for an unsafe layer", name, err)
		}
		if _, err := os.Lstat("/tmp/" + marker); err == nil {
			t.Fatalf("%s: a layer wrote /tmp/%s", name, marker)
		}
		if _, err := c.Template(ctx, "evil-"+name); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("%s: the refused template exists: %v", name, err)
		}
	}
}

// TestTemplateLayoutImport imports an OCI layout from the daemon's import
// directory, and refuses a path outside it.
func TestTemplateLayoutImport(t *testing.T) {
	ctx := ctxT(t)
	c := shared.client(0)
	dir := filepath.Join(shared.stateDir, "import", "toy-layout")
	writeLayout(t, dir, toyImage(t))
	tpl, err := c.CreateTemplate(ctx, api.CreateTemplateRequest{Name: "toy-layout", From: &api.TemplateSource{OCILayout: dir}})
	if err != nil {
		t.Fatal(err)
	}
	sb := newSandbox(t, &api.CreateSandboxRequest{Template: tpl.Name})
	if got := mustRun(t, sb, "cat /etc/motd"); got != "from layer 2\n" {
		t.Errorf("motd %q", got)
	}
	outside := t.TempDir()
	writeLayout(t, outside, toyImage(t))
	_, err = c.CreateTemplate(ctx, api.CreateTemplateRequest{Name: "toy-outside", From: &api.TemplateSource{OCILayout: outside}})
	if !errors.Is(err, client.ErrBadRequest) || !strings.Contains(err.Error(), "import directories") {
		t.Errorf("layout outside the import directories: %v", err)
	}
}

func writeLayout(t testing.TB, dir string, img v1.Image) {
	t.Helper()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
}

// TestTemplatePersist checks that templates (a shared one from the config
// and a built one) survive a daemon restart and are not imported again.
func TestTemplatePersist(t *testing.T) {
	requireDaemon(t)
	lay := filepath.Join(t.TempDir(), "layout")
	writeLayout(t, lay, toyImage(t))
	d, err := startDaemon(daemonOptions{
		extraArgs: []string{"--uid-base", strconv.Itoa(crashUIDBase + 500*65536), "--max-sandboxes", "10"},
		config:    fmt.Sprintf(`{"templates": {"toy-shared": {"oci_layout": %q}}}`, lay),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.shutdown()
	ctx := ctxT(t)
	c := d.client(0)
	var shared *api.Template
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if shared, err = c.Template(ctx, "toy-shared"); err == nil && shared.Status == "ready" {
			break
		}
	}
	if shared == nil || shared.Status != "ready" || !shared.Shared {
		t.Fatalf("shared template: %+v %v", shared, err)
	}
	if _, err := c.CreateTemplate(ctx, api.CreateTemplateRequest{Name: "kept", Recipe: &api.Recipe{From: "toy-shared",
		Steps: []api.RecipeStep{{Run: "echo kept > /data/kept"}}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteTemplate(ctx, "toy-shared"); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("delete a shared template: %v", err)
	}

	d.cmd.Process.Signal(syscall.SIGTERM)
	d.cmd.Wait()
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	for i := range d.keys {
		tpl, err := d.client(i).Template(ctx, "toy-shared")
		if err != nil || tpl.Status != "ready" || tpl.Digest != shared.Digest {
			t.Errorf("key %d: shared template after restart: %+v %v", i, tpl, err)
		}
	}
	if n := strings.Count(d.log.String(), "template: shared template ready"); n != 1 {
		t.Errorf("the shared template was imported again after the restart")
	}
	sb := newSandboxOn(t, d, 0, &api.CreateSandboxRequest{Template: "kept"})
	if got := mustRun(t, sb, "cat /data/kept"); got != "kept\n" {
		t.Errorf("after restart: %q", got)
	}
	if res, err := sb.Exec(ctx, api.ExecRequest{Argv: []string{"hello"}}); err != nil || !strings.Contains(res.Stdout, "hello from the image") {
		t.Errorf("hello after restart: %+v %v", res, err)
	}
	if _, err := d.client(1).Template(ctx, "kept"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("bob sees alice's template after the restart: %v", err)
	}
}

// TestTemplateBudget runs a daemon with a small template_cache_bytes: an
// image over it is refused with 507, and builds keep working by evicting
// old build-cache entries.
func TestTemplateBudget(t *testing.T) {
	requireDaemon(t)
	d, err := startDaemon(daemonOptions{
		extraArgs: []string{"--uid-base", strconv.Itoa(crashUIDBase + 600*65536), "--max-sandboxes", "10"},
		config:    `{"template_cache_bytes": 600000}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.shutdown()
	ctx := ctxT(t)
	c := d.client(0)
	ref := pushImage(t, "paddock/toy:budget", toyImage(t))
	if _, err := c.CreateTemplate(ctx, api.CreateTemplateRequest{Name: "big", From: &api.TemplateSource{Image: ref}}); !errors.Is(err, client.ErrNoSpace) {
		t.Fatalf("an image over the budget: %v, want 507", err)
	}
	// Each build adds a layer of about 70 KB that its cache entry keeps
	// after the template is deleted: without eviction the budget runs out
	// after a handful.
	for i := range 12 {
		name := fmt.Sprintf("b%d", i)
		_, err := c.CreateTemplate(ctx, api.CreateTemplateRequest{Name: name, Recipe: &api.Recipe{From: "base",
			Steps: []api.RecipeStep{{Run: fmt.Sprintf("echo %d > /opt/n", i)}}}})
		if err != nil {
			t.Fatalf("build %d: %v", i, err)
		}
		if err := c.DeleteTemplate(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(d.log.String(), "evicted build cache entries") {
		t.Error("no build-cache eviction logged")
	}
}

// TestTemplateDockerfile builds a Dockerfile on base from a tar build
// context (streamed through the SDK and through the CLI), and one on the
// image template from a JSON context.
func TestTemplateDockerfile(t *testing.T) {
	ctx := ctxT(t)
	c := shared.client(0)
	dir := t.TempDir()
	files := map[string]string{
		"Dockerfile": `# a comment
ARG BASE=base
FROM ${BASE}
ARG WHO=world
ENV APP_HOME=/opt/app \
    MODE=test
WORKDIR $APP_HOME
COPY main.py ./
COPY lib/ lib/
RUN python3 main.py > built.txt && echo "${WHO}" >> built.txt
LABEL ignored=yes
CMD ["python3", "main.py"]
`,
		"main.py":         "from lib.util import greet\nprint(greet())\n",
		"lib/util.py":     "def greet():\n    return 'greetings from lib'\n",
		"lib/__init__.py": "",
		"notes/skip.txt":  "ignored by .dockerignore\n",
		".dockerignore":   "notes\n",
	}
	for p, body := range files {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Through the SDK, with a tar body.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for p, body := range files {
		tw.WriteHeader(&tar.Header{Name: p, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))})
		tw.Write([]byte(body))
	}
	tw.Close()
	var tpl *api.Template
	var warned bool
	for ev, err := range c.BuildContext(ctx, client.BuildOptions{Name: "df-app", BuildArgs: map[string]string{"WHO": "paddock"}}, &buf) {
		if err != nil {
			t.Fatalf("build: %v", err)
		}
		warned = warned || (ev.Type == api.BuildEventOutput && strings.Contains(ev.Output, "LABEL is ignored"))
		if ev.Type == api.BuildEventDone {
			tpl = ev.Template
		}
	}
	if tpl == nil || tpl.Name != "df-app:latest" || !tpl.OnBase || tpl.Workdir != "/opt/app" || !strings.HasPrefix(tpl.Source, "dockerfile from base") {
		t.Fatalf("template %+v", tpl)
	}
	if !warned {
		t.Error("no warning for LABEL")
	}
	sb := newSandbox(t, &api.CreateSandboxRequest{Template: "df-app"})
	if got := mustRun(t, sb, "cat /opt/app/built.txt"); got != "greetings from lib\npaddock\n" {
		t.Errorf("built.txt %q", got)
	}
	if got := mustRun(t, sb, "cd /opt/app && python3 main.py && echo $MODE"); got != "greetings from lib\ntest\n" {
		t.Errorf("run: %q", got)
	}

	// Through the CLI, with a progress display.
	cli := exec.Command(filepath.Join(*binDir, "paddock"), "template", "build", "-t", "df-cli:v1", "--build-arg", "WHO=cli", dir)
	cli.Env = append(os.Environ(), "PADDOCK_URL="+shared.url, "PADDOCK_API_KEY="+shared.keys[0])
	var stdout, stderr bytes.Buffer
	cli.Stdout, cli.Stderr = &stdout, &stderr
	if err := cli.Run(); err != nil {
		t.Fatalf("paddock template build: %v\n%s", err, stderr.String())
	}
	if stdout.String() != "df-cli:v1\n" || !strings.Contains(stderr.String(), "[4/6] COPY") || !strings.Contains(stderr.String(), "built df-cli:v1") {
		t.Errorf("CLI build output:\n%s\n%s", stdout.String(), stderr.String())
	}
	ls := exec.Command(filepath.Join(*binDir, "paddock"), "template", "ls")
	ls.Env = cli.Env
	out, err := ls.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "df-cli:v1") || !strings.Contains(string(out), "shared") {
		t.Errorf("paddock template ls: %v\n%s", err, out)
	}
	rm := exec.Command(filepath.Join(*binDir, "paddock"), "template", "rm", "df-cli:v1")
	rm.Env = cli.Env
	if out, err := rm.CombinedOutput(); err != nil {
		t.Errorf("paddock template rm: %v\n%s", err, out)
	}
	if _, err := c.Template(ctx, "df-cli:v1"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("after rm: %v", err)
	}

	// On the image template, with a JSON context.
	toyTemplate(t)
	tpl, err = c.CreateTemplate(ctx, api.CreateTemplateRequest{Name: "df-toy",
		Dockerfile: "FROM toy\nCOPY a.txt /data/a.txt\nRUN cat /data/a.txt > /data/b.txt\n",
		Context:    map[string][]byte{"a.txt": []byte("from the context\n")}})
	if err != nil {
		t.Fatal(err)
	}
	sb = newSandbox(t, &api.CreateSandboxRequest{Template: tpl.Name})
	if got := mustRun(t, sb, "cat /data/b.txt"); got != "from the context\n" {
		t.Errorf("b.txt %q", got)
	}
	// Unsupported instructions are refused clearly.
	_, err = c.CreateTemplate(ctx, api.CreateTemplateRequest{Name: "df-bad", Dockerfile: "FROM base\nSHELL [\"/bin/bash\"]\n"})
	if !errors.Is(err, client.ErrBadRequest) || !strings.Contains(err.Error(), "SHELL is not supported") {
		t.Errorf("SHELL: %v", err)
	}
}
