#!/usr/bin/env python3
"""Have Claude write, compile and run a C sieve of Eratosthenes with a
`run_command` tool in a Paddock sandbox.

The sandbox has no network, a 1800 s lease and `on_timeout: "stop"`: when
the lease runs out its processes end (the hosted SDKs' `onLeaseEnd:
"stop"`; until stopped sandboxes keep their files, paddockd handles "stop"
as "kill"). The tool
result's is_error comes from the exit code, so the model sees gcc's errors
as failures; the conversation is capped at ten turns.

    export PADDOCK_URL=http://127.0.0.1:7419 PADDOCK_API_KEY=pdk_...
    export ANTHROPIC_API_KEY=sk-ant-...          # ANTHROPIC_BASE_URL, ANTHROPIC_MODEL optional
    python3 examples/python/sieve_c.py
"""

from __future__ import annotations

import os
import sys

try:
    import anthropic
except ImportError:  # no `pip install anthropic`: the stand-in
    import _stdlib_clients as anthropic  # type: ignore[no-redef]

from paddock.tooluse import RUN_COMMAND, Session, run_anthropic

MODEL = os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-5-5")
PROMPT = (
    "Write a C program that counts the prime numbers below 10,000,000 with the sieve of "
    "Eratosthenes. Use the run_command tool to save it as sieve.c, compile it with "
    "`gcc -O2 -Wall -o sieve sieve.c` and run it. Then answer with the count."
)


def log(name, tool_input, res) -> None:  # type: ignore[no-untyped-def]
    print(f"[{name}] {tool_input}\n[result{' (error)' if res.is_error else ''}] {res.text}", file=sys.stderr, flush=True)


def main() -> int:
    client = anthropic.Anthropic()
    tools = Session(
        tools=[RUN_COMMAND],
        timeout=60,
        create={"network": "off", "timeout": 1800, "on_timeout": "stop", "metadata": {"example": "sieve_c"}},
    )
    msg, _ = run_anthropic(
        client, tools, max_turns=10, on_tool_call=log,
        model=MODEL, max_tokens=4096, messages=[{"role": "user", "content": PROMPT}],
    )
    print("".join(b.text for b in msg.content if b.type == "text").strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
