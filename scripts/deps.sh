#!/bin/sh
# Installs the system packages Paddock's build and tests need (Debian/Ubuntu).
set -eu
need=""
dpkg -s libseccomp-dev >/dev/null 2>&1 || need="$need libseccomp-dev"
dpkg -s pkg-config >/dev/null 2>&1 || need="$need pkg-config"
command -v mkfs.ext4 >/dev/null 2>&1 || need="$need e2fsprogs"
command -v mkfs.btrfs >/dev/null 2>&1 || need="$need btrfs-progs" # --disk-mode=quota, the default
command -v gcc >/dev/null 2>&1 || need="$need gcc"
dpkg -s libc6-dev >/dev/null 2>&1 || need="$need libc6-dev" # libc.a: paddock-idle is linked statically
command -v crun >/dev/null 2>&1 || need="$need crun"
command -v python3 >/dev/null 2>&1 || need="$need python3"
command -v curl >/dev/null 2>&1 || need="$need curl"
command -v npm >/dev/null 2>&1 || need="$need nodejs npm"
command -v tmux >/dev/null 2>&1 || need="$need tmux" # the CLI terminal test
command -v chromium >/dev/null 2>&1 || need="$need chromium" # the console's end-to-end tests (playwright-core drives it)
command -v firefox-esr >/dev/null 2>&1 || need="$need firefox-esr" # the console in Firefox (WebDriver BiDi)
# the real Kubernetes node of `make k8s-node-test` (scripts/k8s-node.sh): pod networking and the lab's images
[ -x /usr/lib/cni/bridge ] || need="$need containernetworking-plugins"
dpkg -s busybox-static >/dev/null 2>&1 || need="$need busybox-static"
# The code interpreter's data stack: sandboxes of the base template see the
# host's /usr, so these Debian packages give them numpy, pandas and
# matplotlib with no download at run time.
for p in python3-numpy python3-pandas python3-matplotlib; do
	dpkg -s $p >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
	echo "installing:$need" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q $need >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q $need >/dev/null; }
fi

# The TypeScript SDK, the E2B SDK and playwright-core (the console's
# end-to-end tests) need Node.js 20 or newer; Debian 12's nodejs is 18.
node_major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
if [ "$node_major" -lt 20 ]; then
	echo "Node.js 20 or newer is needed; this machine has $(node --version 2>/dev/null || echo none) (Debian 13's nodejs is 20)" >&2
	exit 1
fi

# gVisor's runsc, for the runtime "runsc": built from its Go module (about
# 2 to 5 minutes on 2 cores) and cached outside the repository, keyed by
# version. CGO_ENABLED=0 matters: runsc re-executes itself inside an empty
# chroot, where a dynamically linked binary finds no ELF interpreter (its
# sandbox then fails with "fork/exec /proc/self/exe: no such file or
# directory"). Debian's runsc (2022) lacks --host-uds=create and is not used.
RUNSC_VERSION="${RUNSC_VERSION:-v0.0.0-20260905035102-160fafc42237}"
RUNSC_CACHE="${RUNSC_CACHE:-/var/cache/paddock}"
runsc_bin="$RUNSC_CACHE/runsc-$RUNSC_VERSION"
if [ ! -x "$runsc_bin" ]; then
	echo "building runsc $RUNSC_VERSION into $runsc_bin" >&2
	tmp="$(mktemp -d)"
	GO="${GO:-go}"
	command -v "$GO" >/dev/null 2>&1 || GO=/usr/local/go/bin/go
	(cd "$tmp" && CGO_ENABLED=0 GOBIN="$tmp/bin" GOFLAGS=-mod=mod "$GO" install -ldflags=-s "gvisor.dev/gvisor/runsc@$RUNSC_VERSION")
	mkdir -p "$RUNSC_CACHE"
	mv "$tmp/bin/runsc" "$runsc_bin"
	rm -rf "$tmp"
fi
