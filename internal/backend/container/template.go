package container

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/paddock-sandbox/paddock/internal/store"
)

// agentPath is where the guest agent binary lives inside every sandbox.
const agentPath = "/.paddock/paddock-agent"

// hostEtc lists the host /etc entries copied into the base template. Only
// non-secret configuration is copied; anything else (shadow, ssh keys,
// sudoers, ...) never reaches a sandbox.
var hostEtc = []string{
	"alternatives", "bash.bashrc", "ca-certificates.conf", "debian_version",
	"gai.conf", "inputrc", "issue", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
	"localtime", "mime.types", "os-release", "perl", "protocols", "python3",
	"python3.11", "python3.12", "python3.13", "rpc", "services", "ssl/certs",
	"ssl/openssl.cnf", "timezone", "xattr.conf", "gitconfig", "magic",
}

// hostDirs are the top-level host directories the base template bind-mounts
// read-only (when they are real directories; merged-/usr symlinks are
// recreated as symlinks instead).
var hostDirs = []string{"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// baseTemplate describes the built base root.
type baseTemplate struct {
	dir    string   // the read-only lower root
	mounts []string // host directories to bind read-only at the same path
}

var generatedEtc = map[string]string{
	"passwd": "root:x:0:0:root:/root:/bin/bash\n" +
		"user:x:1000:1000:user:/home/user:/bin/bash\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
	"group":         "root:x:0:\ntty:x:5:\nusers:x:100:\nuser:x:1000:\nnogroup:x:65534:\n",
	"hosts":         "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n",
	"hostname":      "sandbox\n",
	"resolv.conf":   "# Paddock sandbox: no network by default.\nnameserver 127.0.0.1\n",
	"nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n",
	"profile": "# Paddock sandbox profile\n" +
		"if [ -d /etc/profile.d ]; then for i in /etc/profile.d/*.sh; do [ -r \"$i\" ] && . \"$i\"; done; unset i; fi\n",
	"environment": "",
}

// buildBase builds (or reuses) the base template root under root/templates.
// The directory name carries a hash of its contents, so a template that is
// in use by a running sandbox is never modified in place.
func buildBase(root string, guest guestBinaries) (*baseTemplate, error) {
	var mounts []string
	var links [][2]string
	h := sha256.New()
	fmt.Fprintf(h, "base-v1\n")
	guest.hash(h)
	for _, d := range hostDirs {
		p := "/" + d
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			t, err := os.Readlink(p)
			if err != nil {
				return nil, err
			}
			links = append(links, [2]string{d, t})
			fmt.Fprintf(h, "link %s %s\n", d, t)
		} else if fi.IsDir() {
			mounts = append(mounts, p)
			fmt.Fprintf(h, "mount %s\n", p)
		}
	}
	for _, e := range hostEtc {
		fmt.Fprintf(h, "etc %s\n", e)
	}
	binLinks := baseLinks()
	hashLinks(h, binLinks)
	keys := make([]string, 0, len(generatedEtc))
	for k := range generatedEtc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "gen %s %s\n", k, generatedEtc[k])
	}
	name := "base-" + hex.EncodeToString(h.Sum(nil))[:16]
	dir := filepath.Join(root, "templates", name)
	tpl := &baseTemplate{dir: filepath.Join(dir, "rootfs"), mounts: mounts}
	if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
		return tpl, nil
	}
	os.RemoveAll(dir)
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	rootfs := filepath.Join(tmp, "rootfs")
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{
		{"", 0o755}, {"proc", 0o555}, {"sys", 0o555}, {"dev", 0o755}, {"tmp", os.ModeSticky | 0o777},
		{"workspace", 0o755}, {"root", 0o700}, {"home", 0o755}, {"run", 0o755},
		{"var", 0o755}, {"var/tmp", os.ModeSticky | 0o777}, {"var/cache", 0o755}, {"var/lib", 0o755},
		{"var/log", 0o755}, {"opt", 0o755}, {"mnt", 0o755}, {"srv", 0o755},
		{"etc", 0o755}, {"etc/profile.d", 0o755}, {"etc/ssl", 0o755}, {".paddock", 0o755},
	} {
		p := filepath.Join(rootfs, d.path)
		if err := os.MkdirAll(p, d.mode); err != nil {
			return nil, err
		}
		if err := os.Chmod(p, d.mode); err != nil {
			return nil, err
		}
	}
	for _, m := range mounts {
		if err := os.MkdirAll(filepath.Join(rootfs, m), 0o755); err != nil {
			return nil, err
		}
	}
	for _, l := range links {
		if err := os.Symlink(l[1], filepath.Join(rootfs, l[0])); err != nil {
			return nil, err
		}
	}
	for _, e := range hostEtc {
		if err := copyTree(filepath.Join("/etc", e), filepath.Join(rootfs, "etc", e)); err != nil {
			return nil, fmt.Errorf("copy /etc/%s: %w", e, err)
		}
	}
	for k, v := range generatedEtc {
		if err := os.WriteFile(filepath.Join(rootfs, "etc", k), []byte(v), 0o644); err != nil {
			return nil, err
		}
	}
	if err := writeLinks(rootfs, binLinks); err != nil {
		return nil, err
	}
	if err := guest.install(rootfs); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "ready"), nil, 0o644); err != nil {
		return nil, err
	}
	if err := store.PublishDir(tmp, dir); err != nil {
		return nil, err
	}
	return tpl, nil
}

// copyTree copies regular files (up to 4 MiB), directories and symlinks from
// src to dst. Missing sources are skipped; other file types are ignored.
func copyTree(src, dst string) error {
	fi, err := os.Lstat(src)
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		t, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(t, dst)
	case fi.IsDir():
		if err := os.MkdirAll(dst, fi.Mode().Perm()|0o700); err != nil {
			return err
		}
		ents, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := copyTree(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				return err
			}
		}
		return os.Chmod(dst, fi.Mode().Perm())
	case fi.Mode().IsRegular():
		if fi.Size() > 4<<20 || fi.Mode().Perm()&0o004 == 0 {
			return nil // large or not world-readable: not for sandboxes
		}
		return copyFile(src, dst, fi.Mode().Perm())
	}
	return nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, mode)
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// gcTemplates removes template directories no sandbox uses any more.
func gcTemplates(root string, keep map[string]bool) {
	ents, _ := os.ReadDir(filepath.Join(root, "templates"))
	for _, e := range ents {
		p := filepath.Join(root, "templates", e.Name())
		if !keep[filepath.Join(p, "rootfs")] && !strings.HasSuffix(e.Name(), ".lock") {
			os.RemoveAll(p)
		}
	}
}
