package integration

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// toySource is a static multi-call program for test images, which have no
// libc and no shell: as "hello" it greets; as "sh -c LINE" it runs the
// few commands the tests need (echo with > and >>, cat, mkdir -p, rm,
// env), split on ";" and "&&".
const toySource = `package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	if filepath.Base(os.Args[0]) == "hello" {
		fmt.Printf("hello from the image, GREETING=%s\n", os.Getenv("GREETING"))
		return
	}
	if len(os.Args) < 3 || os.Args[1] != "-c" {
		fmt.Fprintln(os.Stderr, "toy sh: usage: sh -c LINE")
		os.Exit(2)
	}
	for _, part := range strings.Split(strings.ReplaceAll(os.Args[2], "&&", ";"), ";") {
		if code := run(words(part)); code != 0 {
			os.Exit(code)
		}
	}
}

func words(s string) []string {
	var out []string
	var cur strings.Builder
	in, quoted := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted, in = !quoted, true
		case r == ' ' && !quoted:
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

func run(w []string) int {
	if len(w) == 0 {
		return 0
	}
	out := os.Stdout
	for i := 0; i+1 < len(w); i++ {
		if w[i] == ">" || w[i] == ">>" {
			flag := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
			if w[i] == ">>" {
				flag = os.O_WRONLY | os.O_CREATE | os.O_APPEND
			}
			f, err := os.OpenFile(w[i+1], flag, 0o644)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			defer f.Close()
			out, w = f, w[:i]
			break
		}
	}
	switch w[0] {
	case "echo":
		fmt.Fprintln(out, strings.Join(w[1:], " "))
	case "cat":
		for _, p := range w[1:] {
			b, err := os.ReadFile(p)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			out.Write(b)
		}
	case "mkdir":
		for _, p := range w[1:] {
			if p != "-p" {
				if err := os.MkdirAll(p, 0o755); err != nil {
					fmt.Fprintln(os.Stderr, err)
					return 1
				}
			}
		}
	case "rm":
		for _, p := range w[1:] {
			if err := os.Remove(p); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
	case "env":
		for _, kv := range os.Environ() {
			fmt.Fprintln(out, kv)
		}
	default:
		fmt.Fprintln(os.Stderr, "toy sh: unknown command", w[0])
		return 127
	}
	return 0
}
`

var (
	toyOnce sync.Once
	toyBin  []byte
	toyErr  error
)

// toyBinary compiles toySource once with CGO_ENABLED=0.
func toyBinary(t testing.TB) []byte {
	t.Helper()
	toyOnce.Do(func() {
		dir, err := os.MkdirTemp("", "paddock-toy-")
		if err != nil {
			toyErr = err
			return
		}
		defer os.RemoveAll(dir)
		src := filepath.Join(dir, "main.go")
		if toyErr = os.WriteFile(src, []byte(toySource), 0o644); toyErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "toy"), src)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			toyErr = fmt.Errorf("build toy: %v: %s", err, out)
			return
		}
		toyBin, toyErr = os.ReadFile(filepath.Join(dir, "toy"))
	})
	if toyErr != nil {
		t.Fatal(toyErr)
	}
	return toyBin
}

// tarEntry is one entry of a test layer.
type tarEntry struct {
	hdr  tar.Header
	body []byte
}

func tfile(name string, mode int64, body []byte) tarEntry {
	return tarEntry{tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(body))}, body}
}

func tdir(name string) tarEntry {
	return tarEntry{hdr: tar.Header{Name: name + "/", Typeflag: tar.TypeDir, Mode: 0o755}}
}

func tarBytes(t testing.TB, ents ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := e.hdr
		h.ModTime = time.Unix(1700000000, 0)
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		tw.Write(e.body)
	}
	tw.Close()
	return buf.Bytes()
}

func layerFrom(t testing.TB, b []byte) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

var (
	toyImgOnce sync.Once
	toyImg     v1.Image
)

// toyImage is a three-layer image: the toy as /bin/sh and /bin/hello (a
// hard link), files for the tests (one readable by root only, one removed
// again by a whiteout in the second layer), and a random layer. It is
// made once per test binary.
func toyImage(t testing.TB) v1.Image {
	t.Helper()
	toyImgOnce.Do(func() { toyImg = makeToyImage(t) })
	if toyImg == nil {
		t.Fatal("no toy image")
	}
	return toyImg
}

func makeToyImage(t testing.TB) v1.Image {
	t.Helper()
	toy := toyBinary(t)
	l1 := layerFrom(t, tarBytes(t,
		tdir("bin"), tdir("etc"), tdir("data"),
		tfile("bin/sh", 0o755, toy),
		tarEntry{hdr: tar.Header{Name: "bin/hello", Typeflag: tar.TypeLink, Linkname: "bin/sh"}},
		tfile("etc/motd", 0o644, []byte("from layer 1\n")),
		tfile("etc/gone", 0o644, []byte("whited out\n")),
		tfile("data/secret", 0o600, []byte("root only\n")),
	))
	l2 := layerFrom(t, tarBytes(t,
		tdir("etc"),
		tfile("etc/motd", 0o644, []byte("from layer 2\n")),
		tfile("etc/.wh.gone", 0o644, nil),
	))
	l3, err := random.Layer(4096, "application/vnd.oci.image.layer.v1.tar")
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, l1, l2, l3)
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.Config(img, v1.Config{Env: []string{"PATH=/bin", "GREETING=hi"}, WorkingDir: "/data", Cmd: []string{"/bin/hello"}})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

var (
	regOnce sync.Once
	regHost string
)

// testRegistry serves an in-process registry on loopback for the whole
// test binary and returns its host:port.
func testRegistry(t testing.TB) string {
	t.Helper()
	regOnce.Do(func() {
		srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
		regHost = strings.TrimPrefix(srv.URL, "http://")
	})
	return regHost
}

// pushImage pushes img to the test registry as repo:tag.
func pushImage(t testing.TB, repoTag string, img v1.Image) string {
	t.Helper()
	ref := testRegistry(t) + "/" + repoTag
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	return ref
}

var (
	toyTplOnce sync.Once
	toyTplErr  error
)

// toyTemplate imports the toy image once as alice's template "toy".
func toyTemplate(t testing.TB) string {
	t.Helper()
	toyTplOnce.Do(func() {
		ref := pushImage(t, "paddock/toy:v1", toyImage(t))
		_, toyTplErr = shared.client(0).CreateTemplate(ctxT(t), api.CreateTemplateRequest{Name: "toy", From: &api.TemplateSource{Image: ref}})
	})
	if toyTplErr != nil {
		t.Fatalf("import toy template: %v", toyTplErr)
	}
	return "toy"
}

func run(t testing.TB, sb *client.Sandbox, command string) (string, int) {
	t.Helper()
	res, err := sb.Exec(ctxT(t), api.ExecRequest{Command: command, TimeoutSeconds: 30})
	if err != nil {
		t.Fatalf("exec %q: %v", command, err)
	}
	code := -1
	if res.ExitCode != nil {
		code = *res.ExitCode
	}
	return res.Stdout + res.Stderr, code
}

func mustRun(t testing.TB, sb *client.Sandbox, command string) string {
	t.Helper()
	out, code := run(t, sb, command)
	if code != 0 {
		t.Fatalf("%q exited %d: %s", command, code, out)
	}
	return out
}

// TestTemplateImage pulls an image made offline from the in-process
// registry and runs code in a sandbox of it: layers, hard links,
// whiteouts, ownership (idmapped: the image's root files belong to the
// sandbox's root), the image's env (a request's env wins), no host /usr.
func TestTemplateImage(t *testing.T) {
	ctx := ctxT(t)
	c := shared.client(0)
	toyTemplate(t)
	tpl, err := c.Template(ctx, "toy:latest")
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := toyImage(t).Digest()
	if tpl.Layers != 3 || tpl.Shared || tpl.Owner == "" || !strings.HasPrefix(tpl.Source, "image ") || tpl.Status != "ready" {
		t.Fatalf("template: %+v", tpl)
	}
	if tpl.Digest != digest.String() {
		t.Fatalf("digest %q", tpl.Digest)
	}

	sb := newSandbox(t, &api.CreateSandboxRequest{Template: "toy", Env: map[string]string{"EXTRA": "x"}})
	res, err := sb.Exec(ctx, api.ExecRequest{Argv: []string{"hello"}})
	if err != nil || res.ExitCode == nil || *res.ExitCode != 0 || !strings.Contains(res.Stdout, "GREETING=hi") {
		t.Fatalf("hello: %+v %v", res, err)
	}
	env := mustRun(t, sb, "env")
	for _, want := range []string{"PATH=/bin", "EXTRA=x", "GREETING=hi"} {
		if !strings.Contains(env, want+"\n") {
			t.Errorf("env lacks %s:\n%s", want, env)
		}
	}
	if got := mustRun(t, sb, "cat /etc/motd"); got != "from layer 2\n" {
		t.Errorf("motd %q", got)
	}
	if got := mustRun(t, sb, "cat /data/secret"); got != "root only\n" {
		t.Errorf("a 0600 file of the image's root is not readable by the sandbox's root: %q", got)
	}
	if out, code := run(t, sb, "cat /etc/gone"); code == 0 {
		t.Errorf("whited-out file is there: %q", out)
	}
	if out, code := run(t, sb, "cat /usr/bin/env"); code == 0 {
		t.Errorf("host /usr is visible in an image template: %q", out)
	}
	if got := mustRun(t, sb, "echo written > /data/new && cat /data/new"); got != "written\n" {
		t.Errorf("write into the image's directory: %q", got)
	}
	if got := mustRun(t, sb, "cat /etc/hostname"); got != "sandbox\n" {
		t.Errorf("hostname %q", got)
	}

	// The request's env wins over the image's.
	sb2 := newSandbox(t, &api.CreateSandboxRequest{Template: "toy:latest", Env: map[string]string{"GREETING": "from request"}})
	res, err = sb2.Exec(ctx, api.ExecRequest{Argv: []string{"hello"}})
	if err != nil || !strings.Contains(res.Stdout, "GREETING=from request") {
		t.Fatalf("hello with a request env: %+v %v", res, err)
	}
	// The first sandbox's write did not leak into the template.
	if out, code := run(t, sb2, "cat /data/new"); code == 0 {
		t.Errorf("another sandbox's write is visible: %q", out)
	}

	found := false
	list, err := c.Templates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range list {
		found = found || x.Name == "toy:latest"
	}
	if !found {
		t.Errorf("toy:latest not listed: %+v", list)
	}
	if _, err := c.Create(ctx, &api.CreateSandboxRequest{Template: "toy:nope"}); !errors.Is(err, client.ErrUnknownTemplate) {
		t.Errorf("unknown tag: %v", err)
	}
}

// TestTemplateRecipe builds a recipe on the image template, runs code in
// a sandbox of the result, and rebuilds it from the cache.
func TestTemplateRecipe(t *testing.T) {
	ctx := ctxT(t)
	c := shared.client(0)
	toyTemplate(t)
	req := api.CreateTemplateRequest{Name: "toy-recipe:v1", Recipe: &api.Recipe{From: "toy", Steps: []api.RecipeStep{
		{Run: "mkdir -p /app && echo built > /app/out"},
		{Copy: &api.CopyStep{Content: "copied\n", Dst: "/app/data.txt"}},
		{Env: map[string]string{"STAGE": "recipe"}},
		{Workdir: "/app"},
		{Run: "echo in workdir > here.txt && echo step output"},
	}}}
	build := func() ([]api.BuildEvent, time.Duration) {
		start := time.Now()
		var evs []api.BuildEvent
		for ev, err := range c.BuildTemplate(ctx, req) {
			if err != nil {
				t.Fatalf("build: %v (events %+v)", err, evs)
			}
			evs = append(evs, ev)
		}
		return evs, time.Since(start)
	}
	evs, cold := build()
	last := evs[len(evs)-1]
	if last.Type != api.BuildEventDone || last.Template == nil || last.Template.Name != "toy-recipe:v1" {
		t.Fatalf("last event %+v", last)
	}
	if last.Template.Layers != 3+3 {
		t.Errorf("layers %d, want 6 (3 of the image + run, copy, run)", last.Template.Layers)
	}
	var sawOutput bool
	for _, ev := range evs {
		sawOutput = sawOutput || (ev.Type == api.BuildEventOutput && strings.Contains(ev.Output, "step output"))
	}
	if !sawOutput {
		t.Errorf("no output event from the last step: %+v", evs)
	}

	sb := newSandbox(t, &api.CreateSandboxRequest{Template: "toy-recipe:v1"})
	if got := mustRun(t, sb, "cat /app/out /app/data.txt /app/here.txt"); got != "built\ncopied\nin workdir\n" {
		t.Errorf("files: %q", got)
	}
	if env := mustRun(t, sb, "env"); !strings.Contains(env, "STAGE=recipe\n") || !strings.Contains(env, "GREETING=hi\n") {
		t.Errorf("env: %s", env)
	}

	evs, warm := build()
	t.Logf("recipe build: cold %s, rebuild from cache %s", cold.Round(time.Millisecond), warm.Round(time.Millisecond))
	steps, cached := 0, 0
	for _, ev := range evs {
		switch ev.Type {
		case api.BuildEventStep:
			if ev.Step > 0 {
				steps++
			}
		case api.BuildEventCached:
			cached++
		case api.BuildEventOutput:
			t.Errorf("a cached rebuild ran something: %+v", ev)
		}
	}
	if steps != 5 || cached != 5 {
		t.Errorf("rebuild: %d steps, %d cached; want 5 and 5", steps, cached)
	}
	if warm > time.Second {
		t.Errorf("rebuild from cache took %s, want well under a second", warm)
	}

	// A failing step fails the build with its exit code.
	_, err := c.CreateTemplate(ctx, api.CreateTemplateRequest{Name: "toy-fail", Recipe: &api.Recipe{From: "toy",
		Steps: []api.RecipeStep{{Run: "cat /nonexistent"}}}})
	if !errors.Is(err, client.ErrBadRequest) || !strings.Contains(err.Error(), "exited with code 1") {
		t.Errorf("failing step: %v", err)
	}
	// A file the agent cannot create is the same not-found error in a
	// build as through the file API (procfs answers mkdir with ENOENT).
	const noDir = "/proc/paddock-missing/f"
	_, err = c.CreateTemplate(ctx, api.CreateTemplateRequest{Name: "toy-missing", Recipe: &api.Recipe{From: "toy",
		Steps: []api.RecipeStep{{Copy: &api.CopyStep{Content: "x", Dst: noDir}}}}})
	if !errors.Is(err, client.ErrNotFound) {
		t.Errorf("copy to %s in a build: %v, want not found", noDir, err)
	}
	fsb := newSandbox(t, &api.CreateSandboxRequest{Template: "toy"})
	if _, err := fsb.Files().Write(ctx, noDir, []byte("x"), 0o644); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("write %s through the API: %v, want not found", noDir, err)
	}
	// An apt step fails without a mirror, and says why.
	_, err = c.CreateTemplate(ctx, api.CreateTemplateRequest{Name: "toy-apt", Recipe: &api.Recipe{From: "toy",
		Steps: []api.RecipeStep{{Apt: []string{"curl"}}}}})
	if err == nil || !strings.Contains(err.Error(), "no network") {
		t.Errorf("apt step without network: %v", err)
	}
}
