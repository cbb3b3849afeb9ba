package template

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/paddock-sandbox/paddock/internal/store"
	"golang.org/x/sys/unix"
)

// Errors returned by the package, to be tested with errors.Is.
var (
	// ErrNotFound means no image has that name.
	ErrNotFound = errors.New("template: not found")
	// ErrInvalid means a bad image name, source or configuration.
	ErrInvalid = errors.New("template: invalid")
	// ErrUnsafe means a layer tried to escape its directory or was not
	// what its digest promised; the layer is refused as a whole.
	ErrUnsafe = errors.New("template: unsafe layer")
	// ErrLimit means a layer or image exceeded one of the Limits.
	ErrLimit = errors.New("template: limit exceeded")
	// ErrBudget means a pull would exceed the store's disk budget even
	// after evicting every unreferenced layer.
	ErrBudget = errors.New("template: disk budget exceeded")
	// ErrInsecure means a plain-HTTP request to a non-loopback registry.
	ErrInsecure = errors.New("template: plain HTTP to a non-loopback registry")
)

// Limits bound what one layer or image may contain. Zero fields take the
// defaults documented on each.
type Limits struct {
	// LayerBytes bounds the file content of one layer (default 4 GiB).
	LayerBytes int64
	// FileBytes bounds one file's size (default LayerBytes).
	FileBytes int64
	// Entries bounds the tar entries of one layer (default 500,000).
	Entries int
	// PathLen bounds the length of an entry name or link target (default 4096).
	PathLen int
	// Layers bounds the layers of one image (default 128).
	Layers int
}

func (l Limits) withDefaults() Limits {
	if l.LayerBytes <= 0 {
		l.LayerBytes = 4 << 30
	}
	if l.FileBytes <= 0 || l.FileBytes > l.LayerBytes {
		l.FileBytes = l.LayerBytes
	}
	if l.Entries <= 0 {
		l.Entries = 500_000
	}
	if l.PathLen <= 0 {
		l.PathLen = 4096
	}
	if l.Layers <= 0 {
		l.Layers = 128
	}
	return l
}

// Config configures a Store.
type Config struct {
	// Root is the store's directory; it is created 0700 if missing. It
	// must not contain ':' or ',' (overlay mount options).
	Root string
	// Limits bound each layer and image.
	Limits Limits
	// DiskBudget bounds the bytes charged for all layers (file content
	// rounded up to 4 KiB blocks, plus a block per directory); 0 means
	// no budget.
	DiskBudget int64
	// UIDBase and GIDBase shift file ownership (see the package doc);
	// IDRange (default 65536) is how many ids are shifted.
	UIDBase, GIDBase, IDRange uint32
	// Platform picks an image from a multi-platform index, as "os/arch"
	// or "os/arch/variant" (default "linux/" + runtime.GOARCH).
	Platform string
	// Keychain resolves registry credentials (default authn.DefaultKeychain).
	Keychain authn.Keychain
	// Transport carries registry requests (default http.DefaultTransport);
	// it is always wrapped so plain HTTP reaches only loopback hosts.
	Transport http.RoundTripper
	// Registries bounds the registries a Registry source may name and
	// the addresses fetching may connect to (default
	// NewRegistryPolicy(nil, nil): public registries only). It supplies
	// the transport when Transport is nil.
	Registries *RegistryPolicy
	// InUse, if set, returns the lower directories still mounted by live
	// sandboxes (an Image.Lower string may be returned whole); GC and
	// eviction keep every layer it names. It must not call the Store.
	InUse func() []string
	// Log receives progress and warnings (default slog.Default()).
	Log *slog.Logger
}

// ImageConfig is the part of an image's config a sandbox needs.
type ImageConfig struct {
	Env          []string `json:"env,omitempty"`
	WorkingDir   string   `json:"working_dir,omitempty"`
	User         string   `json:"user,omitempty"`
	Cmd          []string `json:"cmd,omitempty"`
	Entrypoint   []string `json:"entrypoint,omitempty"`
	OS           string   `json:"os,omitempty"`
	Architecture string   `json:"architecture,omitempty"`
}

// Image is a pulled template root, persisted as <root>/images/<name>.json.
type Image struct {
	Name   string `json:"name"`
	Source Source `json:"source"`
	// Digest is the manifest digest ("sha256:..."); empty for Dir sources.
	Digest string `json:"digest,omitempty"`
	// Layers are the diff_ids in image order, base layer first.
	Layers []string `json:"layers,omitempty"`
	// Dir is the root of a Dir source used in place.
	Dir    string      `json:"dir,omitempty"`
	Config ImageConfig `json:"config"`
	// Size is the bytes charged for the image's layers (shared layers
	// count in every image that uses them).
	Size     int64     `json:"size"`
	Warnings []string  `json:"warnings,omitempty"`
	Created  time.Time `json:"created"`
	// LowerDirs are the layer roots, top layer first, for overlayfs.
	LowerDirs []string `json:"-"`
}

// Lower returns the overlayfs lowerdir option value: LowerDirs joined by ':'.
func (im *Image) Lower() string { return strings.Join(im.LowerDirs, ":") }

// layerInfo is a finished layer, persisted as layer.json.
type layerInfo struct {
	DiffID   string    `json:"diff_id"`
	Size     int64     `json:"size"`
	Entries  int       `json:"entries"`
	Warnings []string  `json:"warnings,omitempty"`
	Created  time.Time `json:"created"`
	lastUsed time.Time
}

// storeMeta is <root>/store.json.
type storeMeta struct {
	Version int    `json:"version"`
	UIDBase uint32 `json:"uid_base"`
	GIDBase uint32 `json:"gid_base"`
	IDRange uint32 `json:"id_range"`
}

// Store holds layers and images under one root. It is safe for
// concurrent use; only one Store (one process) may open a root at a time.
type Store struct {
	cfg  Config
	log  *slog.Logger
	lock *os.File

	mu       sync.Mutex
	images   map[string]*Image
	layers   map[string]*layerInfo
	pins     map[string]int           // diff_id → pulls using it right now
	inflight map[string]chan struct{} // diff_id → closed when unpacked
	usage    int64                    // bytes charged for finished layers
	pending  int64                    // bytes charged for layers being unpacked
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidName reports whether name can name an image.
func ValidName(name string) bool { return namePattern.MatchString(name) }

// Open opens (creating if needed) the store at cfg.Root, removes
// unfinished layers left by a crash and loads the saved images.
func Open(cfg Config) (*Store, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.IDRange == 0 {
		cfg.IDRange = 65536
	}
	if cfg.Platform == "" {
		cfg.Platform = "linux/" + runtime.GOARCH
	}
	if cfg.Registries == nil {
		cfg.Registries, _ = NewRegistryPolicy(nil, nil)
	}
	if cfg.Keychain == nil {
		cfg.Keychain = authn.DefaultKeychain
	}
	cfg.Limits = cfg.Limits.withDefaults()
	switch {
	case !filepath.IsAbs(cfg.Root) || strings.ContainsAny(cfg.Root, ":,"):
		return nil, fmt.Errorf("%w: root %q must be absolute, without ':' or ','", ErrInvalid, cfg.Root)
	case cfg.IDRange < 65535:
		return nil, fmt.Errorf("%w: id range %d below 65535", ErrInvalid, cfg.IDRange)
	case uint64(cfg.UIDBase)+uint64(cfg.IDRange) > 1<<32-1, uint64(cfg.GIDBase)+uint64(cfg.IDRange) > 1<<32-1:
		return nil, fmt.Errorf("%w: uid/gid base overflows", ErrInvalid)
	}
	cfg.Root = filepath.Clean(cfg.Root)
	for _, d := range []string{"", "layers/sha256", "images", "tmp"} {
		if err := os.MkdirAll(filepath.Join(cfg.Root, d), 0o700); err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
	}
	lock, err := os.OpenFile(filepath.Join(cfg.Root, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("open store: %s is in use: %w", cfg.Root, err)
	}
	s := &Store{cfg: cfg, log: cfg.Log, lock: lock, images: map[string]*Image{},
		layers: map[string]*layerInfo{}, pins: map[string]int{}, inflight: map[string]chan struct{}{}}
	if err := s.load(); err != nil {
		lock.Close()
		return nil, err
	}
	return s, nil
}

// Close releases the root's lock. Pulls in progress must have returned.
func (s *Store) Close() error { return s.lock.Close() }

// load checks store.json, empties tmp/ and reads layers and images.
func (s *Store) load() error {
	want := storeMeta{Version: 1, UIDBase: s.cfg.UIDBase, GIDBase: s.cfg.GIDBase, IDRange: s.cfg.IDRange}
	var have storeMeta
	p := filepath.Join(s.cfg.Root, "store.json")
	if err := readJSON(p, &have); errors.Is(err, os.ErrNotExist) {
		if err := writeJSON(p, want); err != nil {
			return fmt.Errorf("open store: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("open store: %w", err)
	} else if have != want {
		return fmt.Errorf("%w: %s was made with uid base %d, gid base %d, id range %d; use another root",
			ErrInvalid, s.cfg.Root, have.UIDBase, have.GIDBase, have.IDRange)
	}
	for _, d := range []string{s.cfg.Root, filepath.Join(s.cfg.Root, "images")} {
		if err := store.CleanTemps(d, 0); err != nil {
			return fmt.Errorf("open store: %w", err)
		}
	}
	tmp, _ := os.ReadDir(filepath.Join(s.cfg.Root, "tmp"))
	for _, e := range tmp {
		os.RemoveAll(filepath.Join(s.cfg.Root, "tmp", e.Name()))
	}
	ents, err := os.ReadDir(filepath.Join(s.cfg.Root, "layers/sha256"))
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	for _, e := range ents {
		id := "sha256:" + e.Name()
		dir := filepath.Join(s.cfg.Root, "layers/sha256", e.Name())
		li := new(layerInfo)
		fi, err := os.Stat(filepath.Join(dir, "ready"))
		if err == nil && validDiffID(id) {
			err = readJSON(filepath.Join(dir, "layer.json"), li)
		}
		if err != nil || li.DiffID != id {
			s.log.Warn("template: removing unfinished layer", "layer", id)
			os.RemoveAll(dir)
			continue
		}
		li.lastUsed = fi.ModTime()
		s.layers[id] = li
		s.usage += li.Size
	}
	files, _ := filepath.Glob(filepath.Join(s.cfg.Root, "images", "*.json"))
	for _, f := range files {
		im := new(Image)
		if err := readJSON(f, im); err != nil || !ValidName(im.Name) || im.Name+".json" != filepath.Base(f) {
			s.log.Warn("template: skipping unreadable image", "file", f, "err", err)
			continue
		}
		s.images[im.Name] = im
	}
	return nil
}

// Get returns the named image with its LowerDirs filled in.
func (s *Store) Get(name string) (*Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	im, ok := s.images[name]
	if !ok {
		return nil, fmt.Errorf("%w: image %q", ErrNotFound, name)
	}
	out := s.withDirs(im)
	for _, id := range im.Layers {
		if s.layers[id] == nil {
			return nil, fmt.Errorf("%w: image %q: layer %s is missing; pull it again", ErrNotFound, name, id)
		}
	}
	return out, nil
}

// List returns every image, sorted by name.
func (s *Store) List() ([]*Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Image, 0, len(s.images))
	for _, im := range s.images {
		out = append(out, s.withDirs(im))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Delete forgets the named image. Its layers stay until GC or eviction.
func (s *Store) Delete(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.images[name]; !ok {
		return fmt.Errorf("%w: image %q", ErrNotFound, name)
	}
	if err := os.Remove(s.imagePath(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete image: %w", err)
	}
	delete(s.images, name)
	return nil
}

// withDirs copies im and fills LowerDirs. s.mu must be held.
func (s *Store) withDirs(im *Image) *Image {
	out := *im
	out.Layers = append([]string(nil), im.Layers...)
	out.Warnings = append([]string(nil), im.Warnings...)
	out.LowerDirs = nil
	if im.Dir != "" {
		out.LowerDirs = []string{im.Dir}
	}
	// A layer repeated in an image (an empty layer, say) is kept only at
	// its topmost position: the merged tree is the same, and overlayfs
	// wants each lower dir once.
	seen := map[string]bool{}
	for i := len(im.Layers) - 1; i >= 0; i-- {
		if id := im.Layers[i]; !seen[id] {
			seen[id] = true
			out.LowerDirs = append(out.LowerDirs, s.layerRootfs(id))
		}
	}
	return &out
}

func (s *Store) imagePath(name string) string {
	return filepath.Join(s.cfg.Root, "images", name+".json")
}

func (s *Store) layerDir(diffID string) string {
	return filepath.Join(s.cfg.Root, "layers/sha256", strings.TrimPrefix(diffID, "sha256:"))
}

func (s *Store) layerRootfs(diffID string) string { return filepath.Join(s.layerDir(diffID), "rootfs") }

var diffIDPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

func validDiffID(id string) bool { return diffIDPattern.MatchString(id) }

func readJSON(p string, v any) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// writeJSON writes v to p atomically (store.WriteFileAtomic).
func writeJSON(p string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return store.WriteFileAtomic(p, append(b, '\n'), 0o600)
}
