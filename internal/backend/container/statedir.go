package container

import (
	"fmt"
	"os"
	"path/filepath"
)

// checkSearchable fails with one sentence unless every directory from the
// root down to dir (symlinks resolved) can be searched by other users.
// Sandboxes run as host uids of their own (see Config.UIDBase), which are
// "other" to every directory on the host, and the runtime reaches each
// sandbox's root file system under the state directory as such a uid: a
// 0700 parent (a private temp dir) otherwise fails every create deep in
// the runtime with "permission denied".
func checkSearchable(dir string) error {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	real, err = filepath.Abs(real)
	if err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	for p := real; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("state directory %s: %w", dir, err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("state directory %s cannot be used: %s (mode %04o) is not searchable by other users, and sandboxes run as host uids of their own (chmod o+x %s, or choose another --state-dir)",
				dir, p, fi.Mode().Perm(), p)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}
