package template

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Root is what a backend needs to build a sandbox's root from a template
// that is not the built-in base: the image's layer directories and
// environment, whether the stack sits on the base template (the host's
// system), and the OCI runtime to use.
type Root struct {
	// Ref is the name the backend records for the sandbox.
	Ref string
	// Lower are the image's layer roots, top layer first (Image.LowerDirs).
	Lower []string
	// OnBase stacks Lower on the base template root, with the host's
	// /usr and friends mounted read-only as in the base template.
	OnBase bool
	// Env is the image's environment, KEY=VALUE; a request's env wins.
	Env []string
	// Runtime names the OCI runtime; empty means the default.
	Runtime string
}

// Upper is a running root's writable overlay directory, for Commit.
type Upper struct {
	// Dir is the overlay upper directory.
	Dir string
	// UIDBase is the host uid of the root's uid 0.
	UIDBase uint32
	// Ref is the template name the root was made from.
	Ref string
	// MaxBytes caps the disk a commit of the upper may take (the
	// sandbox's disk_mib); 0: the store's limits only.
	MaxBytes int64
}

// Save stores im under im.Name from layers already in the store, for
// example a cached build step whose only change is its config, or a new
// tag for an existing image. Size and Created are filled in; Digest is
// set to a hash of the layers and config when empty.
func (s *Store) Save(im Image) (*Image, error) {
	if !ValidName(im.Name) {
		return nil, fmt.Errorf("%w: image name %q", ErrInvalid, im.Name)
	}
	if im.Dir != "" {
		return nil, fmt.Errorf("%w: an in-place directory image cannot be saved under another name", ErrInvalid)
	}
	if len(im.Layers) > s.cfg.Limits.Layers {
		return nil, fmt.Errorf("%w: %d layers (limit %d)", ErrLimit, len(im.Layers), s.cfg.Limits.Layers)
	}
	im.Layers = append([]string(nil), im.Layers...)
	im.LowerDirs = nil
	if im.Created.IsZero() {
		im.Created = time.Now().UTC()
	}
	if im.Digest == "" {
		im.Digest = configDigest(im.Layers, im.Config)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	im.Size = 0
	for _, id := range im.Layers {
		li := s.layers[id]
		if li == nil {
			return nil, fmt.Errorf("%w: layer %s is not in the store", ErrNotFound, id)
		}
		s.touch(li)
		im.Size += li.Size
	}
	if err := writeJSON(s.imagePath(im.Name), &im); err != nil {
		return nil, fmt.Errorf("save %s: %w", im.Name, err)
	}
	s.images[im.Name] = &im
	return s.withDirs(&im), nil
}

// configDigest names an image that has no manifest: a hash of its layers
// and config.
func configDigest(layers []string, cfg ImageConfig) string {
	b, _ := json.Marshal(struct {
		Layers []string    `json:"layers"`
		Config ImageConfig `json:"config"`
	}{layers, cfg})
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

// Commit turns upper, the writable directory of an overlay whose lower
// layers are parent's (nil for none), into a new layer and saves image
// name as parent's layers plus that layer, with config cfg. upper is in
// overlayfs format: whiteouts (0/0 character devices) become ".wh."
// entries and opaque directories get ".wh..wh..opq". Files owned by host
// ids in [uidBase, uidBase+IDRange) are recorded as owned by id-uidBase
// (the sandbox's own view); other ids become 65534. The layer goes through
// the same unpacker, limits and budget as a pulled one; sparse files stay
// sparse, and the layer's disk is capped at maxBytes (0: no cap beyond
// the store's). upper must not change while Commit reads it (freeze the
// sandbox).
func (s *Store) Commit(ctx context.Context, name string, parent *Image, upper string, uidBase uint32, maxBytes int64, cfg ImageConfig) (*Image, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("%w: image name %q", ErrInvalid, name)
	}
	if parent != nil && parent.Dir != "" {
		return nil, fmt.Errorf("%w: cannot add a layer to an image used in place from %s (import the directory with copy)", ErrInvalid, parent.Dir)
	}
	li, err := s.unpackLayerMax(ctx, "", maxBytes, func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(writeUpperTar(ctx, upper, uidBase, s.cfg.IDRange, pw)) }()
		return pr, nil
	})
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", name, err)
	}
	defer s.unpin([]string{li.DiffID})
	im := Image{Name: name, Config: cfg}
	if parent != nil {
		im.Layers = append(im.Layers, parent.Layers...)
	}
	im.Layers = append(im.Layers, li.DiffID)
	im.Warnings = li.Warnings
	return s.Save(im)
}

// LayerSize returns the bytes charged for a layer, 0 if it is unknown.
func (s *Store) LayerSize(diffID string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if li := s.layers[diffID]; li != nil {
		return li.Size
	}
	return 0
}

// skipInUpper lists top-level names never committed from an upper dir:
// the agent's directory (the backend supplies it) and mount points.
var skipInUpper = map[string]bool{".paddock": true, "proc": true, "sys": true, "dev": true}

// writeUpperTar writes the overlay upper dir as an OCI layer tarball.
func writeUpperTar(ctx context.Context, upper string, uidBase, idRange uint32, w io.Writer) error {
	tw := tar.NewWriter(w)
	links := map[[2]uint64]string{} // (dev, inode) → first name, for hard links
	shift := func(id uint32) int {
		if id >= uidBase && id-uidBase < idRange {
			return int(id - uidBase)
		}
		return 65534
	}
	err := filepath.WalkDir(upper, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(upper, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if top, _, _ := strings.Cut(rel, "/"); skipInUpper[top] {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		for _, x := range []string{"trusted.overlay.redirect", "trusted.overlay.metacopy"} {
			if _, err := unix.Lgetxattr(p, x, nil); err == nil {
				return fmt.Errorf("%w: %s carries %s; the overlay must be mounted with redirect_dir=off,metacopy=off", ErrInvalid, rel, x)
			}
		}
		hdr := &tar.Header{
			Name: rel, Mode: int64(st.Mode & 0o7777), Uid: shift(st.Uid), Gid: shift(st.Gid),
			ModTime: time.Unix(st.Mtim.Unix()), Format: tar.FormatPAX,
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFCHR:
			if st.Rdev != 0 {
				return nil // not a whiteout: devices are never committed
			}
			dir, base := filepath.Split(rel)
			return tw.WriteHeader(&tar.Header{Name: dir + ".wh." + base, Typeflag: tar.TypeReg,
				ModTime: hdr.ModTime, Format: tar.FormatPAX})
		case unix.S_IFDIR:
			hdr.Typeflag, hdr.Name = tar.TypeDir, rel+"/"
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			buf := make([]byte, 8)
			if n, err := unix.Lgetxattr(p, "trusted.overlay.opaque", buf); err == nil && string(buf[:n]) == "y" {
				return tw.WriteHeader(&tar.Header{Name: rel + "/.wh..wh..opq", Typeflag: tar.TypeReg,
					ModTime: hdr.ModTime, Format: tar.FormatPAX})
			}
			return nil
		case unix.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
			return tw.WriteHeader(hdr)
		case unix.S_IFIFO:
			hdr.Typeflag = tar.TypeFifo
			return tw.WriteHeader(hdr)
		case unix.S_IFREG:
		default:
			return nil // sockets and block devices are not committed
		}
		if st.Nlink > 1 {
			key := [2]uint64{uint64(st.Dev), st.Ino}
			if first, ok := links[key]; ok {
				hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
				return tw.WriteHeader(hdr)
			}
			links[key] = rel
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := io.CopyN(tw, f, st.Size); err != nil {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("%s shrank while committing (is the sandbox frozen?)", rel)
			}
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
