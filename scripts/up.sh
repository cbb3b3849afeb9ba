#!/bin/sh
# Sets up a fresh Linux machine (as root) and starts paddockd on the
# embedded default template, then prints the URL and a new API key.
#   PADDOCK_STATE_DIR  state directory (default /var/lib/paddock)
#   PADDOCK_LISTEN     listen address (default 127.0.0.1:7419)
set -eu
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "up.sh: run as root (paddockd creates namespaces, cgroups and mounts)" >&2; exit 1; }
export PATH="/usr/local/go/bin:$PATH"
STATE=${PADDOCK_STATE_DIR:-/var/lib/paddock}
LISTEN=${PADDOCK_LISTEN:-127.0.0.1:7419}
scripts/deps.sh
make -s build
mkdir -p "$STATE"
if curl -fsS "http://$LISTEN/v1/health" >/dev/null 2>&1; then
	echo "up.sh: paddockd already answers on $LISTEN" >&2
else
	nohup bin/paddockd serve --state-dir "$STATE" --listen "$LISTEN" >>"$STATE/paddockd.log" 2>&1 &
	i=0
	until curl -fsS "http://$LISTEN/v1/health" >/dev/null 2>&1; do
		i=$((i+1)); [ $i -lt 100 ] || { echo "up.sh: paddockd did not start; see $STATE/paddockd.log" >&2; tail -20 "$STATE/paddockd.log" >&2; exit 1; }
		sleep 0.1
	done
fi
KEY=$(bin/paddockd keys create --state-dir "$STATE" --name "up-$(date +%Y%m%d-%H%M%S)" 2>/dev/null)
echo "paddockd is running (log: $STATE/paddockd.log)"
echo "export PADDOCK_URL=http://$LISTEN"
echo "export PADDOCK_API_KEY=$KEY"
