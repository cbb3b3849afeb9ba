#!/usr/bin/env python3
"""Compute the 40th Fibonacci number with OpenAI Chat Completions and a
`run_python` tool, one Paddock sandbox for the whole conversation.

    export PADDOCK_URL=http://127.0.0.1:7419 PADDOCK_API_KEY=pdk_...
    export OPENAI_API_KEY=sk-...                 # OPENAI_BASE_URL, OPENAI_MODEL optional
    python3 examples/python/fibonacci_openai_chat.py

With the official `openai` package installed it is used; without it, a
standard-library stand-in with the same surface (_stdlib_clients.py).
"""

from __future__ import annotations

import os
import sys

try:
    import openai
except ImportError:  # no `pip install openai`: the stand-in
    import _stdlib_clients as openai  # type: ignore[no-redef]

from paddock.tooluse import RUN_PYTHON, Session, run_openai_chat

MODEL = os.environ.get("OPENAI_MODEL", "gpt-5.2")
PROMPT = "What is the 40th Fibonacci number (F(1) = F(2) = 1)? Compute it with the run_python tool rather than from memory, then answer with the number."


def log(name, tool_input, res) -> None:  # type: ignore[no-untyped-def]
    print(f"[{name}] {tool_input}\n[result{' (error)' if res.is_error else ''}] {res.text}", file=sys.stderr, flush=True)


def main() -> int:
    client = openai.OpenAI()
    tools = Session(tools=[RUN_PYTHON], timeout=30, create={"metadata": {"example": "fibonacci_openai_chat"}})
    cc, _ = run_openai_chat(client, tools, max_turns=10, on_tool_call=log, model=MODEL, messages=[{"role": "user", "content": PROMPT}])
    print((cc.choices[0].message.content or "").strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
