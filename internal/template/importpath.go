package template

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// ErrImportPath is the one error ImportPath returns, whatever the path:
// outside the import directories, missing, unreadable, a symlink leading
// out. It is the same text for every path, so a tenant cannot use imports
// to learn what exists on the host.
var ErrImportPath = errors.New("not a file or directory inside the daemon's template import directories (config template_import_dirs)")

// ImportPath resolves p, a host path named by an API request, to its real
// path inside one of dirs (the operator's import directories). A path
// that is not lexically inside an import directory is refused before the
// file system is looked at, so existing and missing host files take the
// same way; a path inside whose symlinks lead out, or that does not
// exist, gets the same error. Errors wrap ErrInvalid and ErrImportPath.
func ImportPath(dirs []string, p string) (string, error) {
	refuse := func() (string, error) { return "", fmt.Errorf("%w: %w", ErrInvalid, ErrImportPath) }
	if !filepath.IsAbs(p) {
		return refuse()
	}
	p = filepath.Clean(p)
	var roots []string
	for _, d := range dirs {
		d = filepath.Clean(d)
		roots = append(roots, d)
		if rd, err := filepath.EvalSymlinks(d); err == nil && rd != d {
			roots = append(roots, rd)
		}
	}
	if !within(roots, p) {
		return refuse()
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil || !within(roots, real) {
		return refuse()
	}
	return real, nil
}

// within reports whether p is one of roots or below one, lexically.
func within(roots []string, p string) bool {
	for _, r := range roots {
		if rel, err := filepath.Rel(r, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return true
		}
	}
	return false
}
