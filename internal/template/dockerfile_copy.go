// Dockerfile COPY and ADD: context matching and archive unpacking.

package template

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// copyInstr turns COPY/ADD into one copy step: a single file, or an
// archive of several files unpacked into a directory.
func (p *dfParser) copyInstr(kw, rest string) error {
	words, ok := jsonForm(rest)
	if !ok {
		var err error
		if words, err = shellWords(rest); err != nil {
			return err
		}
	}
	var chmod string
	for len(words) > 0 && strings.HasPrefix(words[0], "--") {
		flag, val, _ := strings.Cut(words[0], "=")
		switch flag {
		case "--chmod":
			if _, err := ParseMode(val); err != nil {
				return err
			}
			chmod = val
		case "--chown":
			p.df.Warnings = append(p.df.Warnings, kw+" --chown is ignored: copied files are owned by root")
		case "--link":
		case "--from":
			return errors.New("COPY --from (multi-stage) is not supported")
		default:
			return fmt.Errorf("%s flag %s is not supported", kw, flag)
		}
		words = words[1:]
	}
	if len(words) < 2 {
		return fmt.Errorf("%s needs a source and a destination", kw)
	}
	for i := range words {
		w, err := p.expandRaw(words[i])
		if err != nil {
			return err
		}
		words[i] = w
	}
	srcs, dst := words[:len(words)-1], words[len(words)-1]
	dirDst := strings.HasSuffix(dst, "/") || dst == "." || dst == ".."
	dst = ResolveDir(p.wd, dst)
	type item struct {
		rel string // path below dst
		f   ContextFile
	}
	var items []item
	single := len(srcs) == 1
	for _, src := range srcs {
		if strings.Contains(src, "://") {
			return fmt.Errorf("%s from a URL is not supported", kw)
		}
		clean := path.Clean("/" + src)[1:]
		if strings.HasPrefix(path.Clean(src), "../") {
			return fmt.Errorf("source %q leaves the build context", src)
		}
		if f, ok := p.bc[clean]; ok && clean != "" {
			if kw == "ADD" && isArchive(clean) {
				tarball, err := archiveTar(clean, f.Data)
				if err != nil {
					return err
				}
				p.step(api.RecipeStep{Copy: &api.CopyStep{TarBase64: tarball, Dst: dst}})
				single = false
				continue
			}
			items = append(items, item{path.Base(clean), f})
			continue
		}
		var matched bool
		for _, name := range slices.Sorted(mapKeys(p.bc)) {
			rel, ok := under(clean, name)
			if !ok && strings.ContainsAny(clean, "*?[") {
				if m, _ := path.Match(clean, name); m {
					rel, ok = path.Base(name), true
				} else if d := matchDir(clean, name); d != "" {
					rel, ok = strings.TrimPrefix(name, d+"/"), true
					rel = path.Join(path.Base(d), rel)
				}
			}
			if ok {
				items = append(items, item{rel, p.bc[name]})
				matched = true
			}
		}
		if !matched {
			return fmt.Errorf("%s source %q is not in the build context", kw, src)
		}
		single = false
	}
	if len(items) == 0 {
		return nil // only archives
	}
	if single && len(items) == 1 {
		target := dst
		if dirDst {
			target = path.Join(dst, items[0].rel)
		}
		mode := chmod
		if mode == "" {
			mode = fmt.Sprintf("%04o", items[0].f.Mode&0o7777)
		}
		p.step(api.RecipeStep{Copy: &api.CopyStep{SrcBase64: items[0].f.Data, Dst: target, Mode: mode}})
		return nil
	}
	if len(srcs) > 1 && !dirDst {
		return fmt.Errorf("%s with several sources needs a destination directory ending in /", kw)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	var cm uint32
	if chmod != "" {
		cm, _ = ParseMode(chmod)
	}
	for _, it := range items {
		mode := it.f.Mode & 0o7777
		if chmod != "" {
			mode = cm
		}
		hdr := &tar.Header{Name: it.rel, Typeflag: tar.TypeReg, Mode: int64(mode), Size: int64(len(it.f.Data)),
			ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		tw.Write(it.f.Data)
	}
	tw.Close()
	p.step(api.RecipeStep{Copy: &api.CopyStep{TarBase64: buf.Bytes(), Dst: dst}})
	return nil
}

func mapKeys(bc BuildContext) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range bc {
			if !yield(k) {
				return
			}
		}
	}
}

// under reports whether name is inside directory dir ("" is the whole
// context) and returns its path below dir.
func under(dir, name string) (string, bool) {
	if dir == "" {
		return name, true
	}
	rel, ok := strings.CutPrefix(name, dir+"/")
	return rel, ok && rel != ""
}

// matchDir returns the directory prefix of name that pattern matches, or "".
func matchDir(pattern, name string) string {
	parts := strings.Split(name, "/")
	for i := 1; i < len(parts); i++ {
		d := strings.Join(parts[:i], "/")
		if m, _ := path.Match(pattern, d); m {
			return d
		}
	}
	return ""
}

func isArchive(name string) bool {
	for _, ext := range []string{".tar", ".tar.gz", ".tgz"} {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}

// archiveTar returns the uncompressed tar of an ADD archive.
func archiveTar(name string, data []byte) ([]byte, error) {
	if strings.HasSuffix(name, ".tar") {
		return data, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("ADD %s: %v", name, err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, 1<<30))
	if err != nil {
		return nil, fmt.Errorf("ADD %s: %v", name, err)
	}
	return out, nil
}
