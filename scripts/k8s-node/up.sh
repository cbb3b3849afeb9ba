#!/usr/bin/env bash
# (Copied from the k8s-lab kit, driven by scripts/k8s-node.sh; changed: API_BIND/API_ADVERTISE, so the
# node lab's apiserver backs the `kubernetes` Service (10.96.0.1) through kube-proxy.)
# Bring up a real Kubernetes control plane on loopback: etcd (Debian) + kube-apiserver
# [+ kube-scheduler + kube-controller-manager when WITH_CONTROLLERS=1].
# Usage: LAB=/tmp/k8slab BIN=/path/to/bin ./up.sh      (then: export KUBECONFIG=$LAB/kubeconfig)
# Stop with ./down.sh (same LAB). Only loopback addresses are used.
set -euo pipefail
LAB=${LAB:-/tmp/k8slab}
BIN=${BIN:-$LAB/bin}
ETCD_PORT=${ETCD_PORT:-22379}
ETCD_PEER_PORT=${ETCD_PEER_PORT:-22380}
API_PORT=${API_PORT:-26443}
# the apiserver's listen and advertised addresses: loopback by default; scripts/k8s-node.sh passes
# 0.0.0.0 (inside its private netns) and the node IP, so the endpoint reconciler points the
# `kubernetes` Service at the node IP (reachable from pods); with a loopback advertise address the
# reconciler refuses to start, hence `none` then
API_BIND=${API_BIND:-127.0.0.1}
API_ADVERTISE=${API_ADVERTISE:-127.0.0.1}
RECONCILER=lease; [ "$API_ADVERTISE" = 127.0.0.1 ] && RECONCILER=none
WITH_CONTROLLERS=${WITH_CONTROLLERS:-0}
NETNS=${NETNS:-}                 # optional: run everything inside this (self-made) network namespace
# nsenter (not `ip netns exec`): ip netns exec remounts /sys, which hides /sys/fs/cgroup from kubelet/runc
NSX=(); [ -n "$NETNS" ] && NSX=(nsenter --net=/run/netns/"$NETNS")
mkdir -p "$LAB"/{etcd,pki,logs,run}
t0=$(date +%s.%N)

# --- credentials (idempotent) ---
if [ ! -f "$LAB/pki/sa.key" ]; then
  openssl genrsa -out "$LAB/pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$LAB/pki/sa.key" -pubout -out "$LAB/pki/sa.pub" 2>/dev/null
fi
if [ ! -f "$LAB/pki/tokens.csv" ]; then
  TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
  # token,user,uid,"groups"
  echo "$TOKEN,admin,admin,\"system:masters\"" > "$LAB/pki/tokens.csv"
fi
TOKEN=$(cut -d, -f1 "$LAB/pki/tokens.csv")
# a tiny CA + serving cert, so clients (and kube-root-ca.crt in every namespace) get a real CA
if [ ! -f "$LAB/pki/apiserver.crt" ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=k8s-lab-ca \
    -keyout "$LAB/pki/ca.key" -out "$LAB/pki/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver \
    -keyout "$LAB/pki/apiserver.key" -out "$LAB/pki/apiserver.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,IP:10.96.0.1,IP:10.200.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' > "$LAB/pki/san.ext"
  openssl x509 -req -in "$LAB/pki/apiserver.csr" -CA "$LAB/pki/ca.crt" -CAkey "$LAB/pki/ca.key" \
    -CAcreateserial -days 3650 -extfile "$LAB/pki/san.ext" -out "$LAB/pki/apiserver.crt" 2>/dev/null
fi
CA_DATA=$(base64 -w0 < "$LAB/pki/ca.crt")
cat > "$LAB/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $CA_DATA
users:
- name: admin
  user:
    token: $TOKEN
contexts:
- name: lab
  context: {cluster: lab, user: admin}
current-context: lab
EOF

# --- etcd: $BIN/etcd (3.7.3 from build-extras.sh) if present, else Debian etcd-server 3.4 ---
ETCD=${ETCD:-$( [ -x "$BIN/etcd" ] && echo "$BIN/etcd" || command -v etcd)}   # built etcd 3.7 if present, else Debian 3.4
"${NSX[@]}" "$ETCD" --name lab --data-dir "$LAB/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "lab=http://127.0.0.1:$ETCD_PEER_PORT" \
  --quota-backend-bytes 1073741824 --unsafe-no-fsync \
  > "$LAB/logs/etcd.log" 2>&1 &
echo $! > "$LAB/run/etcd.pid"

# --- kube-apiserver (built from k8s.io/kubernetes as a library, see build.sh) ---
"${NSX[@]}" "$BIN/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
  --bind-address "$API_BIND" --advertise-address "$API_ADVERTISE" --secure-port "$API_PORT" \
  --tls-cert-file "$LAB/pki/apiserver.crt" --tls-private-key-file "$LAB/pki/apiserver.key" \
  --client-ca-file "$LAB/pki/ca.crt" \
  --token-auth-file "$LAB/pki/tokens.csv" \
  --authorization-mode Node,RBAC \
  --service-account-key-file "$LAB/pki/sa.pub" \
  --service-account-signing-key-file "$LAB/pki/sa.key" \
  --service-account-issuer https://kubernetes.default.svc \
  --service-cluster-ip-range 10.96.0.0/16 \
  --allow-privileged=true \
  --endpoint-reconciler-type "$RECONCILER" \
  --kubelet-preferred-address-types InternalIP \
  --enable-priority-and-fairness=false \
  --profiling=false \
  > "$LAB/logs/kube-apiserver.log" 2>&1 &
echo $! > "$LAB/run/kube-apiserver.pid"

# wait for /readyz (60 s at most)
ready=0
for i in $(seq 1 240); do
  if "${NSX[@]}" curl -s --cacert "$LAB/pki/ca.crt" -H "Authorization: Bearer $TOKEN" "https://127.0.0.1:$API_PORT/readyz" 2>/dev/null | grep -qx ok; then ready=1; break; fi
  if ! kill -0 "$(cat "$LAB/run/kube-apiserver.pid")" 2>/dev/null; then echo "kube-apiserver died; see $LAB/logs/kube-apiserver.log" >&2; tail -20 "$LAB/logs/kube-apiserver.log" >&2; exit 1; fi
  sleep 0.25
done
[ "$ready" = 1 ] || { echo "kube-apiserver not ready after 60 s; see $LAB/logs/kube-apiserver.log" >&2; exit 1; }
t1=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" -v k="$LAB/kubeconfig" 'BEGIN{printf "apiserver ready in %.1fs (KUBECONFIG=%s)\n", b-a, k}'

if [ "$WITH_CONTROLLERS" = 1 ]; then
  "${NSX[@]}" "$BIN/kube-scheduler" --kubeconfig "$LAB/kubeconfig" --authentication-kubeconfig "$LAB/kubeconfig" \
    --authorization-kubeconfig "$LAB/kubeconfig" --leader-elect=false \
    --bind-address 127.0.0.1 --secure-port 0 \
    > "$LAB/logs/kube-scheduler.log" 2>&1 &
  echo $! > "$LAB/run/kube-scheduler.pid"
  "${NSX[@]}" "$BIN/kube-controller-manager" --kubeconfig "$LAB/kubeconfig" --authentication-kubeconfig "$LAB/kubeconfig" \
    --authorization-kubeconfig "$LAB/kubeconfig" --leader-elect=false \
    --bind-address 127.0.0.1 --secure-port 0 \
    --service-account-private-key-file "$LAB/pki/sa.key" --use-service-account-credentials=false \
    --root-ca-file "$LAB/pki/ca.crt" \
    --cluster-cidr 10.244.0.0/16 --service-cluster-ip-range 10.96.0.0/16 \
    > "$LAB/logs/kube-controller-manager.log" 2>&1 &
  echo $! > "$LAB/run/kube-controller-manager.pid"
  sleep 2
  for c in kube-scheduler kube-controller-manager; do
    kill -0 "$(cat "$LAB/run/$c.pid")" 2>/dev/null || { echo "$c died; see $LAB/logs/$c.log" >&2; tail -5 "$LAB/logs/$c.log" >&2; exit 1; }
  done
  echo "scheduler + controller-manager started"
fi
