package template

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

var long = flag.Bool("long", false, "run slow tests (a million-entry layer at the default entry limit)")

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: chown, mknod whiteouts and trusted.* xattrs")
	}
}

// ent is one tar entry a test layer holds.
type ent struct {
	hdr  tar.Header
	body string
}

func file(name, body string) ent {
	return ent{tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}, body}
}
func dir(name string) ent {
	return ent{hdr: tar.Header{Name: name + "/", Typeflag: tar.TypeDir, Mode: 0o755}}
}
func symlink(name, target string) ent {
	return ent{hdr: tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}}
}
func hardlink(name, target string) ent {
	return ent{hdr: tar.Header{Name: name, Typeflag: tar.TypeLink, Linkname: target}}
}
func device(name string, typ byte, major, minor int64) ent {
	return ent{hdr: tar.Header{Name: name, Typeflag: typ, Mode: 0o666, Devmajor: major, Devminor: minor}}
}
func withMode(e ent, mode int64) ent    { e.hdr.Mode = mode; return e }
func withOwner(e ent, uid, gid int) ent { e.hdr.Uid, e.hdr.Gid = uid, gid; return e }
func withPAX(e ent, k, v string) ent    { e.hdr.PAXRecords = map[string]string{k: v}; return e }
func withTime(e ent, t time.Time) ent   { e.hdr.ModTime = t; return e }
func tarOf(t *testing.T, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := e.hdr
		if h.ModTime.IsZero() {
			h.ModTime = time.Unix(1700000000, 0)
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatalf("tar header %s: %v", h.Name, err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// layerOf makes a gzip layer from raw tar bytes.
func layerOf(t *testing.T, b []byte) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func imageOf(t *testing.T, cfg *v1.Config, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	if cfg != nil {
		if img, err = mutate.Config(img, *cfg); err != nil {
			t.Fatal(err)
		}
	}
	return img
}

// testRegistry is an in-process registry on a loopback httptest server.
type testRegistry struct {
	host  string
	blobs *lazyBlobs
}

func newRegistry(t *testing.T) *testRegistry {
	t.Helper()
	blobs := &lazyBlobs{BlobHandler: registry.NewInMemoryBlobHandler(), gen: map[v1.Hash]*genLayer{}}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithBlobHandler(blobs)))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return &testRegistry{host: u.Host, blobs: blobs}
}

// push uploads img as host/repo:latest and returns its reference.
func (r *testRegistry) push(t *testing.T, repo string, img v1.Image) string {
	t.Helper()
	ref := r.host + "/" + repo + ":latest"
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return ref
}

// env is one test's store, with an "outside" directory next to it that
// must stay untouched.
type env struct {
	dir, outside string
	cfg          Config
	store        *Store
}

func newEnv(t *testing.T, mod func(*Config)) *env {
	t.Helper()
	requireRoot(t)
	e := &env{dir: t.TempDir()}
	e.outside = filepath.Join(e.dir, "outside")
	if err := os.Mkdir(e.outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.outside, "sentinel"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	regs, _ := NewRegistryPolicy([]string{"127.0.0.0/8", "*"}, nil)
	e.cfg = Config{Root: filepath.Join(e.dir, "store"), Keychain: authn.NewMultiKeychain(), Registries: regs,
		Log: slog.New(slog.DiscardHandler)}
	if mod != nil {
		mod(&e.cfg)
	}
	e.open(t)
	return e
}

func (e *env) open(t *testing.T) {
	t.Helper()
	s, err := Open(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.store = s
	t.Cleanup(func() { s.Close() })
}

func (e *env) pull(t *testing.T, imgName, ref string) (*Image, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return e.store.Pull(ctx, imgName, Source{Registry: ref})
}

// checkContained asserts nothing was written outside the store and no
// unpack debris is left in it.
func (e *env) checkContained(t *testing.T) {
	t.Helper()
	if got := names(t, e.dir); fmt.Sprint(got) != "[outside store]" {
		t.Errorf("test dir holds %v, want only outside and store", got)
	}
	if got := names(t, e.outside); fmt.Sprint(got) != "[sentinel]" {
		t.Errorf("outside dir holds %v, want only sentinel", got)
	}
	if got := names(t, filepath.Join(e.cfg.Root, "tmp")); len(got) != 0 {
		t.Errorf("store tmp/ holds %v after the pull", got)
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// layerCount returns how many layers the store holds on disk.
func (e *env) layerCount(t *testing.T) int {
	return len(names(t, filepath.Join(e.cfg.Root, "layers/sha256")))
}

func lstat(t *testing.T, p string) fs.FileInfo {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

func wantErr(t *testing.T, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != nil && !errors.Is(err, want):
		t.Fatalf("error = %v, want %v", err, want)
	}
}
