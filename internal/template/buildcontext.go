// Build contexts: the files a Dockerfile build may COPY, from a map or a tar.

package template

import (
	"archive/tar"
	"fmt"
	"io"
	"path"
	"strings"
)

// ContextFile is one regular file of a build context.
type ContextFile struct {
	Data []byte
	// Mode holds the permission bits (0644 when unknown).
	Mode uint32
}

// BuildContext is the files COPY and ADD read, by clean slash-separated
// relative path.
type BuildContext map[string]ContextFile

// ContextFromMap makes a build context from path → contents, as the JSON
// form of a build request carries it (every file 0644).
func ContextFromMap(m map[string][]byte) (BuildContext, error) {
	bc := BuildContext{}
	for p, data := range m {
		rel, err := contextPath(p)
		if err != nil {
			return nil, err
		}
		bc[rel] = ContextFile{Data: data, Mode: 0o644}
	}
	return bc, nil
}

// ReadContextTar reads a build context from a tar stream: regular files
// (symlinks, devices and the like are skipped), at most maxBytes of
// content and maxFiles files.
func ReadContextTar(r io.Reader, maxBytes int64, maxFiles int) (BuildContext, error) {
	bc := BuildContext{}
	tr := tar.NewReader(r)
	var total int64
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return bc, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: build context: %v", ErrInvalid, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		rel, err := contextPath(hdr.Name)
		if err != nil {
			return nil, err
		}
		if total += hdr.Size; total > maxBytes || hdr.Size < 0 {
			return nil, fmt.Errorf("%w: build context over %d bytes", ErrLimit, maxBytes)
		}
		if len(bc) >= maxFiles {
			return nil, fmt.Errorf("%w: build context over %d files", ErrLimit, maxFiles)
		}
		data, err := io.ReadAll(io.LimitReader(tr, hdr.Size))
		if err != nil {
			return nil, fmt.Errorf("%w: build context: %v", ErrInvalid, err)
		}
		bc[rel] = ContextFile{Data: data, Mode: uint32(hdr.Mode) & 0o777}
	}
}

// contextPath cleans a context path and refuses ones that climb out.
func contextPath(p string) (string, error) {
	rel := path.Clean("/" + strings.TrimPrefix(p, "./"))[1:]
	if rel == "" || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("%w: bad build context path %q", ErrInvalid, p)
	}
	if strings.HasPrefix(path.Clean(p), "../") || path.Clean(p) == ".." {
		return "", fmt.Errorf("%w: build context path %q leaves the context", ErrInvalid, p)
	}
	return rel, nil
}
