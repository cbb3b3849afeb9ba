package template

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestImportPathUniform(t *testing.T) {
	base := t.TempDir()
	imp := filepath.Join(base, "import")
	os.Mkdir(imp, 0o755)
	os.WriteFile(filepath.Join(imp, "img.tar"), []byte("x"), 0o644)
	os.Mkdir(filepath.Join(imp, "layout"), 0o755)
	secret := filepath.Join(base, "secret")
	os.WriteFile(secret, []byte("s"), 0o000)
	os.Symlink(secret, filepath.Join(imp, "to-secret"))
	os.Symlink("/etc/nonexistent", filepath.Join(imp, "to-missing"))
	os.Symlink("img.tar", filepath.Join(imp, "inner-link"))
	alias := filepath.Join(base, "alias")
	os.Symlink(imp, alias)
	dirs := []string{alias} // the configured dir may itself be a symlink

	for _, p := range []string{filepath.Join(imp, "img.tar"), filepath.Join(alias, "img.tar"),
		filepath.Join(imp, "layout"), filepath.Join(imp, "inner-link")} {
		got, err := ImportPath(dirs, p)
		if err != nil || filepath.Dir(got) != imp {
			t.Errorf("%s: %q, %v", p, got, err)
		}
	}
	var msg string
	for _, p := range []string{"/etc/shadow", "/etc/nonexistent", "/etc", "/", secret, "relative/x",
		filepath.Join(imp, "missing"), filepath.Join(imp, "to-secret"), filepath.Join(imp, "to-missing"),
		filepath.Join(imp, "../secret"), imp + "x/y", "/proc/self/root/etc/shadow"} {
		_, err := ImportPath(dirs, p)
		if !errors.Is(err, ErrImportPath) || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if msg == "" {
			msg = err.Error()
		} else if err.Error() != msg {
			t.Errorf("%s: %q differs from %q", p, err, msg)
		}
	}
}
