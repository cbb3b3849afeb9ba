#!/usr/bin/env bash
# (Copied unchanged from the k8s-lab kit; driven by scripts/k8s-node.sh.)
# Stop what up.sh / node-up.sh started (by the PIDs they recorded, nothing else), remove the
# pods' containers, the network namespace and the cgroups the node made. WIPE=1 also deletes state.
LAB=${LAB:-/tmp/k8slab}
BIN=${BIN:-$LAB/bin}
stop() {  # stop one recorded PID: TERM, wait up to 10 s, then KILL
  local f="$LAB/run/$1.pid" pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  fi
  rm -f "$f"
}
stop kubelet
# containers live in shims that outlive containerd: delete them through containerd first
SOCK="$LAB/node/containerd.sock"
if [ -S "$SOCK" ] && [ -f "$LAB/run/containerd.pid" ]; then
  CTR=("$BIN/ctr" -a "$SOCK" -n k8s.io)
  for id in $("${CTR[@]}" tasks ls -q 2>/dev/null); do "${CTR[@]}" tasks kill -s SIGKILL "$id" >/dev/null 2>&1; done
  sleep 1
  for id in $("${CTR[@]}" tasks ls -q 2>/dev/null); do "${CTR[@]}" tasks delete -f "$id" >/dev/null 2>&1; done
  for id in $("${CTR[@]}" containers ls -q 2>/dev/null); do "${CTR[@]}" containers delete "$id" >/dev/null 2>&1; done
fi
for c in kwok containerd kube-controller-manager kube-scheduler kube-apiserver etcd; do stop "$c"; done
# mounts the node left (pod volumes, overlay snapshots, pinned netns files)
grep -E " $LAB/" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
if [ -f "$LAB/run/netns" ]; then ip netns del "$(cat "$LAB/run/netns")" 2>/dev/null; rm -f "$LAB/run/netns"; fi
# cgroups: what kubelet made below our root, then the dirs node-up.sh made (deepest first)
if [ -f "$LAB/run/cgroup-root" ]; then
  R=$(cat "$LAB/run/cgroup-root")
  for h in /sys/fs/cgroup/*/; do
    [ -d "${h%/}$R" ] && find "${h%/}$R" -mindepth 1 -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  [ -f "$LAB/run/cgroup-created" ] && sort -r "$LAB/run/cgroup-created" | while read -r d; do rmdir "$d" 2>/dev/null; done
  rm -f "$LAB/run/cgroup-root" "$LAB/run/cgroup-created"
fi
if [ "${WIPE:-0}" = 1 ]; then
  rm -rf "$LAB/etcd" "$LAB/logs" "$LAB/run" "$LAB/node/containerd" "$LAB/node/kubelet"
fi
echo stopped
