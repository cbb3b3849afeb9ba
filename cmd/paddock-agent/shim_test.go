package main

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestOpenShim(t *testing.T) {
	tests := []struct {
		name  string
		setup func(dir string) error
		found bool
	}{
		{"missing", func(string) error { return nil }, false},
		{"executable", func(dir string) error { return os.WriteFile(filepath.Join(dir, shimName), []byte("genuine"), 0o555) }, true},
		{"execute-only", func(dir string) error { return os.WriteFile(filepath.Join(dir, shimName), []byte("genuine"), 0o111) }, true},
		{"not executable", func(dir string) error { return os.WriteFile(filepath.Join(dir, shimName), []byte("genuine"), 0o444) }, false},
		{"directory", func(dir string) error { return os.Mkdir(filepath.Join(dir, shimName), 0o755) }, false},
		{"symlink", func(dir string) error {
			if err := os.WriteFile(filepath.Join(dir, "elsewhere"), []byte("genuine"), 0o555); err != nil {
				return err
			}
			return os.Symlink("elsewhere", filepath.Join(dir, shimName))
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := tt.setup(dir); err != nil {
				t.Fatal(err)
			}
			f := openShim(dir)
			if (f != nil) != tt.found {
				t.Fatalf("openShim = %v, want found=%v", f, tt.found)
			}
			if f == nil {
				return
			}
			defer f.Close()
			var was unix.Stat_t
			if err := unix.Fstat(int(f.Fd()), &was); err != nil {
				t.Fatal(err)
			}
			// The descriptor keeps the file opened at start, whatever is
			// put in its place later.
			p := filepath.Join(dir, shimName)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("impostor"), 0o755); err != nil {
				t.Fatal(err)
			}
			var now, fresh unix.Stat_t
			if err := unix.Fstat(int(f.Fd()), &now); err != nil || now.Ino != was.Ino {
				t.Errorf("the descriptor's file changed: inode %d, was %d (%v)", now.Ino, was.Ino, err)
			}
			if err := unix.Stat(p, &fresh); err != nil || fresh.Ino == was.Ino {
				t.Errorf("the impostor has the genuine file's inode %d (%v)", fresh.Ino, err)
			}
		})
	}
}
