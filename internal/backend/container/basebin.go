package container

import (
	"fmt"
	"hash"
	"os"
	"path"
	"path/filepath"
)

// baseBinDir is a directory of the base template's own root (not the
// host's) that is last on every sandbox's PATH. It holds the command names
// programs written for other sandboxes expect ("python", "pip") as
// symlinks to what the host has ("python3", "pip3"), so the host's
// read-only /usr is never touched.
const baseBinDir = "/.paddock/bin"

// sandboxPath is the PATH of every sandbox unless its template or request
// sets one.
const sandboxPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:" + baseBinDir

// baseAliases maps a command name to the host command it runs when the
// host has the latter but not the former.
var baseAliases = [][2]string{{"python", "python3"}, {"pip", "pip3"}}

// hostBinDirs are the host directories searched for baseAliases, in PATH
// order.
var hostBinDirs = []string{"/usr/local/bin", "/usr/bin", "/bin"}

// baseLinks returns the symlinks to make in baseBinDir as name → absolute
// target: one per alias whose name the host lacks and whose target it has.
func baseLinks() [][2]string {
	find := func(name string) string {
		for _, d := range hostBinDirs {
			p := path.Join(d, name)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
				return p
			}
		}
		return ""
	}
	var out [][2]string
	for _, a := range baseAliases {
		if find(a[0]) == "" {
			if t := find(a[1]); t != "" {
				out = append(out, [2]string{a[0], t})
			}
		}
	}
	return out
}

// hashLinks adds links to the base template's content hash.
func hashLinks(h hash.Hash, links [][2]string) {
	for _, l := range links {
		fmt.Fprintf(h, "bin %s %s\n", l[0], l[1])
	}
}

// writeLinks makes links in rootfs's baseBinDir.
func writeLinks(rootfs string, links [][2]string) error {
	dir := filepath.Join(rootfs, baseBinDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, l := range links {
		if err := os.Symlink(l[1], filepath.Join(dir, l[0])); err != nil {
			return fmt.Errorf("base %s: %w", baseBinDir, err)
		}
	}
	return nil
}
