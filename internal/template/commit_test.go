package template

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCommit turns an overlay upper dir into a layer: whiteouts, opaque
// directories, hard links and symlinks survive, owners are shifted back
// from the sandbox's range, and devices, foreign owners and the agent's
// directory are handled.
func TestCommit(t *testing.T) {
	e := newEnv(t, nil)
	r := newRegistry(t)
	ref := r.push(t, "base", imageOf(t, nil, layerOf(t, tarOf(t, dir("etc"), file("etc/motd", "m"),
		dir("opt"), file("opt/old", "o"), file("keep", "k")))))
	parent, err := e.pull(t, "parent", ref)
	if err != nil {
		t.Fatal(err)
	}

	const base = 5 << 16
	up := filepath.Join(e.dir, "outside", "upper") // checkContained is not used here
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"", "etc", "opt", "home", "home/u", ".paddock"} {
		must(os.MkdirAll(filepath.Join(up, d), 0o755))
		must(os.Lchown(filepath.Join(up, d), base, base))
	}
	must(os.WriteFile(filepath.Join(up, "home/u/file"), []byte("data"), 0o640))
	must(os.Lchown(filepath.Join(up, "home/u/file"), base+1000, base+1000))
	must(os.Link(filepath.Join(up, "home/u/file"), filepath.Join(up, "home/u/link")))
	must(os.Symlink("/etc/motd", filepath.Join(up, "home/u/sym")))
	must(os.Lchown(filepath.Join(up, "home/u/sym"), base, base))
	must(os.WriteFile(filepath.Join(up, "home/foreign"), []byte("f"), 0o644)) // owned by host root
	must(unix.Mknod(filepath.Join(up, "etc/motd"), unix.S_IFCHR, 0))          // whiteout
	must(unix.Mknod(filepath.Join(up, "home/null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	must(unix.Setxattr(filepath.Join(up, "opt"), "trusted.overlay.opaque", []byte("y"), 0))
	must(os.WriteFile(filepath.Join(up, "opt/new"), []byte("n"), 0o644))
	must(os.WriteFile(filepath.Join(up, ".paddock/paddock-agent"), []byte("not the agent"), 0o755))

	cfg := ImageConfig{Env: []string{"A=1"}}
	im, err := e.store.Commit(context.Background(), "child", parent, up, base, 0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Layers) != 2 || im.Layers[0] != parent.Layers[0] || im.Digest == "" || im.Config.Env[0] != "A=1" {
		t.Fatalf("image %+v", im)
	}
	top := im.LowerDirs[0]
	owner := func(p string) (int, int) {
		var st unix.Stat_t
		must(unix.Lstat(filepath.Join(top, p), &st))
		return int(st.Uid), int(st.Gid)
	}
	if u, g := owner("home/u/file"); u != 1000 || g != 1000 {
		t.Errorf("file owner %d:%d, want 1000:1000", u, g)
	}
	if u, _ := owner("home"); u != 0 {
		t.Errorf("dir owner %d, want 0", u)
	}
	if u, _ := owner("home/foreign"); u != 65534 {
		t.Errorf("foreign owner %d, want 65534", u)
	}
	var a, b unix.Stat_t
	must(unix.Lstat(filepath.Join(top, "home/u/file"), &a))
	must(unix.Lstat(filepath.Join(top, "home/u/link"), &b))
	if a.Ino != b.Ino || a.Mode&0o777 != 0o640 {
		t.Errorf("hard link not kept (inodes %d, %d) or mode %o", a.Ino, b.Ino, a.Mode&0o777)
	}
	if target, err := os.Readlink(filepath.Join(top, "home/u/sym")); err != nil || target != "/etc/motd" {
		t.Errorf("symlink %q %v", target, err)
	}
	var wh unix.Stat_t
	if err := unix.Lstat(filepath.Join(top, "etc/motd"), &wh); err != nil || wh.Mode&unix.S_IFMT != unix.S_IFCHR || wh.Rdev != 0 {
		t.Errorf("whiteout lost: %v", err)
	}
	buf := make([]byte, 4)
	if n, err := unix.Lgetxattr(filepath.Join(top, "opt"), "trusted.overlay.opaque", buf); err != nil || string(buf[:n]) != "y" {
		t.Errorf("opaque dir lost: %v", err)
	}
	for _, p := range []string{"home/null", ".paddock"} {
		if _, err := os.Lstat(filepath.Join(top, p)); err == nil {
			t.Errorf("%s was committed", p)
		}
	}

	mnt := t.TempDir()
	if err := unix.Mount("overlay", mnt, "overlay", unix.MS_RDONLY, "lowerdir="+im.Lower()); err != nil {
		t.Skipf("overlay mount unavailable: %v", err)
	}
	defer unix.Unmount(mnt, unix.MNT_DETACH)
	for p, want := range map[string]bool{"etc/motd": false, "opt/old": false, "opt/new": true, "keep": true, "home/u/file": true} {
		if _, err := os.Lstat(filepath.Join(mnt, p)); (err == nil) != want {
			t.Errorf("merged %s exists = %v, want %v", p, err == nil, want)
		}
	}

	// Save makes another name for the same layers; unknown layers fail.
	again, err := e.store.Save(Image{Name: "alias", Layers: im.Layers, Config: im.Config, Digest: im.Digest})
	if err != nil || again.Digest != im.Digest || again.Size != im.Size {
		t.Fatalf("save: %+v %v", again, err)
	}
	_, err = e.store.Save(Image{Name: "broken", Layers: []string{"sha256:00"}})
	wantErr(t, err, ErrNotFound)
}
