#!/bin/sh
# bench-mount-copy.sh: the cost of copying a mount namespace (what every sandbox create does, twice)
# against the number of mounts in it. Runs in a scratch mount namespace.
unshare -m --propagation private sh -c '
mkdir -p /tmp/mnttest && mount -t tmpfs none /tmp/mnttest
have=0
for n in 0 1000 2500 5000; do
  while [ $have -lt $n ]; do touch /tmp/mnttest/f$have; mount --bind /tmp/mnttest/f$have /tmp/mnttest/f$have; have=$((have+1)); done
  s=$(date +%s%N); for i in $(seq 50); do unshare -m --propagation slave true; done; e=$(date +%s%N)
  echo "mounts $(wc -l < /proc/self/mountinfo): unshare -m true $(( (e-s)/50000 )) us each"
done'
rmdir /tmp/mnttest 2>/dev/null || true
