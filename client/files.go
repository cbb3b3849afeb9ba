package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"

	"github.com/paddock-sandbox/paddock/api"
)

// Files gives access to a sandbox's file system. Paths are absolute or
// relative to /workspace inside the sandbox; file operations run inside the
// sandbox's own mount namespace. Obtain one with Sandbox.Files.
type Files struct {
	sb *Sandbox
}

// fileQuery returns the query of a file operation on path.
func fileQuery(path string) url.Values {
	return url.Values{"path": {path}}
}

// modeString formats the permission bits of mode in octal ("0644"), or
// returns "" for 0 so that the daemon applies its default.
func modeString(mode os.FileMode) string {
	perm := mode.Perm()
	if perm == 0 {
		return ""
	}
	return fmt.Sprintf("%04o", uint32(perm))
}

// Write creates or replaces the file at path with data, creating missing
// parent directories. A zero mode means the daemon's default (0644).
func (f *Files) Write(ctx context.Context, path string, data []byte, mode os.FileMode) (*api.FileEntry, error) {
	return f.WriteFrom(ctx, path, bytes.NewReader(data), mode)
}

// WriteFrom is Write with the content read from r, streamed to the daemon.
func (f *Files) WriteFrom(ctx context.Context, path string, r io.Reader, mode os.FileMode) (*api.FileEntry, error) {
	q := fileQuery(path)
	if m := modeString(mode); m != "" {
		q.Set("mode", m)
	}
	resp, err := f.sb.c.send(ctx, request{
		method:      http.MethodPut,
		path:        sandboxPath(f.sb.ID, "files"),
		query:       q,
		body:        r,
		contentType: "application/octet-stream",
	})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var fe api.FileEntry
	if err := json.NewDecoder(resp.Body).Decode(&fe); err != nil {
		return nil, fmt.Errorf("decode file entry: %w", err)
	}
	return &fe, nil
}

// Read returns the content of the file at path.
func (f *Files) Read(ctx context.Context, path string) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := f.ReadTo(ctx, path, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ReadTo copies the content of the file at path to w and returns the
// number of bytes copied.
func (f *Files) ReadTo(ctx context.Context, path string, w io.Writer) (int64, error) {
	resp, err := f.sb.c.send(ctx, request{
		method: http.MethodGet,
		path:   sandboxPath(f.sb.ID, "files"),
		query:  fileQuery(path),
		accept: "application/octet-stream",
	})
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("read %s: %w", path, err)
	}
	return n, nil
}

// List lists the directory at path ("" means /workspace), descending depth
// levels (0 means the daemon's default, one level). Symlinks are listed,
// not followed. The daemon caps the number of entries.
func (f *Files) List(ctx context.Context, path string, depth int) ([]api.FileEntry, error) {
	q := url.Values{}
	if path != "" {
		q.Set("path", path)
	}
	if depth > 0 {
		q.Set("depth", strconv.Itoa(depth))
	}
	var resp api.ListFilesResponse
	if err := f.sb.c.call(ctx, http.MethodGet, sandboxPath(f.sb.ID, "files", "list"), q, nil, &resp); err != nil {
		return nil, err
	}
	return resp.Entries, nil
}

// Stat describes the file at path.
func (f *Files) Stat(ctx context.Context, path string) (*api.FileEntry, error) {
	var fe api.FileEntry
	if err := f.sb.c.call(ctx, http.MethodGet, sandboxPath(f.sb.ID, "files", "stat"), fileQuery(path), nil, &fe); err != nil {
		return nil, err
	}
	return &fe, nil
}

// Remove deletes the file or empty directory at path; recursive also
// deletes a directory's contents.
func (f *Files) Remove(ctx context.Context, path string, recursive bool) error {
	q := fileQuery(path)
	if recursive {
		q.Set("recursive", "true")
	}
	return f.sb.c.call(ctx, http.MethodDelete, sandboxPath(f.sb.ID, "files"), q, nil, nil)
}

// MakeDir creates the directory at path and any missing parents.
func (f *Files) MakeDir(ctx context.Context, path string) (*api.FileEntry, error) {
	var fe api.FileEntry
	if err := f.sb.c.call(ctx, http.MethodPost, sandboxPath(f.sb.ID, "files", "mkdir"), fileQuery(path), nil, &fe); err != nil {
		return nil, err
	}
	return &fe, nil
}
