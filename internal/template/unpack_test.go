package template

import (
	"archive/tar"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// unpackCase is one layer (or stack) pulled through the test registry.
type unpackCase struct {
	name   string
	cfg    func(*Config)
	layers func(t *testing.T, e *env, r *testRegistry) []v1.Layer
	want   error
	check  func(t *testing.T, e *env, im *Image)
}

func tars(ents ...ent) func(*testing.T, *env, *testRegistry) []v1.Layer {
	return func(t *testing.T, _ *env, _ *testRegistry) []v1.Layer {
		return []v1.Layer{layerOf(t, tarOf(t, ents...))}
	}
}

func raw(b []byte) func(*testing.T, *env, *testRegistry) []v1.Layer {
	return func(t *testing.T, _ *env, _ *testRegistry) []v1.Layer { return []v1.Layer{layerOf(t, b)} }
}

// lyingLayer reports a diff_id its content does not hash to.
type lyingLayer struct{ v1.Layer }

func (lyingLayer) DiffID() (v1.Hash, error) {
	return v1.NewHash("sha256:" + strings.Repeat("ab", 32))
}

var unpackCases = []unpackCase{
	{name: "dotdot path", layers: tars(file("../outside/pwned", "x")), want: ErrUnsafe},
	{name: "dotdot deep path", layers: tars(dir("a"), file("a/../../outside/pwned", "x")), want: ErrUnsafe},
	{name: "absolute path", want: ErrUnsafe, layers: func(t *testing.T, e *env, _ *testRegistry) []v1.Layer {
		return []v1.Layer{layerOf(t, tarOf(t, file(filepath.Join(e.outside, "pwned"), "x")))}
	}},
	{name: "write through absolute symlink", want: ErrUnsafe, layers: func(t *testing.T, e *env, _ *testRegistry) []v1.Layer {
		return []v1.Layer{layerOf(t, tarOf(t, symlink("evil", e.outside), file("evil/pwned", "x")))}
	}},
	{name: "write through relative symlink", want: ErrUnsafe, layers: func(t *testing.T, e *env, _ *testRegistry) []v1.Layer {
		return []v1.Layer{layerOf(t, tarOf(t, symlink("evil", "../../../../../../../.."+e.outside),
			file("evil/pwned", "x")))}
	}},
	{name: "mkdir through symlink", want: ErrUnsafe, layers: func(t *testing.T, e *env, _ *testRegistry) []v1.Layer {
		return []v1.Layer{layerOf(t, tarOf(t, symlink("evil", e.outside), dir("evil/newdir")))}
	}},
	{name: "whiteout through symlink", want: ErrUnsafe, layers: func(t *testing.T, e *env, _ *testRegistry) []v1.Layer {
		return []v1.Layer{layerOf(t, tarOf(t, symlink("evil", e.outside), file("evil/.wh.sentinel", "")))}
	}},
	{name: "opaque through symlink", want: ErrUnsafe, layers: func(t *testing.T, e *env, _ *testRegistry) []v1.Layer {
		return []v1.Layer{layerOf(t, tarOf(t, symlink("evil", e.outside), file("evil/.wh..wh..opq", "")))}
	}},
	{name: "write through in-layer symlink", layers: tars(dir("usr/lib"), symlink("lib", "usr/lib"), file("lib/x", "x")), want: ErrUnsafe},
	{name: "symlinks stored as symlinks", layers: tars(symlink("pw", "/etc/passwd"), symlink("up", "../../../.."),
		file("pw2", "mine")), check: func(t *testing.T, e *env, im *Image) {
		for link, want := range map[string]string{"pw": "/etc/passwd", "up": "../../../.."} {
			if got, err := os.Readlink(filepath.Join(im.LowerDirs[0], link)); err != nil || got != want {
				t.Errorf("readlink %s = %q, %v; want %q", link, got, err, want)
			}
		}
	}},
	{name: "hard link to absolute /etc/passwd", layers: tars(hardlink("pw", "/etc/passwd")), want: ErrUnsafe},
	{name: "hard link climbing to /etc/passwd", layers: tars(hardlink("pw", "../../../../../../../etc/passwd")), want: ErrUnsafe},
	{name: "hard link to file not in layer", layers: tars(hardlink("pw", "etc/passwd")), want: ErrUnsafe},
	{name: "hard link through symlink", layers: tars(symlink("s", "/etc"), hardlink("pw", "s/passwd")), want: ErrUnsafe},
	{name: "hard link to directory", layers: tars(dir("d"), hardlink("l", "d")), want: ErrUnsafe},
	{name: "hard link inside layer", layers: tars(file("a", "data"), hardlink("b", "a")),
		check: func(t *testing.T, e *env, im *Image) {
			a, b := lstat(t, filepath.Join(im.LowerDirs[0], "a")), lstat(t, filepath.Join(im.LowerDirs[0], "b"))
			if !os.SameFile(a, b) {
				t.Error("b is not a hard link to a")
			}
		}},
	{name: "device nodes skipped", layers: tars(dir("dev"), device("dev/null", tar.TypeChar, 1, 3),
		device("dev/sda", tar.TypeBlock, 8, 0), device("dev/wh", tar.TypeChar, 0, 0), device("p", tar.TypeFifo, 0, 0)),
		check: func(t *testing.T, e *env, im *Image) {
			for _, n := range []string{"dev/null", "dev/sda", "dev/wh"} {
				if _, err := os.Lstat(filepath.Join(im.LowerDirs[0], n)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s: %v, want not created", n, err)
				}
			}
			if len(im.Warnings) != 3 || !strings.Contains(im.Warnings[0], "skipped device node dev/null") {
				t.Errorf("warnings = %q", im.Warnings)
			}
			if fi := lstat(t, filepath.Join(im.LowerDirs[0], "p")); fi.Mode()&os.ModeNamedPipe == 0 {
				t.Errorf("p is %v, want a FIFO", fi.Mode())
			}
		}},
	{name: "setuid and setgid stripped", layers: tars(withMode(dir("d"), 0o2775), withMode(file("d/su", "x"), 0o6755),
		withMode(dir("tmp"), 0o1777)), check: func(t *testing.T, e *env, im *Image) {
		for n, want := range map[string]os.FileMode{"d": os.ModeDir | 0o775, "d/su": 0o755, "tmp": os.ModeDir | os.ModeSticky | 0o777} {
			if got := lstat(t, filepath.Join(im.LowerDirs[0], n)).Mode(); got != want {
				t.Errorf("%s mode = %v, want %v", n, got, want)
			}
		}
	}},
	{name: "xattrs from the tarball ignored", layers: tars(withPAX(file("cap", "x"), "SCHILY.xattr.security.capability", "\x01\x00\x00\x02"),
		withPAX(dir("d"), "SCHILY.xattr.trusted.overlay.opaque", "y")), check: func(t *testing.T, e *env, im *Image) {
		for _, n := range []string{"cap", "d"} {
			if sz, _ := unix.Llistxattr(filepath.Join(im.LowerDirs[0], n), nil); sz > 0 {
				t.Errorf("%s has xattrs", n)
			}
		}
	}},
	{name: "10 GB sparse file", layers: raw(sparseTar("huge", 10<<30)), want: ErrLimit},
	{name: "10 GB header with short content", layers: raw(bigHeaderTar("huge", 10<<30)), want: ErrLimit},
	{name: "file over the file limit", cfg: func(c *Config) { c.Limits.FileBytes = 1000 },
		layers: tars(file("big", strings.Repeat("x", 1001))), want: ErrLimit},
	{name: "layer over the byte limit", cfg: func(c *Config) { c.Limits.LayerBytes = 100 << 10 },
		layers: tars(file("a", strings.Repeat("x", 60<<10)), file("b", strings.Repeat("x", 60<<10))), want: ErrLimit},
	{name: "path over the length limit", cfg: func(c *Config) { c.Limits.PathLen = 200 },
		layers: tars(file(strings.Repeat("a/", 150)+"f", "x")), want: ErrLimit},
	{name: "symlink target over the length limit", cfg: func(c *Config) { c.Limits.PathLen = 200 },
		layers: tars(symlink("l", strings.Repeat("x", 300))), want: ErrLimit},
	{name: "million tiny files with entry limit 1000", cfg: func(c *Config) { c.Limits.Entries = 1000 }, want: ErrLimit,
		layers: func(t *testing.T, _ *env, r *testRegistry) []v1.Layer {
			g := newGenLayer(t, 1_000_000)
			r.blobs.add(g)
			return []v1.Layer{g}
		}},
	{name: "too many layers", cfg: func(c *Config) { c.Limits.Layers = 2 }, want: ErrLimit,
		layers: func(t *testing.T, _ *env, _ *testRegistry) []v1.Layer {
			var ls []v1.Layer
			for i := range 3 {
				ls = append(ls, layerOf(t, tarOf(t, file(fmt.Sprint(i), "x"))))
			}
			return ls
		}},
	{name: "layer root not a directory", layers: tars(file(".", "x")), want: ErrUnsafe},
	{name: "whiteout of dotdot", layers: tars(file("a/.wh..", "")), want: ErrUnsafe},
	{name: "entry under a file", layers: tars(file("f", "x"), file("f/g", "y")), want: ErrUnsafe},
	{name: "diff_id mismatch", want: ErrUnsafe, layers: func(t *testing.T, _ *env, _ *testRegistry) []v1.Layer {
		return []v1.Layer{lyingLayer{layerOf(t, tarOf(t, file("a", "x")))}}
	}},
	{name: "duplicate entries where the last wins", layers: tars(file("a", "1"), file("a", "2"), dir("d"), file("d/x", "x"),
		file("d", "now a file"), symlink("s", "a"), file("s", "s is a file"), dir("e/f"), file("e/f/x", "x"),
		file("e", "file"), dir("e"), file("e/y", "e is a dir again")), check: func(t *testing.T, e *env, im *Image) {
		for n, want := range map[string]string{"a": "2", "d": "now a file", "s": "s is a file", "e/y": "e is a dir again"} {
			if b, err := os.ReadFile(filepath.Join(im.LowerDirs[0], n)); err != nil || string(b) != want {
				t.Errorf("%s = %q, %v; want %q", n, b, err, want)
			}
		}
	}},
}

func TestUnpackSafety(t *testing.T) {
	requireRoot(t)
	var before syscall.Stat_t
	if err := syscall.Stat("/etc/passwd", &before); err != nil {
		t.Fatal(err)
	}
	r := newRegistry(t)
	for i, tc := range unpackCases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.cfg)
			ref := r.push(t, fmt.Sprintf("case%d", i), imageOf(t, nil, tc.layers(t, e, r)...))
			im, err := e.pull(t, "img", ref)
			wantErr(t, err, tc.want)
			if err != nil {
				t.Logf("refused: %v", err)
			}
			e.checkContained(t)
			if tc.want != nil {
				if n := e.layerCount(t); n != 0 {
					t.Errorf("%d layers left in the store after a refused pull", n)
				}
				if _, err := e.store.Get("img"); !errors.Is(err, ErrNotFound) {
					t.Errorf("Get after a refused pull: %v", err)
				}
				return
			}
			if tc.check != nil {
				tc.check(t, e, im)
			}
		})
	}
	var after syscall.Stat_t
	if err := syscall.Stat("/etc/passwd", &after); err != nil {
		t.Fatal(err)
	}
	if after.Nlink != before.Nlink || after.Size != before.Size || after.Mtim != before.Mtim {
		t.Errorf("/etc/passwd changed: %+v -> %+v", before, after)
	}
}
