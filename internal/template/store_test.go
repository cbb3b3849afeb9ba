package template

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sys/unix"
)

var testConfig = v1.Config{Env: []string{"PATH=/usr/local/bin:/usr/bin", "LANG=C.UTF-8"}, WorkingDir: "/app",
	User: "1000:1000", Cmd: []string{"app.py"}, Entrypoint: []string{"python3"}}

// appImage is a random base layer plus a layer with /app/app.py.
func appImage(t *testing.T) v1.Image {
	t.Helper()
	base, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(base, layerOf(t, tarOf(t, dir("app"), file("app/app.py", "print(42)\n"))))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config = "linux", runtime.GOARCH, testConfig
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return img
}

// TestSources pulls one image from a registry, an OCI layout and a docker
// save tarball into one store: the three share their layers.
func TestSources(t *testing.T) {
	e := newEnv(t, nil)
	img := appImage(t)
	other := imageOf(t, nil, layerOf(t, tarOf(t, file("other", "x"))))
	digest, _ := img.Digest()

	r := newRegistry(t)
	ref := r.push(t, "app", img)

	lay := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(lay, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	for tag, im := range map[string]v1.Image{"v1": img, "v2": other} {
		if err := p.AppendImage(im, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "paddock.test/app:" + tag})); err != nil {
			t.Fatal(err)
		}
	}

	tb := filepath.Join(t.TempDir(), "app.tar")
	tag, _ := name.NewTag("paddock.test/app:v1")
	if err := tarball.WriteToFile(tb, tag, img); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name       string
		src        Source
		wantDigest bool
	}{
		{"registry", Source{Registry: ref}, true},
		{"layout", Source{Layout: lay, Tag: "v1"}, true},
		{"tarball", Source{Tarball: tb}, false},
		{"tarball-tagged", Source{Tarball: tb, Tag: "paddock.test/app:v1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im, err := e.store.Pull(context.Background(), tc.name, tc.src)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantDigest && im.Digest != digest.String() {
				t.Errorf("digest = %s, want %s", im.Digest, digest)
			}
			want := ImageConfig{Env: testConfig.Env, WorkingDir: "/app", User: "1000:1000", Cmd: []string{"app.py"},
				Entrypoint: []string{"python3"}, OS: "linux", Architecture: runtime.GOARCH}
			if !reflect.DeepEqual(im.Config, want) {
				t.Errorf("config = %+v, want %+v", im.Config, want)
			}
			if len(im.LowerDirs) != 2 || im.Lower() != strings.Join(im.LowerDirs, ":") {
				t.Fatalf("lower dirs = %q", im.LowerDirs)
			}
			if b, err := os.ReadFile(filepath.Join(im.LowerDirs[0], "app/app.py")); err != nil || string(b) != "print(42)\n" {
				t.Errorf("app.py = %q, %v", b, err)
			}
			if fi := lstat(t, filepath.Join(im.LowerDirs[0], "app/app.py")); fi.Sys().(*syscall.Stat_t).Uid != 0 {
				t.Errorf("app.py uid = %d, want 0 (no shift by default)", fi.Sys().(*syscall.Stat_t).Uid)
			}
			got, err := e.store.Get(tc.name)
			if err != nil || !reflect.DeepEqual(got, im) {
				t.Errorf("Get = %+v, %v; want %+v", got, err, im)
			}
		})
	}
	if n := e.layerCount(t); n != 2 {
		t.Errorf("%d layers on disk, want 2 shared by all sources", n)
	}
	if _, err := e.store.Pull(context.Background(), "x", Source{Layout: lay}); !errors.Is(err, ErrInvalid) {
		t.Errorf("untagged pull from a two-image layout: %v, want ErrInvalid", err)
	}
	e.checkContained(t)
}

func TestDirSources(t *testing.T) {
	e := newEnv(t, nil)
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "etc"), 0o755)
	os.WriteFile(filepath.Join(src, "etc/hostname"), []byte("box\n"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(src, "passwd"))
	os.WriteFile(filepath.Join(src, "su"), []byte("x"), 0o4755)

	im, err := e.store.Pull(context.Background(), "inplace", Source{Dir: src})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(im.LowerDirs, []string{src}) {
		t.Errorf("in-place lower dirs = %q, want [%s]", im.LowerDirs, src)
	}
	for _, n := range []string{"copy1", "copy2"} {
		im, err = e.store.Pull(context.Background(), n, Source{Dir: src, Copy: true})
		if err != nil {
			t.Fatal(err)
		}
	}
	root := im.LowerDirs[0]
	if !strings.HasPrefix(root, e.cfg.Root) || len(im.LowerDirs) != 1 {
		t.Fatalf("copy lower dirs = %q", im.LowerDirs)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/hostname")); string(b) != "box\n" {
		t.Errorf("hostname = %q", b)
	}
	if l, _ := os.Readlink(filepath.Join(root, "passwd")); l != "/etc/passwd" {
		t.Errorf("passwd link = %q", l)
	}
	if m := lstat(t, filepath.Join(root, "su")).Mode(); m != 0o755 {
		t.Errorf("su mode = %v, want setuid stripped", m)
	}
	if n := e.layerCount(t); n != 1 {
		t.Errorf("%d layers for two copies of one dir, want 1", n)
	}
	for _, bad := range []Source{{Dir: "relative"}, {Dir: "/a:b"}, {}, {Dir: src, Registry: "x"}, {Dir: filepath.Join(src, "etc/hostname")}} {
		if _, err := e.store.Pull(context.Background(), "bad", bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("Pull(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := e.store.Pull(context.Background(), "../x", Source{Dir: src}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad name: %v", err)
	}
}

// TestWhiteoutsAcrossLayers checks the overlayfs form of whiteouts and
// opaque directories, and the merged view an overlay mount gives.
func TestWhiteoutsAcrossLayers(t *testing.T) {
	e := newEnv(t, nil)
	r := newRegistry(t)
	l1 := tarOf(t, dir("a"), file("a/keep", "k"), file("a/gone", "g"), dir("b"), file("b/x", "x"),
		file("b/y", "y"), file("top", "t"), dir("c"), file("c/old", "o"))
	l2 := tarOf(t, file("a/.wh.gone", ""), dir("b"), file("b/.wh..wh..opq", ""), file("b/z", "z"),
		file(".wh.top", ""), file("c/.wh..wh..opq", ""), file("new/.wh..wh..opq", ""))
	ref := r.push(t, "wh", imageOf(t, nil, layerOf(t, l1), layerOf(t, l2)))
	im, err := e.pull(t, "wh", ref)
	if err != nil {
		t.Fatal(err)
	}
	top := im.LowerDirs[0]
	for _, n := range []string{"a/gone", "top"} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(top, n), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
			t.Errorf("%s: mode %o rdev %d err %v, want a 0/0 char device", n, st.Mode, st.Rdev, err)
		}
	}
	for _, n := range []string{"b", "c", "new"} {
		buf := make([]byte, 8)
		sz, err := unix.Lgetxattr(filepath.Join(top, n), "trusted.overlay.opaque", buf)
		if err != nil || string(buf[:sz]) != "y" {
			t.Errorf("%s opaque xattr = %q, %v", n, buf[:max(sz, 0)], err)
		}
	}
	filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".wh.") {
			t.Errorf("whiteout file %s stored as is", p)
		}
		return nil
	})

	mnt := t.TempDir()
	if err := unix.Mount("overlay", mnt, "overlay", unix.MS_RDONLY, "lowerdir="+im.Lower()); err != nil {
		t.Skipf("overlay mount unavailable: %v", err)
	}
	defer unix.Unmount(mnt, unix.MNT_DETACH)
	for n, want := range map[string]bool{"a/keep": true, "a/gone": false, "b/z": true, "b/x": false,
		"b/y": false, "top": false, "c": true, "c/old": false, "new": true} {
		_, err := os.Lstat(filepath.Join(mnt, n))
		if got := err == nil; got != want {
			t.Errorf("merged %s exists = %v, want %v", n, got, want)
		}
	}
}

func TestOwnershipShift(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.UIDBase, c.GIDBase = 100000, 200000 })
	r := newRegistry(t)
	ref := r.push(t, "own", imageOf(t, nil, layerOf(t, tarOf(t,
		withOwner(file("root", "x"), 0, 0), withOwner(file("user", "x"), 1000, 1001),
		withOwner(file("huge-id", "x"), 70000, 80000), withOwner(symlink("link", "root"), 7, 8),
		withOwner(dir("d"), 5, 6), file("p/q/implicit", "x")))))
	im, err := e.pull(t, "own", ref)
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range map[string][2]uint32{".": {100000, 200000}, "root": {100000, 200000},
		"user": {101000, 201001}, "huge-id": {165534, 265534}, "link": {100007, 200008},
		"d": {100005, 200006}, "p": {100000, 200000}, "p/q": {100000, 200000}} {
		st := lstat(t, filepath.Join(im.LowerDirs[0], n)).Sys().(*syscall.Stat_t)
		if [2]uint32{st.Uid, st.Gid} != want {
			t.Errorf("%s owner = %d:%d, want %d:%d", n, st.Uid, st.Gid, want[0], want[1])
		}
	}
	e.store.Close()
	e.cfg.UIDBase = 0
	if _, err := Open(e.cfg); !errors.Is(err, ErrInvalid) {
		t.Errorf("reopen with another uid base: %v, want ErrInvalid", err)
	}
}

func TestOpenLocksRoot(t *testing.T) {
	e := newEnv(t, nil)
	if _, err := Open(e.cfg); err == nil {
		t.Fatal("second Open of a root in use succeeded")
	}
	if _, err := Open(Config{Root: "relative"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("relative root: %v", err)
	}
}

func TestPlatformIndex(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Platform = "linux/arm64" })
	amd := imageOf(t, nil, layerOf(t, tarOf(t, file("arch", "amd64"))))
	arm := imageOf(t, nil, layerOf(t, tarOf(t, file("arch", "arm64"))))
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}}},
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}})
	lay := filepath.Join(t.TempDir(), "layout")
	if _, err := layout.Write(lay, idx); err != nil {
		t.Fatal(err)
	}
	im, err := e.store.Pull(context.Background(), "multi", Source{Layout: lay})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(im.LowerDirs[0], "arch")); string(b) != "arm64" {
		t.Errorf("picked the %q image, want arm64", b)
	}
}
