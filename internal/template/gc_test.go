package template

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// twoImages returns two images sharing a random base layer.
func twoImages(t *testing.T) (a, b v1.Image) {
	t.Helper()
	base, err := random.Layer(1024, types.DockerLayer)
	if err != nil {
		t.Fatal(err)
	}
	a = imageOf(t, nil, base, layerOf(t, tarOf(t, file("a", "a"))))
	b = imageOf(t, nil, base, layerOf(t, tarOf(t, file("b", "b"))))
	return a, b
}

func TestLayerSharingAndGC(t *testing.T) {
	e := newEnv(t, nil)
	r := newRegistry(t)
	a, b := twoImages(t)
	imA, err := e.pull(t, "a", r.push(t, "a", a))
	if err != nil {
		t.Fatal(err)
	}
	imB, err := e.pull(t, "b", r.push(t, "b", b))
	if err != nil {
		t.Fatal(err)
	}
	if n := e.layerCount(t); n != 3 {
		t.Errorf("%d layers on disk, want 3 (the base is shared)", n)
	}
	if imA.LowerDirs[1] != imB.LowerDirs[1] || imA.LowerDirs[0] == imB.LowerDirs[0] {
		t.Errorf("lower dirs %q and %q: want only the base shared", imA.LowerDirs, imB.LowerDirs)
	}
	if err := e.store.Delete("a"); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Delete("a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Delete: %v", err)
	}
	if n := e.layerCount(t); n != 3 {
		t.Errorf("Delete removed layers: %d left", n)
	}
	freed, err := e.store.GC(context.Background())
	if err != nil || freed <= 0 {
		t.Fatalf("GC = %d, %v", freed, err)
	}
	if n := e.layerCount(t); n != 2 {
		t.Errorf("%d layers after GC, want 2", n)
	}
	if _, err := os.Stat(imA.LowerDirs[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a's own layer survived GC: %v", err)
	}

	// Images and layers survive a restart.
	e.store.Close()
	e.open(t)
	got, err := e.store.Get("b")
	if err != nil || got.Lower() != imB.Lower() {
		t.Fatalf("Get(b) after reopen = %+v, %v", got, err)
	}
	if list, _ := e.store.List(); len(list) != 1 || list[0].Name != "b" {
		t.Errorf("List after reopen = %+v", list)
	}
	if used, _ := e.store.Usage(); used != imB.Size {
		t.Errorf("usage after reopen = %d, want %d", used, imB.Size)
	}
	e.store.Delete("b")
	e.store.GC(context.Background())
	if n := e.layerCount(t); n != 0 {
		t.Errorf("%d layers after deleting everything", n)
	}
	if used, _ := e.store.Usage(); used != 0 {
		t.Errorf("usage = %d after deleting everything", used)
	}
	e.checkContained(t)
}

func TestInUseKeepsLayers(t *testing.T) {
	var mu sync.Mutex
	var inUse []string
	e := newEnv(t, func(c *Config) {
		c.InUse = func() []string { mu.Lock(); defer mu.Unlock(); return inUse }
	})
	r := newRegistry(t)
	a, _ := twoImages(t)
	im, err := e.pull(t, "a", r.push(t, "a", a))
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	inUse = []string{im.Lower()}
	mu.Unlock()
	e.store.Delete("a")
	e.store.GC(context.Background())
	if n := e.layerCount(t); n != 2 {
		t.Errorf("GC removed layers a sandbox uses: %d left", n)
	}
	mu.Lock()
	inUse = nil
	mu.Unlock()
	e.store.GC(context.Background())
	if n := e.layerCount(t); n != 0 {
		t.Errorf("%d layers left once unused", n)
	}
}

func TestDiskBudget(t *testing.T) {
	// Each image is one layer with a 100 KiB file: 100 KiB charged.
	const budget = 250 << 10
	e := newEnv(t, func(c *Config) { c.DiskBudget = budget })
	r := newRegistry(t)
	refs := map[string]string{}
	for _, n := range []string{"a", "b", "c"} {
		img := imageOf(t, nil, layerOf(t, tarOf(t, file(n, strings.Repeat(n, 100<<10)))))
		refs[n] = r.push(t, n, img)
	}
	imA, err := e.pull(t, "a", refs["a"])
	if err != nil {
		t.Fatal(err)
	}
	imB, err := e.pull(t, "b", refs["b"])
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.pull(t, "c", refs["c"])
	wantErr(t, err, ErrBudget)
	t.Logf("over budget: %v", err)
	e.checkContained(t)

	// With a and b unreferenced, pulling c evicts the older one only.
	e.store.Delete("b")
	e.store.Delete("a")
	if _, err := e.store.Get("a"); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	if _, err := e.pull(t, "b2", refs["b"]); err != nil { // b is now the most recently used
		t.Fatal(err)
	}
	e.store.Delete("b2")
	if _, err := e.pull(t, "c", refs["c"]); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(imA.LowerDirs[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the oldest unreferenced layer (a) was not evicted: %v", err)
	}
	if _, err := os.Stat(imB.LowerDirs[0]); err != nil {
		t.Errorf("a newer unreferenced layer (b) was evicted: %v", err)
	}
	if used, b := e.store.Usage(); used > b {
		t.Errorf("usage %d over budget %d", used, b)
	}

	// A layer bigger than the whole budget fails after evicting everything.
	big := r.push(t, "big", imageOf(t, nil, layerOf(t, tarOf(t, file("big", strings.Repeat("x", 300<<10))))))
	_, err = e.pull(t, "big", big)
	wantErr(t, err, ErrBudget)
	if n := e.layerCount(t); n != 1 {
		t.Errorf("%d layers left, want only c's", n)
	}
	e.checkContained(t)
}

func TestConcurrentPulls(t *testing.T) {
	e := newEnv(t, nil)
	r := newRegistry(t)
	a, b := twoImages(t)
	refs := []string{r.push(t, "a", a), r.push(t, "b", b)}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.pull(t, fmt.Sprint("img", i), refs[i%2])
			errs <- err
		}()
	}
	wg.Add(1)
	go func() { defer wg.Done(); e.store.GC(context.Background()) }()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := e.layerCount(t); n != 3 {
		t.Errorf("%d layers, want 3", n)
	}
	e.checkContained(t)
}

// countingRT records requests and never touches the network.
type countingRT struct{ n int }

func (c *countingRT) RoundTrip(*http.Request) (*http.Response, error) {
	c.n++
	return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
}

func TestPlainHTTPOnlyToLoopback(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want error
	}{
		{"http://127.0.0.1:5000/v2/", nil},
		{"http://127.9.9.9/v2/", nil},
		{"http://[::1]:5000/v2/", nil},
		{"http://localhost:5000/v2/", nil},
		{"https://10.1.2.3/v2/", nil},
		{"http://10.1.2.3:5000/v2/", ErrInsecure},
		{"http://192.168.1.1/v2/", ErrInsecure},
		{"http://registry.localhost:5000/v2/", ErrInsecure},
		{"http://registry.example/v2/", ErrInsecure},
	} {
		rt := &countingRT{}
		req, _ := http.NewRequest(http.MethodGet, tc.url, nil)
		_, err := loopbackHTTPOnly{rt}.RoundTrip(req)
		if !errors.Is(err, tc.want) || (err == nil) != (rt.n == 1) {
			t.Errorf("%s: err %v, %d requests sent; want %v", tc.url, err, rt.n, tc.want)
		}
	}
	for ref, scheme := range map[string]string{"127.0.0.1:5000/app:v1": "http", "localhost/app": "http",
		"registry.example/app": "https"} {
		r, err := parseRef(ref)
		if err != nil || r.Context().Scheme() != scheme {
			t.Errorf("parseRef(%s) scheme = %v, %v; want %s", ref, r, err, scheme)
		}
	}
}

// TestMillionFilesDefaultLimit unpacks half a million files before the
// default entry limit refuses the layer.
func TestMillionFilesDefaultLimit(t *testing.T) {
	if !*long {
		t.Skip("slow: run with -long")
	}
	e := newEnv(t, nil)
	r := newRegistry(t)
	g := newGenLayer(t, 1_000_000)
	r.blobs.add(g)
	ref := r.push(t, "million", imageOf(t, nil, g))
	ctx := context.Background()
	_, err := e.store.Pull(ctx, "million", Source{Registry: ref})
	wantErr(t, err, ErrLimit)
	if !strings.Contains(err.Error(), "500000 entries") {
		t.Errorf("error %v, want the default 500000-entry limit", err)
	}
	e.checkContained(t)
	if used, _ := e.store.Usage(); used != 0 {
		t.Errorf("usage %d after a refused pull", used)
	}
}

func TestRepeatedLayerAndCancel(t *testing.T) {
	e := newEnv(t, nil)
	r := newRegistry(t)
	x := layerOf(t, tarOf(t, file("x", "x")))
	y := layerOf(t, tarOf(t, file("y", "y")))
	im, err := e.pull(t, "xyx", r.push(t, "xyx", imageOf(t, nil, x, y, x)))
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Layers) != 3 || len(im.LowerDirs) != 2 || im.LowerDirs[0] != e.store.layerRootfs(im.Layers[2]) {
		t.Errorf("layers %q, lower dirs %q: want the repeated layer once, on top", im.Layers, im.LowerDirs)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ref := r.push(t, "other", imageOf(t, nil, layerOf(t, tarOf(t, file("z", "z")))))
	if _, err := e.store.Pull(ctx, "other", Source{Registry: ref}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled pull: %v", err)
	}
	e.checkContained(t)
}
