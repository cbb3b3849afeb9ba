#!/usr/bin/env bash
# The Kubernetes binaries `make k8s-test` needs (etcd, kube-apiserver, kubectl), built from the Go module
# proxy into a cache keyed by version, only when missing: a cold build is ~12 min on 2 cores
# (kube-apiserver), a cache hit is instant. The modules are pinned in scripts/k8s-bin/{kbin,etcdbin}
# (k8s.io/kubernetes as a library, as in the k8s-lab kit).
# K8S_NODE=1 builds the real node's binaries instead (`make k8s-node-test`): kubelet, kube-scheduler,
# kube-controller-manager (same module, ~5 min after kube-apiserver), kube-proxy (46 s after those) and
# containerd + its runc shim + ctr (CONTAINERD_VERSION, ~2.5 min), into the same cache.
# Usage: K8S_VERSION=v1.37.2 K8S_BIN=/var/cache/paddock/k8s-v1.37.2/bin [K8S_NODE=1] scripts/k8s-bin.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)/k8s-bin
K8S_VERSION=${K8S_VERSION:-v1.37.2}
K8S_BIN=${K8S_BIN:-/var/cache/paddock/k8s-$K8S_VERSION/bin}
KVER=${K8S_VERSION#v}
grep -q "k8s.io/kubernetes $K8S_VERSION" "$HERE/kbin/go.mod" || { echo "scripts/k8s-bin/kbin pins another k8s.io/kubernetes than $K8S_VERSION" >&2; exit 1; }
export GOFLAGS="${GOFLAGS:--p=1 -buildvcs=false}"   # shared 2-core machines: one package at a time (~3 GB peak RSS)
mkdir -p "$K8S_BIN"
LDFLAGS="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LDFLAGS+=" -X $pkg.gitVersion=v$KVER -X $pkg.gitMajor=${KVER%%.*} -X $pkg.gitMinor=$(echo "$KVER" | cut -d. -f2)"
  LDFLAGS+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
if [ "${K8S_NODE:-0}" = 1 ]; then
  for t in containerd containerd-shim-runc-v2 ctr; do
    [ -x "$K8S_BIN/$t" ] && continue
    s=$(date +%s); tmp=$(mktemp -d "$K8S_BIN/.containerd.XXXXXX")
    # static (CGO off); the btrfs/devmapper/zfs snapshotters need cgo and are not used
    CGO_ENABLED=0 GOBIN="$tmp" go install -tags "no_btrfs no_devmapper no_zfs no_tracing" \
      -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" \
      "github.com/containerd/containerd/v2/cmd/$t@$CONTAINERD_VERSION"
    mv "$tmp/$t" "$K8S_BIN/$t"; rmdir "$tmp"
    echo "built $t $CONTAINERD_VERSION in $(( $(date +%s) - s ))s"
  done
  TARGETS="kubelet kube-scheduler kube-controller-manager kube-proxy"
else
  # kubectl is for TestManifests (kubectl apply -k deploy/kubernetes), ~1 min after kube-apiserver
  TARGETS="kube-apiserver kubectl"
fi
for t in $TARGETS; do
  [ -x "$K8S_BIN/$t" ] && continue
  s=$(date +%s)
  (cd "$HERE/kbin" && go build -ldflags "$LDFLAGS" -o "$K8S_BIN/$t.tmp" "./cmd/$t")
  mv "$K8S_BIN/$t.tmp" "$K8S_BIN/$t"
  echo "built $t in $(( $(date +%s) - s ))s"
done
if [ "${K8S_NODE:-0}" != 1 ] && [ ! -x "$K8S_BIN/etcd" ]; then
  s=$(date +%s)
  (cd "$HERE/etcdbin" && go build -ldflags "-s -w" -o "$K8S_BIN/etcd.tmp" .)
  mv "$K8S_BIN/etcd.tmp" "$K8S_BIN/etcd"
  echo "built etcd in $(( $(date +%s) - s ))s"
fi
