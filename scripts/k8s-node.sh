#!/usr/bin/env bash
# A real one-node Kubernetes for `make k8s-node-test`: etcd + kube-apiserver + scheduler +
# controller-manager + containerd (+ the repo's runc, Debian's CNI plugins) + kubelet + kube-proxy
# (Service ClusterIPs/NodePorts, including 10.96.0.1 -> the apiserver), all inside the network
# namespace $NETNS (scripts/k8s-node/, from the k8s-lab kit), with Paddock's images built locally
# (scripts/k8s-node/images/mkimage.sh) and imported into containerd: no registry.
#   up     start it, import localhost/paddock-agent:dev and localhost/paddock:dev, wait for the node
#          and for kube-proxy's rules of the `kubernetes` Service
#   down   stop it (recorded PIDs only), remove kube-proxy's rules (kube-proxy --cleanup), delete its
#          containers, mounts, netns, cgroups and state
#   check  fail if anything of it is left (processes, netns, mounts, cgroups, state dir, KUBE-*
#          iptables chains or a kube-proxy nftables table in the host's network namespace)
# Needs root, the binaries of scripts/k8s-bin.sh (both modes) in $K8S_BIN, `make build` in $BIN_DIR,
# containernetworking-plugins, busybox-static, gcc, openssl.
# The state dir of deploy/kubernetes' DaemonSet ($LAB/state) is a shared bind mount: its volume has
# mountPropagation Bidirectional, which needs a shared mount on the host.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
export LAB=${LAB:-/tmp/paddock-k8s-node}
export BIN=${K8S_BIN:-/var/cache/paddock/k8s-v1.37.2/bin}
export NETNS=${NETNS:-paddock-k8s}
export CGROUP_NAME=${CGROUP_NAME:-paddock-k8s-node}
BIN_DIR=${BIN_DIR:-$ROOT/bin}
KUBECTL=("$BIN/kubectl" --kubeconfig "$LAB/kubeconfig")
NSX=(nsenter --net=/run/netns/"$NETNS")
# the apiserver listens on the node IP too (inside the netns) and advertises it, so the `kubernetes`
# Service's endpoints point there and kube-proxy carries 10.96.0.1:443 to it (scripts/k8s-node/up.sh)
export API_BIND=0.0.0.0 API_ADVERTISE=10.200.0.1
CLUSTER_CIDR=10.244.0.0/16   # the controller-manager's --cluster-cidr (scripts/k8s-node/up.sh)

# kube-proxy in the node's netns, in iptables mode (iptables 1.8 with the nf_tables backend) even
# where `nft` is installed: TestManifestsNestedSandbox proves connections went through kube-proxy's
# rules by their packet counters in iptables-save, and kube-proxy's nftables mode keeps none.
# conntrack maxPerCore 0 leaves the host-wide nf_conntrack_max alone; metrics/healthz on the netns'
# loopback; NodePorts on the node IP only.
kube_proxy() {
  local mode=iptables
  cat > "$LAB/node/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $LAB/kubeconfig}
hostnameOverride: lab-node
clusterCIDR: $CLUSTER_CIDR
mode: $mode
conntrack: {maxPerCore: 0, min: 0}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [10.200.0.1/32]
EOF
  "${NSX[@]}" "$BIN/kube-proxy" --config "$LAB/node/kube-proxy.yaml" > "$LAB/logs/kube-proxy.log" 2>&1 &
  echo $! > "$LAB/run/kube-proxy.pid"
}

# kube-proxy has programmed the `kubernetes` Service (10.96.0.1 -> the apiserver at the node IP)
wait_proxy() {
  local i
  for i in $(seq 1 240); do
    "${NSX[@]}" iptables-save -t nat 2>/dev/null | grep -q -- '-d 10.96.0.1/32 .*KUBE-SVC-' && return 0
    if command -v nft >/dev/null && "${NSX[@]}" nft list table ip kube-proxy 2>/dev/null | grep -q 10.96.0.1; then return 0; fi
    kill -0 "$(cat "$LAB/run/kube-proxy.pid")" 2>/dev/null || break
    sleep 0.25
  done
  echo "kube-proxy did not program 10.96.0.1; see $LAB/logs/kube-proxy.log" >&2; tail -20 "$LAB/logs/kube-proxy.log" >&2
  return 1
}

# the lab's daemons must not inherit the caller's descriptors: under `flock LOCK scripts/k8s-node.sh up`
# they would hold the lock until `down`
close_fds() {
  local fd
  for fd in /proc/$$/fd/*; do
    fd=${fd##*/}
    case $fd in 0|1|2|255) ;; *) eval "exec $fd>&-" 2>/dev/null || true ;; esac
  done
}

# KUBE-* iptables chains (either backend) or kube-proxy's nftables tables in the current netns
proxy_rules() {
  local t
  for t in iptables-nft-save iptables-legacy-save ip6tables-nft-save ip6tables-legacy-save; do
    if command -v "$t" >/dev/null; then "$t" 2>/dev/null | grep -E '^:KUBE-' | sed "s/^/$t: /" || true; fi
  done
  if command -v nft >/dev/null; then nft list tables 2>/dev/null | grep -w kube-proxy || true; fi
  return 0
}

images() {  # paddock-agent:dev (the pod backend's init container) and paddock:dev (the DaemonSet/gateway)
  local w; w=$(mktemp -d)
  mkdir -p "$w/agent" "$w/p/bin" "$w/p/usr/local/bin" "$w/p/tmp" "$w/p/etc"
  cp "$BIN_DIR/paddock-agent" "$BIN_DIR/paddock-shim" "$w/agent/"   # install copies the shim from next to the agent
  "$HERE/k8s-node/images/mkimage.sh" "$w/agent" localhost/paddock-agent:dev "$LAB/images/agent.tar" /paddock-agent >/dev/null
  # deploy/kubernetes runs /usr/local/bin/paddockd and /usr/local/bin/paddock-gateway; paddockd finds
  # paddock-agent, paddock-shim, paddock-idle and runc next to itself
  for b in paddockd paddock-gateway paddock-agent paddock-shim paddock-idle runc; do cp "$BIN_DIR/$b" "$w/p/usr/local/bin/"; done
  cp "$(command -v mkfs.ext4)" "$w/p/bin/"
  cp "$(command -v mkfs.btrfs)" "$w/p/bin/"   # the default disk mode's disk pool (--disk-mode=quota)
  cp "$(command -v busybox)" "$w/p/bin/busybox"
  for a in sh ls cat mount umount; do ln -sf busybox "$w/p/bin/$a"; done
  # shared libraries of the dynamic binaries, at their own paths (static ones, e.g. busybox, have none:
  # ldd fails and grep matches nothing, which must not end the script under set -e/pipefail)
  local l
  for b in "$w"/p/bin/* "$w"/p/usr/local/bin/*; do
    for l in $( (ldd "$b" 2>/dev/null || true) | grep -o '/[^ ]*' || true); do
      mkdir -p "$w/p$(dirname "$l")"; cp -L "$l" "$w/p$l"
    done
  done
  echo "root:x:0:0::/:/bin/sh" > "$w/p/etc/passwd"; chmod 1777 "$w/p/tmp"
  ln -s usr/local/bin/paddock-agent "$w/p/paddock-agent"   # so paddock:dev also serves as pod mode's agent image
  "$HERE/k8s-node/images/mkimage.sh" "$w/p" localhost/paddock:dev "$LAB/images/paddock.tar" /usr/local/bin/paddockd >/dev/null
  rm -rf "$w"
  for t in agent paddock; do
    "$BIN/ctr" -a "$LAB/node/containerd.sock" -n k8s.io images import "$LAB/images/$t.tar" >/dev/null
  done
}

up() {
  for b in etcd kube-apiserver kubectl kubelet kube-scheduler kube-controller-manager kube-proxy containerd containerd-shim-runc-v2 ctr; do
    [ -x "$BIN/$b" ] || { echo "$BIN/$b missing: make k8s-node-bin" >&2; exit 1; }
  done
  for b in paddockd paddock-gateway paddock-agent paddock-shim paddock-idle runc; do
    [ -x "$BIN_DIR/$b" ] || { echo "$BIN_DIR/$b missing: make build" >&2; exit 1; }
  done
  [ -x /usr/lib/cni/bridge ] || { echo "no /usr/lib/cni/bridge: apt-get install containernetworking-plugins" >&2; exit 1; }
  close_fds
  mkdir -p "$LAB/images" "$LAB/state"
  chmod 755 "$LAB"
  # a shared mount for the DaemonSet's state volume (Bidirectional propagation)
  if ! findmnt -n "$LAB/state" >/dev/null; then mount --bind "$LAB/state" "$LAB/state"; fi
  mount --make-shared "$LAB/state"
  local s; s=$(date +%s)
  # the repo's runc first: node-up.sh writes `command -v runc` into containerd's config
  PATH="$BIN_DIR:$BIN:$PATH" "$HERE/k8s-node/node-up.sh" >"$LAB/up.log" 2>&1 || { cat "$LAB/up.log" >&2; exit 1; }
  kube_proxy
  images
  "${NSX[@]}" "${KUBECTL[@]}" wait node/lab-node --for=condition=Ready --timeout=120s >/dev/null 2>&1 || {
    echo "node not Ready; see $LAB/logs/kubelet.log" >&2; tail -20 "$LAB/logs/kubelet.log" >&2; exit 1; }
  wait_proxy || exit 1
  echo "k8s node up in $(( $(date +%s) - s ))s: KUBECONFIG=$LAB/kubeconfig, clients in netns $NETNS"
}

down() {
  [ -d "$LAB" ] || return 0
  # kube-proxy first (its recorded PID: TERM, KILL after 10 s), then its rules: --cleanup removes its
  # iptables chains (and nftables tables) in the node's netns, which down.sh then deletes anyway
  local pid i left
  if [ -f "$LAB/run/kube-proxy.pid" ]; then
    pid=$(cat "$LAB/run/kube-proxy.pid")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid"
      for i in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    fi
    rm -f "$LAB/run/kube-proxy.pid"
  fi
  if [ -e "/run/netns/$NETNS" ] && [ -x "$BIN/kube-proxy" ]; then
    "${NSX[@]}" "$BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true
    # (kubelet's own chains KUBE-IPTABLES-HINT, KUBE-KUBELET-CANARY, KUBE-FIREWALL stay: not kube-proxy's)
    left=$("${NSX[@]}" bash -c "$(declare -f proxy_rules); proxy_rules" | grep -vE ':(KUBE-IPTABLES-HINT|KUBE-KUBELET-CANARY|KUBE-FIREWALL) ' || true)
    [ -z "$left" ] || echo "kube-proxy --cleanup left in netns $NETNS (deleted with it): $left" >&2
  fi
  WIPE=1 "$HERE/k8s-node/down.sh" >/dev/null 2>&1 || true
  # loop devices of sandbox disks the DaemonSet's paddockd left (a test that failed half-way)
  # (no match is the normal case: grep fails then, which must not end the script under set -e/pipefail)
  local d m
  for d in $( (losetup -a 2>/dev/null || true) | grep "$LAB/" | cut -d: -f1 || true); do losetup -d "$d" 2>/dev/null || true; done
  # the bind mount of the state dir, and whatever the DaemonSet's paddockd left under it
  for m in $(grep -E " $LAB/" /proc/mounts | awk '{print $2}' | sort -r || true); do umount -l "$m" 2>/dev/null || true; done
  rm -rf "$LAB"
  echo "k8s node down"
}

check() {
  local bad=0
  "$ROOT/scripts/k8s-leftovers.sh" "$BIN" || bad=1
  # this script and its callers (make's recipe shell names $LAB) are not leftovers
  local anc=" " p=$$
  while [ "${p:-0}" -gt 1 ]; do anc+="$p "; p=$(awk '/^PPid:/{print $2}' "/proc/$p/status" 2>/dev/null); done
  for d in /proc/[0-9]*; do
    case "$anc" in *" ${d#/proc/} "*) continue ;; esac
    case "$(tr '\0' ' ' 2>/dev/null <"$d/cmdline")" in *"$LAB/"*) echo "left: process ${d#/proc/}: $(tr '\0' ' ' <"$d/cmdline" | cut -c1-160)" >&2; bad=1 ;; esac
  done
  ip netns list | grep -qw "$NETNS" && { echo "left: netns $NETNS" >&2; bad=1; }
  # kube-proxy ran in $NETNS only (its process is one of $BIN's, caught above): no rules of it in the
  # host's netns either
  local r; r=$(proxy_rules)
  [ -n "$r" ] && { echo "left: kube-proxy rules in the host netns:" >&2; echo "$r" >&2; bad=1; }
  grep -qE " $LAB[/ ]" /proc/mounts && { echo "left: mounts under $LAB:" >&2; grep -E " $LAB[/ ]" /proc/mounts >&2; bad=1; }
  losetup -a 2>/dev/null | grep -q "$LAB/" && { echo "left: loop devices of $LAB" >&2; bad=1; }
  # the node's cgroups, and the DaemonSet paddockd's cgroup parent ($CGROUP_NAME-ds, set by the test)
  local c; c=$(find /sys/fs/cgroup -maxdepth 4 -type d -name "$CGROUP_NAME*" 2>/dev/null | head -5)
  [ -n "$c" ] && { echo "left: cgroups $c" >&2; bad=1; }
  [ -e "$LAB" ] && { echo "left: $LAB" >&2; bad=1; }
  [ "$bad" = 0 ] && echo "k8s node: nothing left"
  return $bad
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  check) check ;;
  *) echo "usage: $0 up|down|check" >&2; exit 2 ;;
esac
