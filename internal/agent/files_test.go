package agent_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/agent"
	"golang.org/x/sys/unix"
)

func q(path string, extra ...string) string {
	s := "?path=" + url.QueryEscape(path)
	for i := 0; i+1 < len(extra); i += 2 {
		s += "&" + extra[i] + "=" + url.QueryEscape(extra[i+1])
	}
	return s
}

func TestFiles(t *testing.T) {
	h := newHarness(t, agent.Config{})
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}

	var e api.FileEntry
	h.must(http.StatusOK, http.MethodPut, "/files"+q("a/b/c.bin", "mode", "0600"), all, &e)
	abs := filepath.Join(h.workdir, "a/b/c.bin")
	if e.Path != abs || e.Name != "c.bin" || e.Type != api.FileTypeFile || e.Size != 256 || e.Mode != "0600" || e.ModifiedAt.IsZero() {
		t.Errorf("put entry %+v", e)
	}
	var got []byte
	h.must(http.StatusOK, http.MethodGet, "/files"+q(abs), nil, &got)
	if !bytes.Equal(got, all) {
		t.Errorf("binary round trip: got %d bytes %x", len(got), got)
	}
	// Overwrite in place, default mode; no temporary files left behind.
	h.must(http.StatusOK, http.MethodPut, "/files"+q("a/b/c.bin"), []byte("new"), &e)
	h.must(http.StatusOK, http.MethodGet, "/files"+q("a/b/c.bin"), nil, &got)
	if string(got) != "new" || e.Mode != "0644" || e.Size != 3 {
		t.Errorf("overwrite: %q %+v", got, e)
	}
	if names, _ := os.ReadDir(filepath.Join(h.workdir, "a/b")); len(names) != 1 {
		t.Errorf("leftover files: %v", names)
	}

	h.must(http.StatusOK, http.MethodPost, "/files/mkdir"+q("d/e/f", "mode", "0700"), nil, &e)
	if e.Type != api.FileTypeDir || e.Mode != "0700" {
		t.Errorf("mkdir entry %+v", e)
	}
	h.must(http.StatusOK, http.MethodPost, "/files/mkdir"+q("d/e/f"), nil, &e) // exists: fine
	if err := os.Symlink("a", filepath.Join(h.workdir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/nowhere", filepath.Join(h.workdir, "dangling")); err != nil {
		t.Fatal(err)
	}

	h.must(http.StatusOK, http.MethodGet, "/files/stat"+q("link"), nil, &e)
	if e.Type != api.FileTypeDir || e.Path != filepath.Join(h.workdir, "link") {
		t.Errorf("stat follows symlinks: %+v", e)
	}
	h.must(http.StatusOK, http.MethodGet, "/files/stat"+q("dangling"), nil, &e)
	if e.Type != api.FileTypeSymlink || e.LinkTarget != "/nowhere" {
		t.Errorf("stat of a dangling symlink: %+v", e)
	}

	listing := func(path string, depth int) string {
		var l api.ListFilesResponse
		h.must(http.StatusOK, http.MethodGet, "/files/list"+q(path, "depth", fmt.Sprint(depth)), nil, &l)
		var b strings.Builder
		for _, e := range l.Entries {
			rel, _ := filepath.Rel(h.workdir, e.Path)
			fmt.Fprintf(&b, "%s:%s%s ", rel, e.Type, map[bool]string{true: "->" + e.LinkTarget}[e.LinkTarget != ""])
		}
		return strings.TrimSpace(b.String())
	}
	if got, want := listing(".", 1), "a:dir d:dir dangling:symlink->/nowhere link:symlink->a"; got != want {
		t.Errorf("depth 1:\n got %s\nwant %s", got, want)
	}
	if got, want := listing(h.workdir, 3), "a:dir a/b:dir a/b/c.bin:file d:dir d/e:dir d/e/f:dir dangling:symlink->/nowhere link:symlink->a"; got != want {
		t.Errorf("depth 3 (symlinks not followed):\n got %s\nwant %s", got, want)
	}

	st, eb := h.try(http.MethodDelete, "/files"+q("a"), nil, nil)
	if st != http.StatusConflict || eb.Code != api.CodeConflict {
		t.Errorf("delete non-empty dir: %d %s", st, eb.Code)
	}
	h.must(http.StatusNoContent, http.MethodDelete, "/files"+q("link"), nil, nil) // the link, not its target
	h.must(http.StatusNoContent, http.MethodDelete, "/files"+q("a", "recursive", "true"), nil, nil)
	if st, eb := h.try(http.MethodGet, "/files"+q("a/b/c.bin"), nil, nil); st != http.StatusNotFound || eb.Code != api.CodeNotFound {
		t.Errorf("get deleted: %d %s", st, eb.Code)
	}
	if got, want := listing(".", 1), "d:dir dangling:symlink->/nowhere"; got != want {
		t.Errorf("after deletes: %s", got)
	}
}

func TestFilesErrors(t *testing.T) {
	h := newHarness(t, agent.Config{MaxFileBytes: 1024})
	if err := os.MkdirAll(filepath.Join(h.workdir, "dir/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.workdir, "big"), make([]byte, 2048), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.workdir, "file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(h.workdir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		{"no path", http.MethodGet, "/files", nil, 400, api.CodeBadRequest},
		{"NUL in path", http.MethodGet, "/files?path=a%00b", nil, 400, api.CodeBadRequest},
		{"path too long", http.MethodGet, "/files" + q(strings.Repeat("a", 4097)), nil, 400, api.CodeBadRequest},
		{"missing", http.MethodGet, "/files" + q("nope"), nil, 404, api.CodeNotFound},
		{"read a directory", http.MethodGet, "/files" + q("dir"), nil, 400, api.CodeBadRequest},
		{"read a fifo", http.MethodGet, "/files" + q("fifo"), nil, 400, api.CodeBadRequest},
		{"read a device", http.MethodGet, "/files" + q("/dev/null"), nil, 400, api.CodeBadRequest},
		{"read too large", http.MethodGet, "/files" + q("big"), nil, 413, api.CodeTooLarge},
		{"write too large", http.MethodPut, "/files" + q("w"), make([]byte, 1025), 413, api.CodeTooLarge},
		{"write too large, chunked", http.MethodPut, "/files" + q("w"), io.MultiReader(bytes.NewReader(make([]byte, 2000))), 413, api.CodeTooLarge},
		{"write over a directory", http.MethodPut, "/files" + q("dir"), []byte("x"), 409, api.CodeConflict},
		{"write under a file", http.MethodPut, "/files" + q("file/x"), []byte("x"), 400, api.CodeBadRequest},
		{"bad mode", http.MethodPut, "/files" + q("w", "mode", "999"), []byte("x"), 400, api.CodeBadRequest},
		{"delete /", http.MethodDelete, "/files" + q("/"), nil, 400, api.CodeBadRequest},
		{"delete missing", http.MethodDelete, "/files" + q("nope"), nil, 404, api.CodeNotFound},
		{"delete bad recursive", http.MethodDelete, "/files" + q("dir", "recursive", "yes please"), nil, 400, api.CodeBadRequest},
		{"list a file", http.MethodGet, "/files/list" + q("file"), nil, 400, api.CodeBadRequest},
		{"list missing", http.MethodGet, "/files/list" + q("nope"), nil, 404, api.CodeNotFound},
		{"list too deep", http.MethodGet, "/files/list" + q(".", "depth", "21"), nil, 400, api.CodeBadRequest},
		{"list depth 0", http.MethodGet, "/files/list" + q(".", "depth", "0"), nil, 400, api.CodeBadRequest},
		{"stat missing", http.MethodGet, "/files/stat" + q("nope"), nil, 404, api.CodeNotFound},
		{"mkdir over a file", http.MethodPost, "/files/mkdir" + q("file"), nil, 409, api.CodeConflict},
		{"mkdir bad mode", http.MethodPost, "/files/mkdir" + q("m", "mode", "rwx"), nil, 400, api.CodeBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.body
			if r, ok := body.(io.Reader); ok { // no Content-Length: chunked
				req, _ := http.NewRequest(tt.method, "http://agent"+tt.path, r)
				resp, err := h.c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != tt.status {
					t.Errorf("got %d, want %d", resp.StatusCode, tt.status)
				}
				return
			}
			if st, eb := h.try(tt.method, tt.path, body, nil); st != tt.status || eb.Code != tt.code {
				t.Errorf("got %d %s (%s), want %d %s", st, eb.Code, eb.Message, tt.status, tt.code)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(h.workdir, "w")); !os.IsNotExist(err) {
		t.Errorf("a refused upload left a file: %v", err)
	}
	if names, _ := filepath.Glob(filepath.Join(h.workdir, ".paddock-*")); len(names) > 0 {
		t.Errorf("temporary files left: %v", names)
	}
}

func TestFilesListTruncated(t *testing.T) {
	h := newHarness(t, agent.Config{})
	dir := filepath.Join(h.workdir, "many")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10001; i++ {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%05d", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	var l api.ListFilesResponse
	h.must(http.StatusOK, http.MethodGet, "/files/list"+q("many"), nil, &l)
	if len(l.Entries) != 10000 || !l.Truncated {
		t.Errorf("%d entries, truncated %v", len(l.Entries), l.Truncated)
	}
}
