package template

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Source says where an image comes from. Exactly one of Registry,
// Layout, Tarball and Dir is set.
type Source struct {
	// Registry is an image reference such as "docker.io/library/alpine:3.20"
	// or "127.0.0.1:5000/app@sha256:...".
	Registry string `json:"registry,omitempty"`
	// Layout is an OCI image layout directory.
	Layout string `json:"layout,omitempty"`
	// Tarball is a `docker save` tarball.
	Tarball string `json:"tarball,omitempty"`
	// Dir is a plain root directory.
	Dir string `json:"dir,omitempty"`
	// Tag picks one image in a Layout (its org.opencontainers.image.ref.name
	// annotation, whole or after the last ':') or a Tarball (a RepoTags
	// entry); it may be empty when the file holds a single image.
	Tag string `json:"tag,omitempty"`
	// Copy copies a Dir into the store (through the safe unpacker) instead
	// of using it in place.
	Copy bool `json:"copy,omitempty"`
}

// String describes the source for logs and errors.
func (src Source) String() string {
	switch {
	case src.Registry != "":
		return "registry " + src.Registry
	case src.Layout != "":
		return "layout " + src.Layout + tagSuffix(src.Tag)
	case src.Tarball != "":
		return "tarball " + src.Tarball + tagSuffix(src.Tag)
	default:
		return "dir " + src.Dir
	}
}

func tagSuffix(tag string) string {
	if tag == "" {
		return ""
	}
	return " (" + tag + ")"
}

// validate checks that exactly one location is set and paths are absolute.
func (src Source) validate() error {
	n := 0
	for _, s := range []string{src.Registry, src.Layout, src.Tarball, src.Dir} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("%w: source needs exactly one of registry, layout, tarball, dir", ErrInvalid)
	}
	for _, p := range []string{src.Layout, src.Tarball, src.Dir} {
		if p != "" && !filepath.IsAbs(p) {
			return fmt.Errorf("%w: source path %q is not absolute", ErrInvalid, p)
		}
	}
	if src.Dir != "" && !src.Copy && strings.ContainsAny(src.Dir, ":,") {
		return fmt.Errorf("%w: dir %q has ':' or ',' and cannot be an overlay lower dir", ErrInvalid, src.Dir)
	}
	return nil
}

// resolve opens the image a Registry, Layout or Tarball source names.
func (s *Store) resolve(ctx context.Context, src Source) (v1.Image, error) {
	plat, err := v1.ParsePlatform(s.cfg.Platform)
	if err != nil {
		return nil, fmt.Errorf("%w: platform: %w", ErrInvalid, err)
	}
	switch {
	case src.Registry != "":
		ref, err := parseRef(src.Registry)
		if err != nil {
			return nil, err
		}
		inner := s.cfg.Transport
		if inner == nil {
			inner = s.cfg.Registries.transport()
		}
		return remote.Image(ref, remote.WithContext(ctx), remote.WithAuthFromKeychain(s.cfg.Keychain),
			remote.WithTransport(loopbackHTTPOnly{inner}), remote.WithPlatform(*plat))
	case src.Tarball != "":
		var tag *name.Tag
		if src.Tag != "" {
			t, err := name.NewTag(src.Tag)
			if err != nil {
				return nil, fmt.Errorf("%w: tag: %w", ErrInvalid, err)
			}
			tag = &t
		}
		return tarball.ImageFromPath(src.Tarball, tag)
	default:
		idx, err := layout.ImageIndexFromPath(src.Layout)
		if err != nil {
			return nil, err
		}
		return pickImage(idx, src.Tag, *plat)
	}
}

// parseRef parses a registry reference, marking it insecure (plain HTTP
// allowed) only when the registry host is loopback.
func parseRef(s string) (name.Reference, error) {
	ref, err := name.ParseReference(s)
	if err != nil {
		return nil, fmt.Errorf("%w: reference: %w", ErrInvalid, err)
	}
	host := ref.Context().RegistryStr()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if isLoopback(strings.Trim(host, "[]")) {
		return name.ParseReference(s, name.Insecure)
	}
	return ref, nil
}

// isLoopback reports whether host is "localhost" or a loopback IP. Names
// are not resolved: only the literal forms count.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackHTTPOnly refuses plain-HTTP requests to non-loopback hosts
// (go-containerregistry otherwise falls back to HTTP for private-range and
// *.localhost registries, and redirects could lead anywhere).
type loopbackHTTPOnly struct{ inner http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (t loopbackHTTPOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" && !isLoopback(req.URL.Hostname()) {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("%w: %s://%s", ErrInsecure, req.URL.Scheme, req.URL.Host)
	}
	return t.inner.RoundTrip(req)
}

// pickImage chooses one image from a layout's index: by ref.name
// annotation when tag is set, else the only entry; nested indexes are
// resolved by platform.
func pickImage(idx v1.ImageIndex, tag string, plat v1.Platform) (v1.Image, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var cands []v1.Descriptor
	for _, d := range im.Manifests {
		ref := d.Annotations["org.opencontainers.image.ref.name"]
		if tag == "" || ref == tag || ref[strings.LastIndex(ref, ":")+1:] == tag {
			cands = append(cands, d)
		}
	}
	if len(cands) > 1 {
		var same []v1.Descriptor
		for _, d := range cands {
			if d.Platform != nil && d.Platform.Satisfies(plat) {
				same = append(same, d)
			}
		}
		cands = same
	}
	if len(cands) != 1 {
		return nil, fmt.Errorf("%w: layout has %d images matching tag %q and platform %s; set a tag", ErrInvalid, len(cands), tag, plat)
	}
	d := cands[0]
	if d.MediaType.IsIndex() {
		child, err := idx.ImageIndex(d.Digest)
		if err != nil {
			return nil, err
		}
		return pickImage(child, "", plat)
	}
	if !d.MediaType.IsImage() {
		return nil, fmt.Errorf("%w: layout entry %s is a %s, not an image", ErrInvalid, d.Digest, d.MediaType)
	}
	return idx.Image(d.Digest)
}

// checkDir checks that a Dir source is an existing directory.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%w: dir: %w", ErrInvalid, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", ErrInvalid, dir)
	}
	return nil
}

// tarDir streams dir as a tar archive (symlinks as symlinks, sockets
// skipped) so a copied Dir goes through the same unpacker as a layer.
// Closing the reader stops the walk.
func tarDir(ctx context.Context, dir string) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeDirTar(ctx, dir, pw)) }()
	return pr
}

func writeDirTar(ctx context.Context, dir string, w io.Writer) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode()&fs.ModeSocket != 0 {
			return nil
		}
		var link string
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		hdr.Name, hdr.Uname, hdr.Gname = filepath.ToSlash(rel), "", ""
		if info.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := io.CopyN(tw, f, hdr.Size); err != nil {
			return fmt.Errorf("%s changed while copying: %w", p, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
