#!/usr/bin/env python3
"""Find the 1000th prime with Claude and a `run_python` tool, one Paddock
sandbox for the whole conversation.

The model writes Python; the tool runs it in the sandbox and sends back
exit_code, timed_out, stdout and stderr (with is_error when it failed), so
the model reads its own traceback and fixes its code. The sandbox is deleted
at the end.

    export PADDOCK_URL=http://127.0.0.1:7419 PADDOCK_API_KEY=pdk_...
    export ANTHROPIC_API_KEY=sk-ant-...          # ANTHROPIC_BASE_URL, ANTHROPIC_MODEL optional
    python3 examples/python/primes_anthropic.py

With the official `anthropic` package installed it is used; without it, a
standard-library stand-in with the same surface (_stdlib_clients.py).
"""

from __future__ import annotations

import os
import sys

try:
    import anthropic
except ImportError:  # no `pip install anthropic`: the stand-in
    import _stdlib_clients as anthropic  # type: ignore[no-redef]

from paddock.tooluse import RUN_PYTHON, Session, run_anthropic

MODEL = os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-5-5")
PROMPT = "What is the 1000th prime number? Compute it with the run_python tool rather than from memory, then answer with the number."


def log(name, tool_input, res) -> None:  # type: ignore[no-untyped-def]
    print(f"[{name}] {tool_input}\n[result{' (error)' if res.is_error else ''}] {res.text}", file=sys.stderr, flush=True)


def main() -> int:
    client = anthropic.Anthropic()
    tools = Session(tools=[RUN_PYTHON], timeout=30, create={"metadata": {"example": "primes_anthropic"}})
    msg, _ = run_anthropic(
        client, tools, max_turns=10, on_tool_call=log,
        model=MODEL, max_tokens=4096, messages=[{"role": "user", "content": PROMPT}],
    )
    print("".join(b.text for b in msg.content if b.type == "text").strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
