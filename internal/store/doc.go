// Package store is Paddock's crash-safe persistent state: the sandbox,
// secret and meta records in an embedded bbolt database, the API keys,
// and the one way every daemon package writes a state file
// (WriteFileAtomic) or publishes a finished directory (PublishDir). This
// comment is the map of everything paddockd keeps, inside its state
// directory and outside it, with the package that owns each piece and what
// happens to it after a crash or kill -9.
//
// # The database
//
// <state-dir>/paddock.db (0600, bbolt; an exclusive flock, so a second
// daemon on the same state directory refuses to start). Single-record
// writes are group-committed (group.go): writes that arrive while a
// transaction commits share the next one, and each returns only once its
// transaction is on disk.
//
//	bucket "meta"       key "schema"          → "1"
//	                    key "port-token-key"  → the 32-byte HMAC key of
//	                    signed port URLs (PortKey; moved here from
//	                    <state-dir>/port-token.key, which PortKey reads once
//	                    and deletes)
//	bucket "sandboxes"  key <id>              → JSON Record (manager)
//	bucket "secrets"    key <key-id>/<name>   → JSON SecretRecord (server,
//	                    manager; the value in clear: the database is 0600
//	                    and only root reads it)
//
// Every write is one fsynced transaction, so a crash leaves the last
// committed state. Recovery (manager.Recover) reconciles the records with
// the host: a record still "creating" is destroyed, a live one past its
// lease is ended (or paused, if it asked for that), a live one whose
// sandbox is gone is marked stopped, a live one that runs is re-adopted,
// and a sandbox on the host without a live record is destroyed.
//
// # Files and directories under the state directory
//
// <state-dir> (default /var/lib/paddock, 0711) holds, by owner:
//
//	keys/<key-id>.json         store (Keys): one KeyRecord per API key, 0600,
//	                           the SHA-256 of the secret, never the secret.
//	                           Written by `paddockd keys create`, another
//	                           process, while the daemon holds the database
//	                           lock: that is why keys are files and not a
//	                           bucket. The daemon re-reads the directory when
//	                           its mtime changes.
//	templates.json             template/catalog: names, tags and
//	                           owners of templates → template-store images,
//	                           and the build cache. Unreadable JSON stops the
//	                           daemon; a shared template whose configuration
//	                           changed or whose image is gone is re-imported
//	                           at start.
//	egress-ca.pem, egress-ca-key.pem
//	                           egress: the per-daemon CA (0644, 0600) the
//	                           proxy signs leaf certificates with. The key is
//	                           written first; both present → loaded, neither →
//	                           a new CA, only one → networking stays off (an
//	                           error in the log) rather than replace a CA
//	                           sandboxes trust.
//	network/<id>.json          network: a sandbox's /30 lease and egress
//	                           policy. network.New reloads every readable
//	                           lease and rebuilds the nftables table from them;
//	                           manager.Recover then tears down the leases of
//	                           sandboxes it did not re-adopt.
//	netns/                     network: a shared bind mount of itself, holding
//	netns/<id>                 a bind mount (nsfs) pinning each networked
//	                           sandbox's namespace. Kept for re-adopted
//	                           sandboxes, unmounted and removed on teardown;
//	                           the directory's own mount is released at
//	                           shutdown when it is empty.
//	containers/<id>/           backend/container: the sandbox bundle.
//	    sandbox.json           slot (uid range), runtime and template lower
//	                           dirs; read at start to re-reserve the slot and
//	                           keep the template dirs from GC.
//	    config.json            the OCI runtime spec, read by the runtime at
//	                           create only.
//	    disk.img, disk/        --disk-mode=loop only: sparse ext4 image,
//	                           loop-mounted at disk/, with disk/upper and
//	                           disk/work, the overlay's writable layer.
//	    rootfs/                the overlay mount the sandbox runs in.
//	    l/<n>/                 id-mapped bind mounts of template-store layers
//	                           (templates other than base).
//	    agent.sock, init.pid, runtime.log
//	                           the agent's socket, the runtime's pid file and
//	                           log.
//	                           A bundle is destroyed, whatever part of it
//	                           exists, when recovery does not re-adopt it.
//	                           A stopped sandbox's bundle is only sandbox.json
//	                           (and disk.img in loop mode; its slot stays
//	                           reserved);
//	                           recovery keeps it, tidying leftovers of an
//	                           interrupted stop or start, and the reaper
//	                           deletes it past its retention.
//	disks.img, disks.img.loop  backend/container, --disk-mode=quota: the disk
//	                           pool, a sparse btrfs image made at first start
//	                           (--disk-pool-mib), loop-mounted (one device) at
//	                           disks/; the loop device it was attached to.
//	disks/<id>/                a sandbox's disk: a btrfs subvolume with
//	                           upper/ and work/, its quota group limited to
//	                           disk_mib. Destroy deletes it before the bundle,
//	                           so recovery finds an interrupted delete; at
//	                           start, subvolumes without a bundle are
//	                           deleted. The pool is unmounted at shutdown
//	                           when no sandbox is left, never mounted twice.
//	runtime/<runtime>/<id>/    the OCI runtime's own state (runc, crun:
//	                           state.json), under --root; the backend asks the
//	                           runtime, never reads it.
//	templates/base-<hash>/, templates/paddock-<hash>/
//	                           backend/container: the embedded base root and
//	                           the layer with the agent, each rootfs/ plus a
//	                           ready marker, named by a hash of their content.
//	                           Built in <dir>.tmp and published with
//	                           PublishDir; one without ready is rebuilt; ones
//	                           no sandbox uses and not current are removed at
//	                           start.
//	images/                    template: the image store (its package doc has
//	                           the details): lock (flock), store.json,
//	                           layers/sha256/<hex>/{rootfs/,layer.json,ready},
//	                           images/<name>.json, tmp/. tmp/ is emptied at
//	                           start, a layer without ready or with a bad
//	                           layer.json is removed, an unreadable image file
//	                           is skipped.
//	import/                    cmd/paddockd: the default directory API
//	                           requests may import oci_layout and tarball
//	                           template sources from; the operator's, never
//	                           written by the daemon.
//
// Every file above is written with WriteFileAtomic (temp file in the same
// directory, fsync, rename, fsync of the directory; its mode set before
// the first byte), so a crash leaves the old or the new content. A crash
// can leave a temp file (".tmp-*"); readers skip dot files and the owner
// removes them at start with CleanTemps (the state directory's top level
// and keys/, store, once a minute old; network/, network; images/ and
// images/images/, template). config.json
// and the bundle's other files are created once, inside a bundle that
// recovery destroys if its create did not finish.
//
// Guest-side and client-side writes are not daemon state and do not use
// this package: the agent's file writes (internal/agent/files.go, inside
// the sandbox) and `paddock cp` (cmd/paddock/cp.go, on the user's
// machine) have their own temp-and-rename.
//
// # Outside the state directory
//
//	cgroups                    the runtime creates <parent>/<id> under each
//	                           controller (v1) or the unified hierarchy (v2);
//	                           <parent> is "paddock", or "paddock-<hash of the
//	                           state dir>" for another state dir.
//	                           backend/container lists ids from them and
//	                           Destroy kills and removes them.
//	mounts                     the loop ext4, overlay and id-mapped mounts of
//	                           each bundle, and the netns bind mounts: Destroy
//	                           unmounts everything under a bundle (from
//	                           /proc/self/mountinfo); network teardown
//	                           unmounts netns/<id>.
//	loop devices               one for the disk pool; in loop mode one per
//	                           sandbox, backed by its disk.img;
//	                           Destroy detaches every loop device whose
//	                           backing file is in the bundle.
//	nftables table             inet <parent> (network.Config.Table), owned by
//	                           network: rebuilt from the leases at start,
//	                           removed at shutdown when no networked sandbox
//	                           is left.
//	veth pairs                 network: host side "pd" + 10 hex digits of a
//	                           hash of table and id (alias
//	                           "paddock:<table>:<id>"), so a restarted daemon
//	                           finds it again; deleted on teardown.
//	net.ipv4.ip_forward        network sets it to 1 (host-wide; see its doc).
package store
