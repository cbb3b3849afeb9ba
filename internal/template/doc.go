// Package template turns image sources into read-only root directories
// that can be stacked as overlayfs lower layers. It knows nothing of HTTP
// routes, sandboxes or the manager: a caller asks a Store to Pull a named
// image from a Source and later reads back the Image, whose LowerDirs are
// ready for "lowerdir=" (top layer first) and whose Config carries the
// image's Env, WorkingDir, User, Cmd and Entrypoint.
//
// # Sources
//
//   - Registry: an OCI or Docker image reference, fetched with
//     go-containerregistry's remote package; credentials come from the
//     usual Docker config file (authn.DefaultKeychain). Plain HTTP is
//     allowed only for loopback registries (127.0.0.0/8, ::1, localhost):
//     every request goes through a transport that refuses http:// to any
//     other host, so a private-range registry must speak TLS. Only the
//     registries Config.Registries (a RegistryPolicy) admits are dialled,
//     at addresses the daemon resolved and checked itself, and every
//     failure reaching one is the single ErrRegistry, without upstream
//     text.
//   - Layout: an OCI image layout directory on disk. Paths named by API
//     requests go through ImportPath first: one ErrImportPath for any
//     path outside the operator's import directories.
//   - Tarball: a `docker save` tarball on disk.
//   - Dir: a plain root directory, either used in place as the only lower
//     layer (trusted, not inspected) or copied into the store through the
//     same safe unpacker as image layers.
//
// # On-disk layout
//
//	<root>/lock                  flock held by the open Store (one per root)
//	<root>/store.json            format version and the uid/gid shift
//	<root>/layers/sha256/<hex>/  one directory per layer, named by diff_id
//	    rootfs/                  the unpacked layer, an overlay lower dir
//	    layer.json               size charged to the budget, entries, warnings
//	    ready                    written last; its mtime is the last use
//	<root>/images/<name>.json    one Image per name; survives restarts
//	<root>/tmp/                  layers being unpacked; emptied by Open
//
// A layer is unpacked into tmp/ and renamed into layers/ only once it is
// complete and its content hashed to the diff_id the image config names,
// so layers/ holds only finished, verified layers, shared by every image
// that names the same diff_id. Deleting an image only drops its name;
// GC removes layers no image (and no InUse directory) references, and a
// pull that would exceed the disk budget first evicts unreferenced layers,
// least recently used first, then fails with ErrBudget.
//
// # Safety rules for layers
//
// Layer tarballs are untrusted. The unpacker:
//
//   - refuses entries with absolute names or names that climb out with
//     "..", and names or link targets longer than Limits.PathLen;
//   - creates every entry relative to a directory file descriptor opened
//     with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_XDEV), so
//     no symlink is ever followed while unpacking: a symlink is stored as a
//     symlink, and an entry that would be written through one is refused;
//   - allows hard links only to entries already unpacked in the same layer;
//   - skips character and block devices (recording a warning), keeps FIFOs,
//     strips setuid and setgid bits, and applies no extended attributes from
//     the tarball (so no file capabilities and no forged overlay xattrs);
//   - converts ".wh.<name>" entries to overlayfs whiteouts (a 0/0 character
//     device, the only device node it ever creates) and ".wh..wh..opq" to
//     the trusted.overlay.opaque=y xattr on the directory;
//   - bounds each layer: Limits.LayerBytes of file content (each header's
//     size is checked before anything is written, so a 10 GB sparse entry
//     is refused after reading one header), Limits.Entries entries, and the
//     raw stream length; an image may have at most Limits.Layers layers;
//   - verifies the sha256 of the uncompressed stream against the diff_id.
//
// # Ownership
//
// An entry owned by uid u (gid g) in a layer is owned by UIDBase+u
// (GIDBase+g) on the host; ids at or above IDRange become the overflow id
// 65534 first. The default base 0 keeps the image's ids: root-owned files
// stay owned by host root, which every sandbox (its root mapped to its own
// unprivileged host range) sees as nobody. That is the safe default, since
// no sandbox owns the shared layers, but it is less compatible: sandbox
// root cannot chmod, chown or (for modes like 0700) even read such files,
// and writes to them need "other" write permission. Setting UIDBase and
// GIDBase to a sandbox range makes the image's root that range's root, which
// suits a host whose sandboxes all share one range; per-sandbox ranges
// need an idmapped mount of the layers instead. The shift is fixed when a
// root is first opened and recorded in store.json.
package template
