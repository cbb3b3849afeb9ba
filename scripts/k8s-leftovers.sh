#!/usr/bin/env bash
# After the Kubernetes tests: fails (and ends them, by pid) if any process they started survived:
# a binary of the lab cache ($1, e.g. etcd, kube-apiserver, kubelet, containerd), or a process
# naming one of the tests' temp dirs (/tmp/paddock-k8s-*: paddockd nodes, gateways, the control plane).
# Sandboxes left in a node's cgroup are checked by the test itself (lab cleanup).
# Usage: scripts/k8s-leftovers.sh /var/cache/paddock/k8s-v1.37.2/bin
set -uo pipefail
BIN=$(realpath "${1:?usage: k8s-leftovers.sh K8S_BIN}")
left=()
# this script and its callers (e.g. make's recipe shell, whose command line names the lab dir) are not leftovers
anc=" "; p=$$
while [ "${p:-0}" -gt 1 ]; do anc+="$p "; p=$(awk '/^PPid:/{print $2}' "/proc/$p/status" 2>/dev/null); done
for d in /proc/[0-9]*; do
  pid=${d#/proc/}
  case "$anc" in *" $pid "*) continue ;; esac
  exe=$(readlink "$d/exe" 2>/dev/null) || continue
  cmd=$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null) || continue
  case "$exe" in "$BIN"/*) left+=("$pid"); continue ;; esac
  case "$cmd" in *k8s-leftovers.sh*) continue ;; *"${TMPDIR:-/tmp}/paddock-k8s-"*) left+=("$pid") ;; esac
done
[ ${#left[@]} -eq 0 ] && exit 0
echo "processes left behind by the Kubernetes tests (ending them):" >&2
for pid in "${left[@]}"; do
  echo "  $pid: $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-200)" >&2
  kill -KILL "$pid" 2>/dev/null
done
exit 1
