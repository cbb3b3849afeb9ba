package catalog

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/template"
)

func newTestCatalog(t *testing.T, aliases map[string]string) (*Catalog, error) {
	t.Helper()
	dir := t.TempDir()
	st, err := template.Open(template.Config{Root: filepath.Join(dir, "images")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return New(Config{Store: st, CatalogPath: filepath.Join(dir, "templates.json"),
		BaseRuntimes: map[string]string{"base": "", "base-crun": "crun"}, Aliases: aliases})
}

func TestAliasConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		aliases map[string]string
		want    string // substring of the error; "" = valid
	}{
		{"none", nil, ""},
		{"to base", map[string]string{"python-3.12": "base", "code-interpreter-v1": "base-crun:latest"}, ""},
		{"bad name", map[string]string{"py thon": "base"}, "template name"},
		{"shadows base", map[string]string{"base-crun": "base"}, "a base or config template has that name"},
		{"unknown target", map[string]string{"python-3.12": "nope"}, `target "nope" is not a base or config template`},
		{"alias of alias", map[string]string{"a": "base", "b": "a"}, `target "a"`},
		{"duplicate", map[string]string{"py": "base", "py:latest": "base"}, "same name as alias"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newTestCatalog(t, tc.aliases)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("New: err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestAliasResolve(t *testing.T) {
	ctx := context.Background()
	c, err := newTestCatalog(t, map[string]string{"python-3.12": "base", "crun-box": "base-crun"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want string }{
		{"python-3.12", "base"}, {"python-3.12:latest", "base"}, {"crun-box", "base-crun"}, {"base", "base"}, {"", "base"},
	} {
		got, err := c.Resolve(ctx, "k1", tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if tpl, err := c.Get(ctx, "k1", "python-3.12"); err != nil || tpl.Name != "base" {
		t.Errorf("Get(alias) = %+v, %v; want base", tpl, err)
	}
	_, err = c.Resolve(ctx, "k1", "python-3.11")
	if !errors.Is(err, sandbox.ErrUnknownTemplate) {
		t.Fatalf("unknown template: err = %v, want ErrUnknownTemplate", err)
	}
	for _, name := range []string{"base", "base-crun", "python-3.12 (= base)", "crun-box (= base-crun)"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("unknown template error %q does not list %q", err, name)
		}
	}
	if _, _, err := c.checkNewName("python-3.12"); !errors.Is(err, sandbox.ErrConflict) {
		t.Errorf("a key's template named like an alias: err = %v, want ErrConflict", err)
	}
	if err := c.Delete(ctx, "k1", "python-3.12"); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("Delete(alias): err = %v, want ErrInvalid", err)
	}
}
