package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestShimIn(t *testing.T) {
	tests := []struct {
		name  string
		setup func(dir string) error
		found bool
	}{
		{"missing", func(string) error { return nil }, false},
		{"executable", func(dir string) error { return os.WriteFile(filepath.Join(dir, shimName), []byte("x"), 0o555) }, true},
		{"not executable", func(dir string) error { return os.WriteFile(filepath.Join(dir, shimName), []byte("x"), 0o444) }, false},
		{"directory", func(dir string) error { return os.Mkdir(filepath.Join(dir, shimName), 0o755) }, false},
		{"symlink", func(dir string) error {
			if err := os.WriteFile(filepath.Join(dir, "elsewhere"), []byte("x"), 0o555); err != nil {
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
			got := shimIn(dir)
			if want := filepath.Join(dir, shimName); tt.found && got != want || !tt.found && got != "" {
				t.Errorf("shimIn = %q, want found=%v", got, tt.found)
			}
		})
	}
}
