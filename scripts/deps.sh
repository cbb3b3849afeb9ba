#!/bin/sh
# Installs the system packages Paddock's build and tests need (Debian/Ubuntu).
set -eu
need=""
dpkg -s libseccomp-dev >/dev/null 2>&1 || need="$need libseccomp-dev"
dpkg -s pkg-config >/dev/null 2>&1 || need="$need pkg-config"
command -v mkfs.ext4 >/dev/null 2>&1 || need="$need e2fsprogs"
command -v gcc >/dev/null 2>&1 || need="$need gcc"
command -v crun >/dev/null 2>&1 || need="$need crun"
command -v python3 >/dev/null 2>&1 || need="$need python3"
command -v curl >/dev/null 2>&1 || need="$need curl"
command -v npm >/dev/null 2>&1 || need="$need nodejs npm"
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
