#!/usr/bin/env bash
# (Copied unchanged from the k8s-lab kit; driven by scripts/k8s-node.sh.)
# Build an OCI image archive (importable with `ctr -n k8s.io images import`) from a rootfs dir,
# with no registry and no extra tools: tar + sha256sum + printf.
# Usage: mkimage.sh ROOTFS_DIR IMAGE_REF OUT.tar ENTRYPOINT [ARGS...]
set -euo pipefail
ROOT=$1 REF=$2 OUT=$3; shift 3
ep=$(printf '"%s",' "$@"); ep="[${ep%,}]"
W=$(mktemp -d); mkdir -p "$W/blobs/sha256"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$ROOT" -cf "$W/layer.tar" .
L=$(sha256sum "$W/layer.tar" | cut -d' ' -f1); LS=$(stat -c %s "$W/layer.tar"); mv "$W/layer.tar" "$W/blobs/sha256/$L"
printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":%s,"Env":["PATH=/bin:/usr/bin:/sbin"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$ep" "$L" > "$W/c.json"
C=$(sha256sum "$W/c.json" | cut -d' ' -f1); CS=$(stat -c %s "$W/c.json"); mv "$W/c.json" "$W/blobs/sha256/$C"
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' "$C" "$CS" "$L" "$LS" > "$W/m.json"
M=$(sha256sum "$W/m.json" | cut -d' ' -f1); MS=$(stat -c %s "$W/m.json"); mv "$W/m.json" "$W/blobs/sha256/$M"
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' "$M" "$MS" "$REF" "$REF" > "$W/index.json"
echo '{"imageLayoutVersion":"1.0.0"}' > "$W/oci-layout"
tar --sort=name --mtime=@0 -C "$W" -cf "$OUT" oci-layout index.json blobs
rm -rf "$W"
echo "$OUT: $REF (manifest sha256:$M)"
