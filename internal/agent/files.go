package agent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"github.com/paddock-sandbox/paddock/api"
	"golang.org/x/sys/unix"
)

const (
	defaultListDepth = 1
	maxListDepth     = api.MaxListDepth
	maxListEntries   = 10000
)

// resolvePath checks p and makes it absolute: relative paths are relative
// to the workdir. Symlinks are left to the kernel; inside the sandbox they
// can only reach the sandbox.
func (s *Server) resolvePath(p string) (string, error) {
	switch {
	case p == "":
		return "", badRequest("path is required")
	case len(p) > maxPathLen:
		return "", badRequest("path longer than %d bytes", maxPathLen)
	case hasNUL(p):
		return "", badRequest("path contains a NUL byte")
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.cfg.Workdir, p)
	}
	return filepath.Clean(p), nil
}

func (s *Server) pathParam(r *http.Request) (string, error) {
	return s.resolvePath(r.URL.Query().Get("path"))
}

// modeParam parses an optional octal permission query parameter.
func modeParam(r *http.Request, def os.FileMode) (os.FileMode, error) {
	q := r.URL.Query().Get("mode")
	if q == "" {
		return def, nil
	}
	m, err := strconv.ParseUint(q, 8, 32)
	if err != nil || m > 0o7777 {
		return 0, badRequest("mode must be octal permission bits such as 0644")
	}
	return unixToFileMode(uint32(m)), nil
}

// unixToFileMode converts permission bits, setuid, setgid and sticky.
func unixToFileMode(m uint32) os.FileMode {
	mode := os.FileMode(m & 0o777)
	if m&unix.S_ISUID != 0 {
		mode |= os.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		mode |= os.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= os.ModeSticky
	}
	return mode
}

// fileEntry describes the file at p whose (l)stat is fi.
func fileEntry(p string, fi fs.FileInfo) api.FileEntry {
	perm := uint32(fi.Mode().Perm())
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		perm = st.Mode & 0o7777
	}
	e := api.FileEntry{
		Path:       p,
		Name:       filepath.Base(p),
		Type:       api.FileTypeOther,
		Size:       fi.Size(),
		Mode:       fmt.Sprintf("%04o", perm),
		ModifiedAt: fi.ModTime().UTC(),
	}
	switch {
	case fi.Mode().IsRegular():
		e.Type = api.FileTypeFile
	case fi.IsDir():
		e.Type = api.FileTypeDir
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type = api.FileTypeSymlink
		e.LinkTarget, _ = os.Readlink(p)
	}
	return e
}

// handlePutFile writes the raw body to a file, atomically by rename:
// PUT /files?path=P&mode=0644.
func (s *Server) handlePutFile(w http.ResponseWriter, r *http.Request) error {
	p, err := s.pathParam(r)
	if err != nil {
		return err
	}
	mode, err := modeParam(r, 0o644)
	if err != nil {
		return err
	}
	if r.ContentLength > s.cfg.MaxFileBytes {
		return tooLarge("file larger than %d bytes", s.cfg.MaxFileBytes)
	}
	if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
		return conflict("%s is a directory", p)
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".paddock-upload-*")
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, http.MaxBytesReader(w, r.Body, s.cfg.MaxFileBytes)); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge("file larger than %d bytes", s.cfg.MaxFileBytes)
		}
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return err
	}
	ok = true
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, fileEntry(p, fi))
	return nil
}

// handleGetFile answers with a regular file's bytes: GET /files?path=P.
func (s *Server) handleGetFile(w http.ResponseWriter, r *http.Request) error {
	p, err := s.pathParam(r)
	if err != nil {
		return err
	}
	// O_NONBLOCK: opening a FIFO must not hang; only regular files are read.
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return badRequest("%s is a directory", p)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return badRequest("%s is not a regular file", p)
	case st.Size > s.cfg.MaxFileBytes:
		return tooLarge("%s is larger than %d bytes", p, s.cfg.MaxFileBytes)
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(st.Size, 10))
	w.WriteHeader(http.StatusOK)
	if _, err := io.CopyN(w, f, st.Size); err != nil {
		return fmt.Errorf("read %s: %w", p, err)
	}
	return nil
}

// handleDeleteFile removes a file or directory:
// DELETE /files?path=P&recursive=true.
func (s *Server) handleDeleteFile(w http.ResponseWriter, r *http.Request) error {
	p, err := s.pathParam(r)
	if err != nil {
		return err
	}
	recursive, err := boolParam(r, "recursive")
	if err != nil {
		return err
	}
	if p == "/" {
		return badRequest("refusing to delete /")
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() && recursive {
		err = os.RemoveAll(p)
	} else {
		err = os.Remove(p)
	}
	if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
		return conflict("directory %s is not empty (use recursive=true)", p)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// handleListFiles lists a directory tree without following symlinks:
// GET /files/list?path=P&depth=N.
func (s *Server) handleListFiles(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query().Get("path")
	if q == "" {
		q = s.cfg.Workdir // listing defaults to the working directory
	}
	p, err := s.resolvePath(q)
	if err != nil {
		return err
	}
	depth := defaultListDepth
	if q := r.URL.Query().Get("depth"); q != "" {
		depth, err = strconv.Atoi(q)
		if err != nil || depth < 1 || depth > maxListDepth {
			return badRequest("depth must be between 1 and %d", maxListDepth)
		}
	}
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return badRequest("%s is not a directory", p)
	}
	resp := api.ListFilesResponse{Entries: []api.FileEntry{}}
	if err := listDir(&resp, p, depth); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// listDir appends the entries of dir, sorted by name, each directory
// followed by its own entries down to depth levels.
func listDir(resp *api.ListFilesResponse, dir string, depth int) error {
	room := maxListEntries - len(resp.Entries)
	if room <= 0 {
		resp.Truncated = true
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(room + 1)
	d.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if len(names) > room {
		resp.Truncated = true
		names = names[:room]
	}
	slices.Sort(names)
	for _, name := range names {
		if len(resp.Entries) >= maxListEntries {
			resp.Truncated = true
			return nil
		}
		p := filepath.Join(dir, name)
		fi, err := os.Lstat(p)
		if err != nil {
			continue // gone meanwhile
		}
		resp.Entries = append(resp.Entries, fileEntry(p, fi))
		if fi.IsDir() && depth > 1 {
			_ = listDir(resp, p, depth-1) // unreadable subdirectories are listed, not entered
		}
	}
	return nil
}

// handleStatFile describes one file, following symlinks; a dangling or
// looping symlink is described as the link: GET /files/stat?path=P.
func (s *Server) handleStatFile(w http.ResponseWriter, r *http.Request) error {
	p, err := s.pathParam(r)
	if err != nil {
		return err
	}
	fi, err := os.Stat(p)
	if err != nil {
		li, lerr := os.Lstat(p)
		if lerr != nil || li.Mode()&fs.ModeSymlink == 0 {
			return err
		}
		fi = li
	}
	writeJSON(w, http.StatusOK, fileEntry(p, fi))
	return nil
}

// handleMkdir creates a directory and its parents:
// POST /files/mkdir?path=P&mode=0755.
func (s *Server) handleMkdir(w http.ResponseWriter, r *http.Request) error {
	p, err := s.pathParam(r)
	if err != nil {
		return err
	}
	mode, err := modeParam(r, 0o755)
	if err != nil {
		return err
	}
	fi, err := os.Stat(p)
	switch {
	case err == nil && !fi.IsDir():
		return conflict("%s exists and is not a directory", p)
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.Mkdir(p, mode); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if err := os.Chmod(p, mode); err != nil { // the umask applied to Mkdir
			return err
		}
	case err != nil:
		return err
	}
	if fi, err = os.Stat(p); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, fileEntry(p, fi))
	return nil
}
