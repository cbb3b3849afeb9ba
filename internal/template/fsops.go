package template

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// resolveFlags confine every lookup below a layer root: no "..", no
// absolute paths, no symlinks (not even ones that stay inside), no magic
// links and no mount crossings.
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS |
	unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// openat2 opens rel below dirfd with resolveFlags, retrying the EAGAIN
// the kernel returns when a concurrent rename races the lookup.
func openat2(dirfd int, rel string, flags uint64) (int, error) {
	how := &unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Resolve: resolveFlags}
	for i := 0; ; i++ {
		fd, err := unix.Openat2(dirfd, rel, how)
		if (err == unix.EAGAIN || err == unix.EINTR) && i < 32 {
			continue
		}
		return fd, err
	}
}

// tree is a layer root being filled. Every entry is created with *at
// system calls relative to a directory descriptor that was opened
// without following symlinks, so nothing is ever written outside it.
type tree struct {
	dir      string // the root's path, used only for removals below it
	fd       int    // the root, O_RDONLY|O_DIRECTORY
	cacheRel string // directory whose O_PATH fd is cacheFD
	cacheFD  int    // -1 when empty
	uid, gid int    // owner of directories created implicitly
	charge   func(int64) error
}

func openTree(dir string, uid, gid int, charge func(int64) error) (*tree, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return &tree{dir: dir, fd: fd, cacheFD: -1, uid: uid, gid: gid, charge: charge}, nil
}

func (t *tree) close() {
	if t.cacheFD >= 0 {
		unix.Close(t.cacheFD)
		t.cacheFD = -1
	}
	unix.Close(t.fd)
}

// unsafeErr turns the errors a confined lookup returns into ErrUnsafe.
func unsafeErr(rel string, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP):
		return fmt.Errorf("%w: %q goes through a symlink", ErrUnsafe, rel)
	case errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("%w: %q goes through a non-directory", ErrUnsafe, rel)
	case errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%w: %q leaves the layer", ErrUnsafe, rel)
	}
	return fmt.Errorf("%s: %w", rel, err)
}

// parent returns an fd for directory rel ("." for the root), creating
// missing directories (0755, owned by the shifted root). The fd belongs to
// the tree's one-entry cache: it stays valid until the next call.
func (t *tree) parent(rel string) (int, error) {
	if rel == "." {
		return t.fd, nil
	}
	if t.cacheFD >= 0 && t.cacheRel == rel {
		return t.cacheFD, nil
	}
	fd, err := openat2(t.fd, rel, unix.O_PATH|unix.O_DIRECTORY)
	if errors.Is(err, unix.ENOENT) {
		fd, err = t.mkdirAll(rel)
	}
	if err != nil {
		return -1, unsafeErr(rel, err)
	}
	if t.cacheFD >= 0 {
		unix.Close(t.cacheFD)
	}
	t.cacheRel, t.cacheFD = rel, fd
	return fd, nil
}

// mkdirAll walks rel one component at a time, creating what is missing.
func (t *tree) mkdirAll(rel string) (int, error) {
	cur, err := unix.Dup(t.fd)
	if err != nil {
		return -1, err
	}
	for _, c := range strings.Split(rel, "/") {
		next, err := openat2(cur, c, unix.O_PATH|unix.O_DIRECTORY)
		if errors.Is(err, unix.ENOENT) {
			if err = t.charge(blockSize); err == nil {
				err = unix.Mkdirat(cur, c, 0o755)
			}
			if err == nil {
				err = unix.Fchownat(cur, c, t.uid, t.gid, unix.AT_SYMLINK_NOFOLLOW)
			}
			if err == nil {
				next, err = openat2(cur, c, unix.O_PATH|unix.O_DIRECTORY)
			}
		}
		unix.Close(cur)
		if err != nil {
			return -1, err
		}
		cur = next
	}
	return cur, nil
}

// openDir opens existing directory rel without creating anything; the
// caller closes the fd.
func (t *tree) openDir(rel string, flags uint64) (int, error) {
	fd, err := openat2(t.fd, rel, flags|unix.O_DIRECTORY)
	if err != nil {
		return -1, unsafeErr(rel, err)
	}
	return fd, nil
}

// clear removes whatever exists at base in dfd (rel is its path from the
// root), unless both it and the new entry are directories; it reports
// whether an existing directory was kept. dfd itself is never removed,
// but a cached descriptor for rel or below it is dropped.
func (t *tree) clear(dfd int, rel, base string, newIsDir bool) (bool, error) {
	var st unix.Stat_t
	err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("%s: %w", rel, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return false, unix.Unlinkat(dfd, base, 0)
	}
	if newIsDir {
		return true, nil
	}
	if t.cacheFD >= 0 && (t.cacheRel == rel || strings.HasPrefix(t.cacheRel, rel+"/")) {
		unix.Close(t.cacheFD) // the cached directory is going away
		t.cacheFD = -1
	}
	if err := unix.Unlinkat(dfd, base, unix.AT_REMOVEDIR); err == nil {
		return false, nil
	}
	// A non-empty directory. Every ancestor of rel was just opened with
	// RESOLVE_NO_SYMLINKS and only this unpacker writes the tree, so the
	// path names exactly that directory; RemoveAll never follows symlinks
	// inside it.
	return false, os.RemoveAll(filepath.Join(t.dir, filepath.FromSlash(rel)))
}

// whiteout replaces base in dfd with an overlayfs whiteout: a character
// device 0/0. It is the only device node the unpacker creates.
func (t *tree) whiteout(dfd int, rel, base string) error {
	if _, err := t.clear(dfd, rel, base, false); err != nil {
		return err
	}
	if err := unix.Mknodat(dfd, base, unix.S_IFCHR|0o000, 0); err != nil {
		return fmt.Errorf("whiteout %s: %w", rel, err)
	}
	return nil
}

// opaque marks directory rel (created if missing) opaque for overlayfs;
// an existing non-directory there is refused.
func (t *tree) opaque(rel string) error {
	fd := t.fd
	if rel != "." {
		pfd, err := t.parent(path.Dir(rel))
		if err != nil {
			return err
		}
		base := path.Base(rel)
		if err := unix.Mkdirat(pfd, base, 0o755); err == nil {
			unix.Fchownat(pfd, base, t.uid, t.gid, unix.AT_SYMLINK_NOFOLLOW)
		} else if !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if fd, err = openat2(pfd, base, unix.O_RDONLY|unix.O_DIRECTORY); err != nil {
			return unsafeErr(rel, err)
		}
		defer unix.Close(fd)
	}
	if err := unix.Fsetxattr(fd, "trusted.overlay.opaque", []byte("y"), 0); err != nil {
		return fmt.Errorf("opaque %s: %w", rel, err)
	}
	return nil
}

// blockSize is the unit file sizes are rounded up to when charged.
const blockSize = 4096

func blocks(n int64) int64 { return (n + blockSize - 1) / blockSize * blockSize }
