package container

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckSearchable(t *testing.T) {
	base, err := os.MkdirTemp("", "statedir") // t.TempDir's parent is 0700
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		modes []os.FileMode // of base/a, base/a/b, base/a/b/c
		bad   string        // the directory the error names, "" for none
	}{
		{"all searchable", []os.FileMode{0o755, 0o711, 0o711}, ""},
		{"private parent", []os.FileMode{0o755, 0o700, 0o711}, "a/b"},
		{"private grandparent", []os.FileMode{0o750, 0o755, 0o711}, "a"},
		{"private state dir", []os.FileMode{0o755, 0o755, 0o700}, "a/b/c"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := filepath.Join(base, string(rune('0'+i)))
			dirs := []string{filepath.Join(root, "a"), filepath.Join(root, "a", "b"), filepath.Join(root, "a", "b", "c")}
			if err := os.MkdirAll(dirs[2], 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(root, 0o755); err != nil {
				t.Fatal(err)
			}
			for j := len(dirs) - 1; j >= 0; j-- {
				if err := os.Chmod(dirs[j], tt.modes[j]); err != nil {
					t.Fatal(err)
				}
			}
			t.Cleanup(func() {
				for _, d := range dirs {
					os.Chmod(d, 0o755)
				}
			})
			err := checkSearchable(dirs[2])
			switch {
			case tt.bad == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.bad != "" && err == nil:
				t.Fatal("no error")
			case tt.bad != "" && !strings.Contains(err.Error(), filepath.Join(root, tt.bad)+" (mode"):
				t.Fatalf("error does not name %s: %v", tt.bad, err)
			}
		})
	}
	// A symlink is resolved: what counts is the directory it leads to.
	link := filepath.Join(base, "link")
	if err := os.Symlink(filepath.Join(base, "1", "a", "b", "c"), link); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(base, "1", "a", "b"), 0o700)
	if err := checkSearchable(link); err == nil || !strings.Contains(err.Error(), "1/a/b (mode 0700)") {
		t.Fatalf("symlinked state dir: %v", err)
	}
}
