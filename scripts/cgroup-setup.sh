#!/bin/sh
# On a cgroup v1 "hybrid" host, controllers left on the unified (v2)
# hierarchy make crun refuse to start containers ("cgroups in hybrid mode
# not supported"). Bind each such controller to a v1 hierarchy, which is
# possible while no v2 cgroup uses it. runc does not need this.
set -eu
[ -f /sys/fs/cgroup/cgroup.controllers ] && exit 0          # pure v2: nothing to do
[ -f /sys/fs/cgroup/unified/cgroup.controllers ] || exit 0  # pure v1
for c in $(cat /sys/fs/cgroup/unified/cgroup.controllers); do
	mkdir -p "/sys/fs/cgroup/$c"
	mountpoint -q "/sys/fs/cgroup/$c" || mount -t cgroup -o "$c" cgroup "/sys/fs/cgroup/$c" ||
		echo "cgroup-setup: could not move $c to v1; crun may refuse this host" >&2
done
