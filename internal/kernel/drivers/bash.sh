# Paddock Bash kernel driver: run by the guest agent as `bash -c`.
# fd 3: cells from the agent, each ended by a NUL byte; fd 4: events.
# Each cell runs with eval in this shell, so cd, variables, functions and
# exports stay. After each cell: the marker on fd 1 and fd 2, then
# {"type":"done"} on fd 4; a non-zero status is reported as an error.
__paddock_marker=$PADDOCK_KERNEL_MARKER
unset PADDOCK_KERNEL_MARKER PADDOCK_KERNEL_MAX_ITEM
__paddock_count=0
trap ':' INT
while IFS= read -r -d '' __paddock_cell <&3; do
	__paddock_count=$((__paddock_count + 1))
	printf '{"type":"started"}\n' >&4
	eval "$__paddock_cell" 3<&- 4>&- </dev/null
	__paddock_status=$?
	printf '%s' "$__paddock_marker"
	printf '%s' "$__paddock_marker" >&2
	if [ "$__paddock_status" -ne 0 ]; then
		printf '{"type":"error","error":{"name":"ExitStatus","value":"exit status %d","traceback":""}}\n' "$__paddock_status" >&4
	fi
	printf '{"type":"done","execution_count":%d}\n' "$__paddock_count" >&4
done
