// Package container is Paddock's OCI backend. For each sandbox it builds a
// bundle under <state-dir>/containers/<id>:
//
//	disk.img   (loop disk mode) sparse ext4 image of disk_mib,
//	           loop-mounted at disk/
//	disk.img.loop  the loop device it was last attached to (for cleanup)
//	disk/upper, disk/work   the overlay's writable layer (owned by the
//	           sandbox's mapped root); in the quota disk mode (the default)
//	           they are <state-dir>/disks/<id>/upper and work instead, a
//	           subvolume of the shared disk pool (diskpool.go)
//	rootfs/    overlay of the read-only template root and disk/upper,
//	           mounted only in the sandbox's own mount namespace, never
//	           the host's (mountns.go): on the host it is an empty dir
//	config.json  the OCI runtime spec written from the request
//	agent.sock the unix socket the daemon dials; its listening fd is handed
//	           to the guest agent (PID 1) with --preserve-fds, and the path
//	           itself is never visible inside the sandbox
//	sandbox.json  what recovery needs: the uid range and template dir
//
// and runs it with an OCI runtime binary (runc by default; crun, runsc or a
// Kata shim-less runtime by configuration) as `<runtime> run --detach`.
// The runtime's state lives in <state-dir>/runtime/<name>. Cgroups are
// created by the runtime at /paddock/<id> under each controller (v1) or
// the unified hierarchy (v2).
//
// Everything is found again from those paths after a crash: List reports
// ids from the container directories, the runtime state directories and
// the cgroup trees, and Destroy tears down whatever part of a sandbox
// exists, in reverse order of creation.
package container
