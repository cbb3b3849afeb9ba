package container

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
	"github.com/paddock-sandbox/paddock/internal/template"
	"golang.org/x/sys/unix"
)

// Image templates. A template that is not the base (or a config template
// built on it) is resolved through Config.Images to a template.Root: the
// image's layer directories in the template store. Its sandbox root is an
// overlay of
//
//	upper   the sandbox's disk (disk/upper), as for base
//	lower   the paddock layer: the agent, /etc/hosts, /etc/hostname,
//	        /etc/resolv.conf, /workspace and mount points (read-only,
//	        owned by host root like the base template)
//	lower   the image's layers, top first, each an idmapped mount
//	        (<sandbox>/l/<n>) that shows the layer's uid 0 as the
//	        sandbox's root, so the image's files keep their owners
//	lower   the base template root, only for templates built on base
//
// with no host bind mounts unless the template is built on base. The
// image's Env is applied to the sandbox (a request's env wins).

// HasSource reports whether a config template is an image (pulled by the
// daemon at start) rather than a runtime choice for the base template.
func (t Template) HasSource() bool {
	return t.Image != "" || t.OCILayout != "" || t.Tarball != "" || t.Dir != ""
}

// imageState is the backend's image-template state.
type imageState struct {
	paddock string // the paddock layer's root
	holder  string // a program that blocks reading stdin ("cat"), for user namespaces
	mu      sync.Mutex
	userns  map[uint32]*os.File // sandbox uid base → a user namespace mapping it
}

// sandboxRoot is how one sandbox's root is made.
type sandboxRoot struct {
	runtime    *ociRuntime
	layers     []rootLayer // top first
	hostMounts []string
	env        map[string]string
}

type rootLayer struct {
	dir   string
	idmap bool
}

// lower is the ':'-joined real layer directories, recorded in the
// sandbox's metadata (the template store's InUse reads it).
func (r *sandboxRoot) lower() string {
	dirs := make([]string, len(r.layers))
	for i, l := range r.layers {
		dirs[i] = l.dir
	}
	return strings.Join(dirs, ":")
}

// rootFor resolves a sandbox's template to the layers of its root.
func (b *Backend) rootFor(spec sandbox.Spec) (*sandboxRoot, error) {
	if t, ok := b.cfg.Templates[spec.Template]; spec.Template == "base" || ok && !t.HasSource() {
		rt, err := b.runtimeFor(spec.Template)
		if err != nil {
			return nil, err
		}
		return &sandboxRoot{runtime: rt, layers: []rootLayer{{dir: b.base.dir}}, hostMounts: b.base.mounts, env: spec.Env}, nil
	}
	if b.cfg.Images == nil {
		return nil, fmt.Errorf("%w: %q", sandbox.ErrUnknownTemplate, spec.Template)
	}
	im, err := b.cfg.Images(spec.Template)
	if err != nil {
		return nil, err
	}
	rtName := im.Runtime
	if rtName == "" {
		rtName = b.cfg.DefaultRuntime
	}
	rt := b.runtimes[rtName]
	if rt == nil {
		return nil, fmt.Errorf("template %q: runtime %q not configured", spec.Template, rtName)
	}
	r := &sandboxRoot{runtime: rt, layers: []rootLayer{{dir: b.img.paddock}}, env: map[string]string{}}
	for _, d := range im.Lower {
		if strings.ContainsAny(d, ":,") {
			return nil, fmt.Errorf("template %q: layer path %q cannot be an overlay lower dir", spec.Template, d)
		}
		r.layers = append(r.layers, rootLayer{dir: d, idmap: true})
	}
	if im.OnBase {
		r.layers = append(r.layers, rootLayer{dir: b.base.dir})
		r.hostMounts = b.base.mounts
	}
	for _, kv := range im.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			r.env[k] = v
		}
	}
	for k, v := range spec.Env {
		r.env[k] = v
	}
	return r, nil
}

// mount mounts the sandbox's root overlay at rootfs; dir is the sandbox
// directory, uidBase its host uid for root.
func (r *sandboxRoot) mount(b *Backend, dir, upper, work, rootfs string, uidBase uint32) error {
	if len(r.layers) == 1 && !r.layers[0].idmap {
		return mountOverlay(r.layers[0].dir, upper, work, rootfs)
	}
	dirs := make([]string, len(r.layers))
	for i, l := range r.layers {
		dirs[i] = l.dir
		if !l.idmap {
			continue
		}
		ns, err := b.usernsFor(uidBase)
		if err != nil {
			return fmt.Errorf("user namespace for idmapped layers: %w", err)
		}
		target := filepath.Join(dir, "l", strconv.Itoa(i))
		if err := os.MkdirAll(target, 0o700); err != nil {
			return err
		}
		if err := idmapMount(l.dir, target, ns); err != nil {
			return fmt.Errorf("layer %s: %w", l.dir, err)
		}
		dirs[i] = target
	}
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		return err
	}
	return overlay(rootfs, dirs, upper, work, "redirect_dir=off,metacopy=off")
}

// idmapMount mounts a read-only view of src at target in which files owned
// by host uid/gid u appear owned by what the user namespace ns maps u to.
func idmapMount(src, target string, ns *os.File) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("open_tree: %w", err)
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{
		Attr_set:  unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
		Userns_fd: uint64(ns.Fd()),
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return fmt.Errorf("idmap (kernel 5.19+ and a filesystem with idmapped mounts needed): %w", err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// usernsFor returns a user namespace that maps uid and gid 0-65535 to
// uidBase, creating it once per uid range: a short-lived child in a new
// user namespace whose maps the daemon writes, kept as an open file.
func (b *Backend) usernsFor(uidBase uint32) (*os.File, error) {
	b.img.mu.Lock()
	defer b.img.mu.Unlock()
	if f := b.img.userns[uidBase]; f != nil {
		return f, nil
	}
	if b.img.holder == "" {
		return nil, errors.New("no `cat` binary on PATH to hold a user namespace")
	}
	cmd := exec.Command(b.img.holder)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(uidBase), Size: idRange}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(uidBase), Size: idRange}},
		Pdeathsig:   syscall.SIGKILL,
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid))
	stdin.Close()
	cmd.Wait()
	if err != nil {
		return nil, err
	}
	b.img.userns[uidBase] = f
	return f, nil
}

// paddockEtc are the files of the paddock layer's /etc.
var paddockEtc = []string{"hosts", "hostname", "resolv.conf"}

// buildPaddockLayer builds (or reuses) the paddock layer under
// root/templates, named by a hash of its contents like the base template.
func buildPaddockLayer(root string, guest guestBinaries) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "paddock-layer-v1\n")
	guest.hash(h)
	for _, k := range paddockEtc {
		fmt.Fprintf(h, "etc %s %s\n", k, generatedEtc[k])
	}
	dir := filepath.Join(root, "templates", "paddock-"+hex.EncodeToString(h.Sum(nil))[:16])
	rootfs := filepath.Join(dir, "rootfs")
	if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
		return rootfs, nil
	}
	os.RemoveAll(dir)
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{
		{"", 0o755}, {"proc", 0o555}, {"sys", 0o555}, {"dev", 0o755}, {"workspace", 0o755},
		{"etc", 0o755}, {".paddock", 0o755},
	} {
		p := filepath.Join(tmp, "rootfs", d.path)
		if err := os.MkdirAll(p, d.mode); err != nil {
			return "", err
		}
		if err := os.Chmod(p, d.mode); err != nil {
			return "", err
		}
	}
	for _, k := range paddockEtc {
		if err := os.WriteFile(filepath.Join(tmp, "rootfs", "etc", k), []byte(generatedEtc[k]), 0o644); err != nil {
			return "", err
		}
	}
	if err := guest.install(filepath.Join(tmp, "rootfs")); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, "ready"), nil, 0o644); err != nil {
		return "", err
	}
	if err := store.PublishDir(tmp, dir); err != nil {
		return "", err
	}
	return rootfs, nil
}

// dedupeEnv keeps the last value of each variable in a KEY=VALUE list
// (later entries, the template's and the request's, override defaults).
func dedupeEnv(env []string) []string {
	last := map[string]int{}
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		last[k] = i
	}
	out := env[:0:0]
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if last[k] == i {
			out = append(out, kv)
		}
	}
	return out
}

// Upper returns a sandbox's writable layer. Freeze the sandbox (Pause)
// while reading it.
func (b *Backend) Upper(id string) (template.Upper, error) {
	if !validID(id) {
		return template.Upper{}, fmt.Errorf("%w: sandbox %s", sandbox.ErrNotFound, id)
	}
	m, err := b.readMeta(id)
	if err != nil {
		return template.Upper{}, fmt.Errorf("%w: sandbox %s", sandbox.ErrNotFound, id)
	}
	upper, _ := b.diskDirs(id, m)
	return template.Upper{Dir: upper, UIDBase: m.UIDBase, Ref: m.Template}, nil
}

// LowersInUse returns the lower directories of every sandbox on the host,
// for the template store's InUse hook.
func (b *Backend) LowersInUse() []string {
	var out []string
	for _, id := range b.dirIDs() {
		if m, err := b.readMeta(id); err == nil {
			out = append(out, m.Lower)
		}
	}
	return out
}

// TemplatesInUse counts the sandboxes on the host by the template name
// the backend was given.
func (b *Backend) TemplatesInUse() map[string]int {
	out := map[string]int{}
	for _, id := range b.dirIDs() {
		if m, err := b.readMeta(id); err == nil {
			out[m.Template]++
		}
	}
	return out
}
