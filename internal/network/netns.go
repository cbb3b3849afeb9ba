package network

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// netnsSysctls are set in every sandbox namespace (keys below
// /proc/sys/net): no IPv6, and unprivileged ICMP echo sockets for every
// group, as the container backend's spec asks for its own namespaces
// (ping works for the sandbox's users; the rules decide where it goes).
var netnsSysctls = map[string]string{
	"ipv6/conf/all/disable_ipv6":     "1",
	"ipv6/conf/default/disable_ipv6": "1",
	"ipv4/ping_group_range":          "0 2147483647",
}

// createNetns creates a network namespace with netnsSysctls applied and
// pins it as id in p. The work happens on a thread of its own
// (onOwnThread): the thread that entered the new namespace ends with it.
func createNetns(p *pins, id string) error {
	errc := make(chan error, 1)
	onOwnThread(func() {
		errc <- func() error {
			if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
				return fmt.Errorf("unshare: %w", err)
			}
			// /proc/sys/net is the calling thread's namespace's. The
			// sandbox cannot set these itself: its user namespace does
			// not own this network namespace.
			for k, v := range netnsSysctls {
				err := os.WriteFile("/proc/sys/net/"+k, []byte(v), 0)
				if err != nil && !errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("sysctl %s: %w", k, err)
				}
			}
			ns, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer unix.Close(ns)
			return p.pin(id, ns)
		}()
	})
	if err := <-errc; err != nil {
		return fmt.Errorf("create netns %s: %w", id, err)
	}
	return nil
}
