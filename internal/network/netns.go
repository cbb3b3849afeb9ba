package network

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// prepareNetnsDir makes dir a shared mount point, as `ip netns` does with
// /run/netns: namespaces bind-mounted below it are then unmounted from
// every mount namespace copied from ours (not only from ours) when a
// sandbox is torn down, so no copy keeps a namespace alive.
func prepareNetnsDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	err := unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if errors.Is(err, unix.EINVAL) { // not a mount point yet
		if err = unix.Mount(dir, dir, "none", unix.MS_BIND|unix.MS_REC, ""); err == nil {
			err = unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, "")
		}
	}
	if err != nil {
		return fmt.Errorf("make %s a shared mount: %w", dir, err)
	}
	return nil
}

// netnsSysctls are set in every sandbox namespace (keys below
// /proc/sys/net): no IPv6, and unprivileged ICMP echo sockets for every
// group, as the container backend's spec asks for its own namespaces
// (ping works for the sandbox's users; the rules decide where it goes).
var netnsSysctls = map[string]string{
	"ipv6/conf/all/disable_ipv6":     "1",
	"ipv6/conf/default/disable_ipv6": "1",
	"ipv4/ping_group_range":          "0 2147483647",
}

// createNetns creates a network namespace and pins it by bind-mounting it
// onto path (which must not exist), with netnsSysctls applied. The work
// happens on a locked OS thread that is never unlocked: the thread that
// entered the new namespace exits with its goroutine instead of going
// back to the scheduler.
func createNetns(path string) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- func() error {
			f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
			if err != nil {
				return err
			}
			f.Close()
			if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
				os.Remove(path)
				return fmt.Errorf("unshare: %w", err)
			}
			// /proc/sys/net is the calling thread's namespace's. The
			// sandbox cannot set these itself: its user namespace does
			// not own this network namespace.
			for k, v := range netnsSysctls {
				err := os.WriteFile("/proc/sys/net/"+k, []byte(v), 0)
				if err != nil && !errors.Is(err, os.ErrNotExist) {
					os.Remove(path)
					return fmt.Errorf("sysctl %s: %w", k, err)
				}
			}
			if err := unix.Mount("/proc/thread-self/ns/net", path, "none", unix.MS_BIND, ""); err != nil {
				os.Remove(path)
				return fmt.Errorf("bind-mount netns: %w", err)
			}
			return nil
		}()
	}()
	if err := <-errc; err != nil {
		return fmt.Errorf("create netns %s: %w", path, err)
	}
	return nil
}

// removeNetns unmounts and removes a pinned namespace. A missing or
// unmounted file is not an error. The namespace itself lives on while a
// process (a still running sandbox) is in it.
func removeNetns(path string) error {
	err := unix.Unmount(path, unix.MNT_DETACH)
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
