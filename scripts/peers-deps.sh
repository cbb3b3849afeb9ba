#!/bin/sh
# Installs what `make bench-peers` compares Paddock with: podman and
# bubblewrap, from Debian's packages, when they are missing (as root).
# Nothing else is fetched: the podman image the benchmark uses is built
# locally from the host's /usr (see integration/peers_test.go).
set -eu
need=""
command -v podman >/dev/null 2>&1 || need="$need podman"
command -v bwrap >/dev/null 2>&1 || need="$need bubblewrap"
[ -n "$need" ] || exit 0
echo "installing:$need" >&2
export DEBIAN_FRONTEND=noninteractive
# Another install may hold dpkg's lock (CI, deps.sh): wait for it.
apt="apt-get -o DPkg::Lock::Timeout=600 -y -q --no-install-recommends"
$apt install $need >/dev/null 2>&1 || { apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null && $apt install $need >/dev/null; }
command -v podman >/dev/null && command -v bwrap >/dev/null
