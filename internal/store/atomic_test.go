package store

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// names lists dir's entries.
func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func TestWriteFileAtomic(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, dir, path string) // the state before the write
		path    string                               // relative to the test dir
		perm    fs.FileMode
		wantErr bool
		want    string // content after the write
		wantIn  []string
	}{
		{name: "new file", path: "f.json", perm: 0o600, want: "new", wantIn: []string{"f.json"}},
		{name: "world readable", path: "ca.pem", perm: 0o644, want: "new", wantIn: []string{"ca.pem"}},
		{
			name: "replace keeps no old mode", path: "f.json", perm: 0o600, want: "new", wantIn: []string{"f.json"},
			setup: func(t *testing.T, _, path string) { os.WriteFile(path, []byte("old content"), 0o644) },
		},
		{
			// A crash between the temp write and the rename left a temp
			// file: the next write neither trips on it nor removes it.
			name: "leftover temp from a crash", path: "f.json", perm: 0o600, want: "new",
			wantIn: []string{".tmp-f.json-1", "f.json"},
			setup: func(t *testing.T, dir, path string) {
				os.WriteFile(path, []byte("old"), 0o600)
				os.WriteFile(filepath.Join(dir, ".tmp-f.json-1"), []byte("torn"), 0o600)
			},
		},
		{name: "missing directory", path: "no/such/f.json", perm: 0o600, wantErr: true, wantIn: nil},
		{
			name: "target is a directory", path: "d", perm: 0o600, wantErr: true, wantIn: []string{"d"},
			setup: func(t *testing.T, _, path string) { os.Mkdir(path, 0o700) },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, tc.path)
			if tc.setup != nil {
				tc.setup(t, dir, path)
			}
			err := WriteFileAtomic(path, []byte(tc.want), tc.perm)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if got := names(t, dir); !slices.Equal(got, tc.wantIn) {
				t.Errorf("dir holds %q, want %q", got, tc.wantIn)
			}
			if tc.wantErr {
				return
			}
			b, err := os.ReadFile(path)
			if err != nil || string(b) != tc.want {
				t.Fatalf("content %q, %v; want %q", b, err, tc.want)
			}
			fi, _ := os.Stat(path)
			if fi.Mode().Perm() != tc.perm {
				t.Errorf("mode %v, want %v", fi.Mode().Perm(), tc.perm)
			}
		})
	}
}

// TestCrashBeforeRename stops WriteFileAtomic where a kill -9 could: the
// temp file is written and synced, the rename has not happened.
func TestCrashBeforeRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "templates.json")
	if err := WriteFileAtomic(path, []byte("v1"), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp, err := writeTemp(path, []byte("v2"), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "v1" {
		t.Fatalf("after the crash the file reads %q, want the old v1", b)
	}
	if filepath.Dir(tmp) != dir || filepath.Base(tmp)[:len(TempPrefix)] != TempPrefix {
		t.Fatalf("temp file %s is not a %s* file in %s", tmp, TempPrefix, dir)
	}
	// A fresh temp survives a cleanup with a grace period (another
	// process may be about to rename it); an old one does not.
	if err := CleanTemps(dir, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("fresh temp removed within its grace period: %v", err)
	}
	old := time.Now().Add(-2 * time.Minute)
	os.Chtimes(tmp, old, old)
	if err := CleanTemps(dir, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"templates.json"}) {
		t.Fatalf("after cleanup dir holds %q", got)
	}
}

func TestCleanTemps(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{".tmp-a.json-1", ".tmp-b-2", "a.json", ".hidden", "x.json.tmp"} {
		os.WriteFile(filepath.Join(dir, f), nil, 0o600)
	}
	os.Mkdir(filepath.Join(dir, ".tmp-dir"), 0o700) // not a file: not ours
	if err := CleanTemps(dir, 0); err != nil {
		t.Fatal(err)
	}
	want := []string{".hidden", ".tmp-dir", "a.json", "x.json.tmp"}
	if got := names(t, dir); !slices.Equal(got, want) {
		t.Fatalf("dir holds %q, want %q", got, want)
	}
	if err := CleanTemps(filepath.Join(dir, "missing"), 0); err != nil {
		t.Fatalf("missing dir: %v", err)
	}
}

func TestPublishDir(t *testing.T) {
	for _, tc := range []struct {
		name    string
		final   func(t *testing.T, final string) // the state of final before
		wantErr bool
	}{
		{name: "fresh", final: func(*testing.T, string) {}},
		{
			name:    "final already published",
			final:   func(t *testing.T, f string) { os.MkdirAll(filepath.Join(f, "rootfs"), 0o755) },
			wantErr: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			tmp, final := filepath.Join(root, "layer.tmp"), filepath.Join(root, "layer")
			os.MkdirAll(filepath.Join(tmp, "rootfs"), 0o755)
			os.WriteFile(filepath.Join(tmp, "ready"), nil, 0o644)
			tc.final(t, final)
			err := PublishDir(tmp, final)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			_, tmpErr := os.Stat(tmp)
			_, readyErr := os.Stat(filepath.Join(final, "ready"))
			if tc.wantErr {
				if tmpErr != nil || readyErr == nil {
					t.Fatalf("failed publish changed things: tmp %v, final ready %v", tmpErr, readyErr)
				}
				return
			}
			if tmpErr == nil || readyErr != nil {
				t.Fatalf("after publish: tmp %v, final ready %v", tmpErr, readyErr)
			}
		})
	}
	if err := PublishDir(filepath.Join(t.TempDir(), "missing"), filepath.Join(t.TempDir(), "x")); err == nil {
		t.Fatal("publishing a missing dir succeeded")
	}
}
