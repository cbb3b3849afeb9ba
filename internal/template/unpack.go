package template

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// unpackOpts configures one layer unpack.
type unpackOpts struct {
	lim              Limits
	uidBase, gidBase uint32
	idRange          uint32
	// charge is called before bytes are written (file content rounded up
	// to blocks, a block per new directory); an error stops the unpack.
	charge func(int64) error
	warn   func(string)
}

// unpacker applies one layer's tar stream to an empty directory.
type unpacker struct {
	unpackOpts
	t       *tree
	entries int
	content int64
	dirs    []dirTime
}

type dirTime struct {
	rel string
	ts  []unix.Timespec
}

// unpack extracts the tar stream r into the empty directory dst following
// the package's safety rules. It returns the number of entries.
func unpack(ctx context.Context, r io.Reader, dst string, o unpackOpts) (int, error) {
	t, err := openTree(dst, int(o.uidBase), int(o.gidBase), o.charge)
	if err != nil {
		return 0, err
	}
	defer t.close()
	u := &unpacker{unpackOpts: o, t: t}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return u.entries, fmt.Errorf("read layer: %w", err)
		}
		if u.entries++; u.entries > o.lim.Entries {
			return u.entries, fmt.Errorf("%w: more than %d entries", ErrLimit, o.lim.Entries)
		}
		if u.entries%1024 == 0 && ctx.Err() != nil {
			return u.entries, ctx.Err()
		}
		if err := u.entry(hdr, tr); err != nil {
			return u.entries, err
		}
	}
	u.setDirTimes()
	return u.entries, nil
}

// clean validates a tar name and returns it relative to the root ("."
// for the root itself).
func (u *unpacker) clean(name string) (string, error) {
	if len(name) > u.lim.PathLen {
		return "", fmt.Errorf("%w: path of %d bytes (limit %d)", ErrLimit, len(name), u.lim.PathLen)
	}
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("%w: absolute path %q", ErrUnsafe, name)
	}
	p := path.Clean(name)
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", fmt.Errorf("%w: path %q leaves the layer", ErrUnsafe, name)
	}
	return p, nil
}

func (u *unpacker) mapID(id int, base uint32) int {
	if id < 0 || id >= int(u.idRange) {
		id = 65534
	}
	return int(base) + id
}

// entry applies one tar header (and its content, read from r).
func (u *unpacker) entry(hdr *tar.Header, r io.Reader) error {
	rel, err := u.clean(hdr.Name)
	if err != nil {
		return err
	}
	dir, base := path.Dir(rel), path.Base(rel)
	switch {
	case base == ".wh..wh..opq":
		return u.t.opaque(dir)
	case strings.HasPrefix(base, ".wh..wh."):
		return nil // other AUFS metadata
	case strings.HasPrefix(base, ".wh."):
		target := base[len(".wh."):]
		if target == "" || target == "." || target == ".." {
			return fmt.Errorf("%w: bad whiteout %q", ErrUnsafe, hdr.Name)
		}
		dfd, err := u.t.parent(dir)
		if err != nil {
			return err
		}
		return u.t.whiteout(dfd, path.Join(dir, target), target)
	}
	if rel == "." {
		if hdr.Typeflag != tar.TypeDir {
			return fmt.Errorf("%w: the layer root is not a directory", ErrUnsafe)
		}
		return u.meta(u.t.fd, hdr, ".")
	}
	switch hdr.Typeflag {
	case tar.TypeChar, tar.TypeBlock:
		u.warn(fmt.Sprintf("skipped device node %s (%d:%d)", rel, hdr.Devmajor, hdr.Devminor))
		return nil
	case tar.TypeXGlobalHeader:
		return nil
	case tar.TypeReg, tar.TypeGNUSparse, tar.TypeDir, tar.TypeSymlink, tar.TypeLink, tar.TypeFifo:
	default:
		u.warn(fmt.Sprintf("skipped %s of unknown type %q", rel, hdr.Typeflag))
		return nil
	}
	dfd, err := u.t.parent(dir)
	if err != nil {
		return err
	}
	kept, err := u.t.clear(dfd, rel, base, hdr.Typeflag == tar.TypeDir)
	if err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if !kept {
			if err := u.charge(blockSize); err != nil {
				return err
			}
			if err := unix.Mkdirat(dfd, base, 0o700); err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
		}
		fd, err := openat2(dfd, base, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return unsafeErr(rel, err)
		}
		defer unix.Close(fd)
		return u.meta(fd, hdr, rel)
	case tar.TypeSymlink:
		if len(hdr.Linkname) > u.lim.PathLen {
			return fmt.Errorf("%w: symlink target of %d bytes", ErrLimit, len(hdr.Linkname))
		}
		if err := unix.Symlinkat(hdr.Linkname, dfd, base); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
	case tar.TypeLink:
		if err := u.link(dfd, rel, base, hdr.Linkname); err != nil {
			return err
		}
		return nil // a hard link shares its target's metadata
	case tar.TypeFifo:
		if err := unix.Mknodat(dfd, base, unix.S_IFIFO|0o600, 0); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if err := unix.Fchmodat(dfd, base, mode(hdr), 0); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
	default:
		return u.file(dfd, rel, base, hdr, r)
	}
	if err := unix.Fchownat(dfd, base, u.mapID(hdr.Uid, u.uidBase), u.mapID(hdr.Gid, u.gidBase), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	unix.UtimesNanoAt(dfd, base, times(hdr), unix.AT_SYMLINK_NOFOLLOW)
	return nil
}

// file writes a regular (possibly sparse) file, checking its size first.
func (u *unpacker) file(dfd int, rel, base string, hdr *tar.Header, r io.Reader) error {
	switch {
	case hdr.Size < 0:
		return fmt.Errorf("%w: %s has a negative size", ErrUnsafe, rel)
	case hdr.Size > u.lim.FileBytes:
		return fmt.Errorf("%w: %s is %d bytes (file limit %d)", ErrLimit, rel, hdr.Size, u.lim.FileBytes)
	case u.content+hdr.Size > u.lim.LayerBytes:
		return fmt.Errorf("%w: layer content over %d bytes at %s", ErrLimit, u.lim.LayerBytes, rel)
	}
	u.content += hdr.Size
	fd, err := unix.Openat(dfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	if err := copySparse(f, io.LimitReader(r, hdr.Size), hdr.Size, u.charge); err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	if err := f.Chown(u.mapID(hdr.Uid, u.uidBase), u.mapID(hdr.Gid, u.gidBase)); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, mode(hdr)); err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	unix.UtimesNanoAt(dfd, base, times(hdr), unix.AT_SYMLINK_NOFOLLOW)
	return f.Close()
}

// link makes rel a hard link to target, which must already exist in this
// layer; target's parents are resolved without following symlinks.
func (u *unpacker) link(dfd int, rel, base, target string) error {
	trel, err := u.clean(target)
	if err != nil {
		return err
	}
	if trel == "." || trel == rel {
		return fmt.Errorf("%w: hard link %s to %q", ErrUnsafe, rel, target)
	}
	tfd, err := u.t.openDir(path.Dir(trel), unix.O_PATH)
	if err == nil {
		defer unix.Close(tfd)
		err = unix.Linkat(tfd, path.Base(trel), dfd, base, 0)
	}
	switch {
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%w: hard link %s to %q, which is not in this layer", ErrUnsafe, rel, target)
	case errors.Is(err, unix.EPERM):
		return fmt.Errorf("%w: hard link %s to directory %q", ErrUnsafe, rel, target)
	case err != nil:
		return fmt.Errorf("hard link %s: %w", rel, err)
	}
	return nil
}

// meta sets a directory's owner and mode; its times are set at the end,
// after its children stop changing them.
func (u *unpacker) meta(fd int, hdr *tar.Header, rel string) error {
	if err := unix.Fchown(fd, u.mapID(hdr.Uid, u.uidBase), u.mapID(hdr.Gid, u.gidBase)); err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	if err := unix.Fchmod(fd, mode(hdr)); err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	u.dirs = append(u.dirs, dirTime{rel, times(hdr)})
	return nil
}

func (u *unpacker) setDirTimes() {
	for i := len(u.dirs) - 1; i >= 0; i-- {
		d := u.dirs[i]
		fd, err := u.t.openDir(path.Dir(d.rel), unix.O_PATH)
		if err != nil {
			continue
		}
		unix.UtimesNanoAt(fd, path.Base(d.rel), d.ts, unix.AT_SYMLINK_NOFOLLOW)
		unix.Close(fd)
	}
}

// mode returns the permission bits to apply: setuid and setgid stripped.
func mode(hdr *tar.Header) uint32 {
	return uint32(hdr.Mode) & 0o7777 &^ (unix.S_ISUID | unix.S_ISGID)
}

func times(hdr *tar.Header) []unix.Timespec {
	m, a := hdr.ModTime, hdr.AccessTime
	if a.IsZero() {
		a = m
	}
	return []unix.Timespec{ts(a), ts(m)}
}

func ts(t time.Time) unix.Timespec {
	if t.IsZero() {
		return unix.Timespec{}
	}
	return unix.Timespec{Sec: t.Unix(), Nsec: int64(t.Nanosecond())}
}
