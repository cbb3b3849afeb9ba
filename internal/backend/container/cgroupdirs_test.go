package container

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSubCgroups: a cgroup directory and every directory below it,
// parents before children, and none of the files.
func TestSubCgroups(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"a/b/c", "a/d", "e"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"cgroup.procs", "a/memory.max", "a/b/cgroup.procs"} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "e"), filepath.Join(root, "a", "link")); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range subCgroups(root) {
		rel, _ := filepath.Rel(root, p)
		got = append(got, rel)
	}
	want := []string{".", "a", "e", "a/b", "a/d", "a/b/c"}
	if !slices.Equal(got, want) {
		t.Fatalf("subCgroups = %q, want %q", got, want)
	}
	for i, p := range got { // a parent always comes before its children
		for _, q := range got[:i] {
			if rel, err := filepath.Rel(p, q); err == nil && rel != "." && !filepath.IsAbs(rel) && rel[0] != '.' {
				t.Errorf("%s listed after its child %s", p, q)
			}
		}
	}
	if got := subCgroups(filepath.Join(root, "missing")); len(got) != 1 {
		t.Errorf("missing dir: %q", got)
	}
}
