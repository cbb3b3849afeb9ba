package container

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// A sandbox's root (its overlay and, for image templates, the idmapped
// layer mounts under it) is never mounted in the host's mount namespace.
// boot mounts it on a thread of its own that first moved into a new,
// private mount namespace (a copy of the host's whose mounts receive the
// host's changes but send none back), and runs the OCI runtime from that
// thread: the runtime, its container and (under gVisor) its gofer are
// forked there, so they see the root, and the container's own mount
// namespace, copied from it, keeps the root mounted for as long as the
// sandbox lives. The thread ends with boot, and with it that namespace.
//
// So each create and delete changes nothing in the host's mount table,
// which is what the host's init (systemd re-reads the whole table on
// every change) and every other watcher of mountinfo would otherwise pay
// for, once per sandbox, in proportion to the number of sandboxes: at a
// few thousand sandboxes that was most of the host's CPU. It also makes a
// crash leave nothing mounted: the root goes away with the last process
// of the sandbox, whoever kills it. The daemon reaches a sandbox's files
// only through its agent and its upper directory (on the host), never
// through the merged root, so it needs no view of it.
//
// What stays on the host: the disk pool (one mount for every sandbox),
// a loop disk's mount in the loop disk mode, and the pin of the network
// package's pin namespace (one mount, <state>/netns.mnt).

// inPrivateMounts runs fn on a locked OS thread in a new mount namespace
// in which no mount propagates to the host (every mount of the copy is
// made a slave). The thread is never handed back to the Go scheduler:
// it exits when fn returns, and its namespace is freed once no process
// forked from it (the runtime's container) holds it.
func inPrivateMounts(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if unix.Gettid() == unix.Getpid() {
			// The main thread never exits (Go parks it instead): it
			// would keep the namespace, and be the process's view in
			// /proc/self. Holding it makes the retry run on another.
			err := inPrivateMounts(fn)
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			errc <- fmt.Errorf("private mount namespace: %w", err)
			return
		}
		// A copy of a shared mount stays in its peer group: without
		// this, a mount made here would appear on the host too.
		if err := unix.Mount("", "/", "", unix.MS_SLAVE|unix.MS_REC, ""); err != nil {
			errc <- fmt.Errorf("private mount namespace: make / a slave: %w", err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}
