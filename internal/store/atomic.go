package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// TempPrefix starts the name of every temporary file WriteFileAtomic
// makes. Readers of a state directory skip names with this prefix (every
// reader already skips dot files), and CleanTemps removes the ones a crash
// left behind.
const TempPrefix = ".tmp-"

// WriteFileAtomic replaces path with data so that a reader, or the next
// start after a crash or power loss, finds either the old content or the
// new, never a mix: it writes a temporary file in path's directory with
// mode perm (set before any byte is written, whatever the umask), fsyncs
// it, renames it over path and fsyncs the directory. On error path is
// unchanged and the temporary file is removed; only a crash can leave one,
// for CleanTemps.
func WriteFileAtomic(path string, data []byte, perm fs.FileMode) error {
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := commitTemp(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeTemp writes data to a new fsynced temporary file next to path and
// returns its name: the first half of WriteFileAtomic, and the state a
// crash before the rename leaves.
func writeTemp(path string, data []byte, perm fs.FileMode) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), TempPrefix+filepath.Base(path)+"-*")
	if err != nil {
		return "", err
	}
	err = f.Chmod(perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// commitTemp renames tmp over path and makes the rename durable.
func commitTemp(tmp, path string) error {
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncDir fsyncs a directory, making the renames and creations in it
// durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// CleanTemps removes the temporary files of WriteFileAtomic (names
// starting with TempPrefix) that are in dir, not in its subdirectories,
// and were last modified more than olderThan ago. A directory only this
// daemon writes passes 0; one another process may be writing at the same
// moment (keys/, which `paddockd keys create` writes) passes a grace
// period. A missing dir is not an error.
func CleanTemps(dir string, olderThan time.Duration) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("clean temps: %w", err)
	}
	cutoff := time.Now().Add(-olderThan)
	var errs []error
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), TempPrefix) {
			continue
		}
		fi, err := e.Info()
		if err != nil || fi.ModTime().After(cutoff) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("clean temps: %w", err)
	}
	return nil
}

// PublishDir makes the finished directory tmp visible as final, which
// must not exist, in one rename. It first flushes tmp's filesystem
// (syncfs: one call instead of an fsync per file of a layer that may hold
// thousands), so a published directory is complete even after a power
// loss, and fsyncs final's parent after the rename. Owners build tmp next
// to final (same filesystem), write a "ready" marker into it last, and
// treat a tmp directory, or a final one without its marker, as debris to
// remove on their next start.
func PublishDir(tmp, final string) error {
	d, err := os.Open(tmp)
	if err != nil {
		return fmt.Errorf("publish %s: %w", final, err)
	}
	err = unix.Syncfs(int(d.Fd()))
	d.Close()
	if err != nil {
		return fmt.Errorf("publish %s: syncfs: %w", final, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("publish %s: %w", final, err)
	}
	if err := syncDir(filepath.Dir(final)); err != nil {
		return fmt.Errorf("publish %s: %w", final, err)
	}
	return nil
}
