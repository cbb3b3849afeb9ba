#!/usr/bin/env bash
# (Copied unchanged from the k8s-lab kit; driven by scripts/k8s-node.sh.)
# A whole one-node cluster inside a self-made network namespace: etcd + kube-apiserver +
# scheduler + controller-manager + containerd (+runc, Debian CNI plugins) + kubelet,
# with locally built images (no registry). Everything listens/talks inside netns $NETNS only.
# Usage: LAB=/tmp/k8slab BIN=$LAB/bin ./node-up.sh ; then: ip netns exec k8slab kubectl ...
# Needs: root, apt packages etcd-server runc containernetworking-plugins busybox-static gcc,
#        binaries from build.sh (kube-apiserver kube-scheduler kube-controller-manager kubelet)
#        and build-containerd.sh (containerd containerd-shim-runc-v2 ctr) in $BIN.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
export LAB=${LAB:-/tmp/k8slab}
export BIN=${BIN:-$LAB/bin}
export NETNS=${NETNS:-k8slab}
NODE=${NODE:-lab-node}
N=$LAB/node
mkdir -p "$N"/{containerd/root,containerd/state,cni,kubelet,images} "$LAB"/{logs,run}
NSX=(nsenter --net=/run/netns/"$NETNS")   # not `ip netns exec`: it remounts /sys and hides the cgroup mounts

# --- network namespace with a node address (veth pair, both ends inside the namespace) ---
if ! ip netns list | grep -qw "$NETNS"; then
  ip netns add "$NETNS"
  ip -n "$NETNS" link set lo up
  ip -n "$NETNS" link add lab0 type veth peer name lab1
  ip -n "$NETNS" addr add 10.200.0.1/24 dev lab0
  ip -n "$NETNS" link set lab0 up; ip -n "$NETNS" link set lab1 up
  ip -n "$NETNS" route add default dev lab0
fi
echo "$NETNS" > "$LAB/run/netns"

# --- control plane (same netns) ---
WITH_CONTROLLERS=1 "$HERE/up.sh"

# --- CNI: bridge + host-local IPAM, pod CIDR 10.244.0.0/24, all inside the netns ---
cat > "$N/cni/10-lab.conflist" <<EOF
{"cniVersion":"1.0.0","name":"lab","plugins":[
 {"type":"bridge","bridge":"cni0","isGateway":true,"ipMasq":false,"hairpinMode":true,
  "ipam":{"type":"host-local","ranges":[[{"subnet":"10.244.0.0/24"}]],"routes":[{"dst":"0.0.0.0/0"}]}},
 {"type":"portmap","capabilities":{"portMappings":true}}]}
EOF

# --- containerd 2.x ---
cat > "$N/containerd.toml" <<EOF
version = 3
root = "$N/containerd/root"
state = "$N/containerd/state"
[grpc]
  address = "$N/containerd.sock"
[ttrpc]
  address = "$N/containerd.sock.ttrpc"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "localhost/pause:lab"
[plugins."io.containerd.cri.v1.runtime"]
  # this sandbox lacks CAP_SYS_RESOURCE: kubelet asks oom_score_adj -998 for pod sandboxes and runc
  # then fails with "can't get final child's PID from pipe: EOF". Clamp to containerd's own value.
  restrict_oom_score_adj = true
  # pod network namespaces under our state dir, not the host-wide /run/netns
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$N/cni"
[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
EOF
PATH="$BIN:$PATH" "${NSX[@]}" "$BIN/containerd" --config "$N/containerd.toml" > "$LAB/logs/containerd.log" 2>&1 &
echo $! > "$LAB/run/containerd.pid"
for i in $(seq 1 80); do [ -S "$N/containerd.sock" ] && break; sleep 0.25; done

# --- local images: pause (sandbox) + busybox, made from local files, imported without a registry ---
if [ ! -f "$N/images/pause.tar" ]; then
  W=$(mktemp -d); mkdir -p "$W/pause" "$W/bb/bin" "$W/bb/www"
  gcc -static -Os -o "$W/pause/pause" "$HERE/images/pause.c"; strip "$W/pause/pause"
  cp "$(command -v busybox)" "$W/bb/bin/busybox"
  for a in sh httpd sleep ls cat echo wget ip hostname; do ln -s busybox "$W/bb/bin/$a"; done
  echo hello-from-a-pod > "$W/bb/www/index.html"
  "$HERE/images/mkimage.sh" "$W/pause" localhost/pause:lab "$N/images/pause.tar" /pause
  "$HERE/images/mkimage.sh" "$W/bb" localhost/busybox:lab "$N/images/busybox.tar" /bin/busybox
  rm -rf "$W"
fi
for t in pause busybox; do
  "$BIN/ctr" -a "$N/containerd.sock" -n k8s.io images import "$N/images/$t.tar" >/dev/null
done

# --- cgroups (v1 hybrid here): nest everything under our own memory cgroup, so pods are
# accounted to whoever runs this, and make the same path in the other v1 hierarchies ---
MEMCG=$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup); MEMCG=${MEMCG%/}
CGROOT="$MEMCG/${CGROUP_NAME:-k8slab}"
: > "$LAB/run/cgroup-created"      # every dir made here, so down.sh removes exactly those
for h in /sys/fs/cgroup/*/; do
  h=${h%/}
  [ -e "$h/cgroup.procs" ] || continue
  p=""; for part in ${CGROOT//\// }; do
    parent="$h$p"; p="$p/$part"
    if [ ! -d "$h$p" ]; then
      mkdir "$h$p"; echo "$h$p" >> "$LAB/run/cgroup-created"
      if [ -f "$h$p/cpuset.cpus" ]; then cat "$parent/cpuset.cpus" > "$h$p/cpuset.cpus"; cat "$parent/cpuset.mems" > "$h$p/cpuset.mems"; fi
    fi
  done
done
echo "$CGROOT" > "$LAB/run/cgroup-root"

# --- kubelet ---
cat > "$N/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$N/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: $CGROOT
failCgroupV1: false          # this host is cgroup v1 (hybrid); kubelet >=1.35 refuses v1 otherwise
failSwapOn: false
address: 10.200.0.1
readOnlyPort: 0
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}   # private netns only
authorization: {mode: AlwaysAllow}
podCIDR: 10.244.0.0/24
clusterDNS: []
resolvConf: /etc/resolv.conf
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
enforceNodeAllocatable: []
protectKernelDefaults: false
registerNode: true
EOF
"${NSX[@]}" "$BIN/kubelet" --config "$N/kubelet.yaml" --kubeconfig "$LAB/kubeconfig" \
  --root-dir "$N/kubelet" --cert-dir "$N/kubelet/pki" \
  --hostname-override "$NODE" --node-ip 10.200.0.1 \
  > "$LAB/logs/kubelet.log" 2>&1 &
echo $! > "$LAB/run/kubelet.pid"
echo "kubelet started; wait with: ip netns exec $NETNS kubectl --kubeconfig $LAB/kubeconfig wait node/$NODE --for=condition=Ready --timeout=120s"
