#!/usr/bin/env python3
"""Compute the 40th Fibonacci number with the OpenAI Responses API and a
strict `run_python` function, a fresh Paddock sandbox for every call.

Each call runs in its own sandbox capped at `max_cost_micros: 50000` and
deleted right after; turns are chained with `previous_response_id` and
capped at eight.

    export PADDOCK_URL=http://127.0.0.1:7419 PADDOCK_API_KEY=pdk_...
    export OPENAI_API_KEY=sk-...                 # OPENAI_BASE_URL, OPENAI_MODEL optional
    python3 examples/python/fibonacci_openai_responses.py
"""

from __future__ import annotations

import os
import sys

try:
    import openai
except ImportError:  # no `pip install openai`: the stand-in
    import _stdlib_clients as openai  # type: ignore[no-redef]

from paddock.tooluse import RUN_PYTHON, Session, run_openai_responses

MODEL = os.environ.get("OPENAI_MODEL", "gpt-5.2")
PROMPT = "What is the 40th Fibonacci number (F(1) = F(2) = 1)? Compute it with the run_python tool rather than from memory, then answer with the number."


def log(name, tool_input, res) -> None:  # type: ignore[no-untyped-def]
    print(f"[{name}] {tool_input}\n[result{' (error)' if res.is_error else ''}] {res.text}", file=sys.stderr, flush=True)


def main() -> int:
    client = openai.OpenAI()
    tools = Session(
        tools=[RUN_PYTHON],
        timeout=30,
        per_call=True,
        create={"max_cost_micros": 50000, "metadata": {"example": "fibonacci_openai_responses"}},
    )
    resp = run_openai_responses(client, tools, max_turns=8, on_tool_call=log, model=MODEL, input=PROMPT)
    text = "".join(c.text for item in resp.output if item.type == "message" for c in item.content if c.type == "output_text")
    print(text.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
