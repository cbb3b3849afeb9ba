package template

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/internal/store"
)

// maxWarnings bounds the warnings kept per layer.
const maxWarnings = 100

// Pull fetches src, unpacks the layers the store lacks and saves the
// result as image name, replacing any image of that name. Layers shared
// with other images are unpacked once. A Dir source without Copy is only
// recorded.
func (s *Store) Pull(ctx context.Context, name string, src Source) (*Image, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("%w: image name %q", ErrInvalid, name)
	}
	if err := src.validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	s.log.Info("template: pulling", "image", name, "source", src.String())
	im := &Image{Name: name, Source: src, Created: start.UTC()}
	var pins []string
	defer func() { s.unpin(pins) }()
	var err error
	switch {
	case src.Dir != "" && !src.Copy:
		if err = checkDir(src.Dir); err == nil {
			im.Dir = filepath.Clean(src.Dir)
		}
	case src.Dir != "":
		err = s.pullDir(ctx, im, &pins)
	case src.Registry != "":
		err = s.registryErr(src.Registry, s.pullImage(ctx, im, &pins))
	default:
		err = s.pullImage(ctx, im, &pins)
	}
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := writeJSON(s.imagePath(name), im); err != nil {
		return nil, fmt.Errorf("pull %s: save: %w", name, err)
	}
	s.images[name] = im
	s.log.Info("template: pulled", "image", name, "digest", im.Digest, "layers", len(im.Layers),
		"bytes", im.Size, "warnings", len(im.Warnings), "took", time.Since(start).Round(time.Millisecond))
	return s.withDirs(im), nil
}

// pullImage unpacks a registry, layout or tarball image into im.
func (s *Store) pullImage(ctx context.Context, im *Image, pins *[]string) error {
	img, err := s.resolve(ctx, im.Source)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if cf.OS != "" && cf.OS != "linux" {
		return fmt.Errorf("%w: image is for %s, not linux", ErrInvalid, cf.OS)
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	if len(layers) > s.cfg.Limits.Layers {
		return fmt.Errorf("%w: %d layers (limit %d)", ErrLimit, len(layers), s.cfg.Limits.Layers)
	}
	im.Digest = digest.String()
	c := cf.Config
	im.Config = ImageConfig{Env: c.Env, WorkingDir: c.WorkingDir, User: c.User, Cmd: c.Cmd,
		Entrypoint: c.Entrypoint, OS: cf.OS, Architecture: cf.Architecture}
	if want := platformArch(s.cfg.Platform); cf.Architecture != "" && cf.Architecture != want {
		im.Warnings = append(im.Warnings, fmt.Sprintf("image is for %s, not %s", cf.Architecture, want))
	}
	for _, l := range layers {
		d, err := l.DiffID()
		if err != nil {
			return err
		}
		if !validDiffID(d.String()) {
			return fmt.Errorf("%w: unsupported diff_id %q", ErrInvalid, d.String())
		}
		im.Layers = append(im.Layers, d.String())
	}
	*pins = append(*pins, im.Layers...)
	s.pin(im.Layers)
	for i, l := range layers {
		li, err := s.ensureLayer(ctx, im.Layers[i], l.Uncompressed)
		if err != nil {
			return fmt.Errorf("layer %d (%s): %w", i, im.Layers[i], err)
		}
		im.Size += li.Size
		im.Warnings = append(im.Warnings, li.Warnings...)
	}
	return nil
}

// pullDir copies a Dir source into the store as a single layer.
func (s *Store) pullDir(ctx context.Context, im *Image, pins *[]string) error {
	dir, err := filepath.EvalSymlinks(im.Source.Dir)
	if err != nil {
		return fmt.Errorf("%w: dir: %w", ErrInvalid, err)
	}
	if err := checkDir(dir); err != nil {
		return err
	}
	li, err := s.unpackLayer(ctx, "", func() (io.ReadCloser, error) { return tarDir(ctx, dir), nil })
	if err != nil {
		return err
	}
	*pins = append(*pins, li.DiffID)
	im.Layers, im.Size, im.Warnings = []string{li.DiffID}, li.Size, li.Warnings
	return nil
}

// ensureLayer returns layer id, unpacking it from open unless it is
// already in the store or being unpacked by another pull.
func (s *Store) ensureLayer(ctx context.Context, id string, open func() (io.ReadCloser, error)) (*layerInfo, error) {
	for {
		s.mu.Lock()
		if li := s.layers[id]; li != nil {
			s.touch(li)
			s.mu.Unlock()
			return li, nil
		}
		if ch := s.inflight[id]; ch != nil {
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		ch := make(chan struct{})
		s.inflight[id] = ch
		s.mu.Unlock()
		li, err := s.unpackLayer(ctx, id, open)
		s.mu.Lock()
		delete(s.inflight, id)
		close(ch)
		s.mu.Unlock()
		return li, err
	}
}

// unpackLayer unpacks a layer stream into tmp/, checks it hashes to want
// (any hash when want is empty; the result then comes back pinned) and
// renames it into layers/.
func (s *Store) unpackLayer(ctx context.Context, want string, open func() (io.ReadCloser, error)) (*layerInfo, error) {
	return s.unpackLayerMax(ctx, want, 0, open)
}

// unpackLayerMax is unpackLayer with the layer's charged bytes capped at
// maxBytes (0: no cap beyond the budget).
func (s *Store) unpackLayerMax(ctx context.Context, want string, maxBytes int64, open func() (io.ReadCloser, error)) (_ *layerInfo, err error) {
	tmp, err := os.MkdirTemp(filepath.Join(s.cfg.Root, "tmp"), "layer-")
	if err != nil {
		return nil, err
	}
	var charged int64
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
		s.mu.Lock()
		s.pending -= charged
		s.mu.Unlock()
	}()
	rootfs := filepath.Join(tmp, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return nil, err
	}
	if err := os.Lchown(rootfs, int(s.cfg.UIDBase), int(s.cfg.GIDBase)); err != nil {
		return nil, err
	}
	rc, err := open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	lim := s.cfg.Limits
	sr := &streamReader{r: rc, h: sha256.New(), max: lim.LayerBytes + int64(lim.Entries)*8192 + 1<<20}
	var warns []string
	entries, err := unpack(ctx, sr, rootfs, unpackOpts{
		lim: lim, uidBase: s.cfg.UIDBase, gidBase: s.cfg.GIDBase, idRange: s.cfg.IDRange,
		charge: func(n int64) error {
			if maxBytes > 0 && charged+n > maxBytes {
				return fmt.Errorf("%w: the layer takes more than %d bytes of disk (the sandbox's disk_mib)", ErrLimit, maxBytes)
			}
			if err := s.reserve(n); err != nil {
				return err
			}
			charged += n
			return nil
		},
		warn: func(w string) {
			if len(warns) < maxWarnings {
				warns = append(warns, w)
			}
		},
	})
	if err == nil {
		_, err = io.Copy(io.Discard, sr) // the digest covers the padding too
	}
	if err != nil {
		return nil, err
	}
	got := "sha256:" + hex.EncodeToString(sr.h.Sum(nil))
	if want != "" && got != want {
		return nil, fmt.Errorf("%w: content hashes to %s, not its diff_id", ErrUnsafe, got)
	}
	now := time.Now()
	li := &layerInfo{DiffID: got, Size: charged, Entries: entries, Warnings: warns, Created: now.UTC(), lastUsed: now}
	if err := writeJSON(filepath.Join(tmp, "layer.json"), li); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "ready"), nil, 0o600); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if want == "" {
		s.pins[got]++
	}
	if old := s.layers[got]; old != nil { // an identical Dir copy
		s.touch(old)
		return old, nil
	}
	final := s.layerDir(got)
	os.RemoveAll(final) // debris: a finished layer would be in s.layers
	if err := store.PublishDir(tmp, final); err != nil {
		return nil, err
	}
	done = true
	s.pending -= charged
	charged = 0
	s.layers[got] = li
	s.usage += li.Size
	for _, w := range warns {
		s.log.Warn("template: layer "+got, "warning", w)
	}
	return li, nil
}

// touch records that a layer was just used. s.mu must be held.
func (s *Store) touch(li *layerInfo) {
	now := time.Now()
	li.lastUsed = now
	os.Chtimes(filepath.Join(s.layerDir(li.DiffID), "ready"), now, now)
}

// streamReader hashes a layer stream and bounds its length.
type streamReader struct {
	r      io.Reader
	h      hash.Hash
	n, max int64
}

// Read implements io.Reader.
func (sr *streamReader) Read(p []byte) (int, error) {
	if sr.n > sr.max {
		return 0, fmt.Errorf("%w: layer stream over %d bytes", ErrLimit, sr.max)
	}
	if rem := sr.max - sr.n + 1; int64(len(p)) > rem {
		p = p[:rem]
	}
	n, err := sr.r.Read(p)
	sr.n += int64(n)
	sr.h.Write(p[:n])
	return n, err
}

// platformArch returns the architecture part of "os/arch[/variant]".
func platformArch(p string) string {
	parts := strings.Split(p, "/")
	if len(parts) < 2 {
		return p
	}
	return parts[1]
}
