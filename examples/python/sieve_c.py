#!/usr/bin/env python3
"""Have Claude write a C prime sieve, compile it with gcc and run it in a Paddock sandbox.

The model gets a `run_command` tool (bash in the sandbox). It writes the C
file, compiles and runs it; compiler errors come back as the tool result
(is_error), so the model fixes its own code. The sandbox has gcc and no
internet access, and is deleted at the end.

    export PADDOCK_URL=http://127.0.0.1:7419 PADDOCK_API_KEY=pdk_...
    export ANTHROPIC_API_KEY=sk-ant-...
    python3 examples/python/sieve_c.py

Environment: ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL (default
https://api.anthropic.com), ANTHROPIC_MODEL, PADDOCK_URL, PADDOCK_API_KEY.

This file speaks the Messages API wire format with urllib (standard library
only). With the official SDK (`pip install anthropic`) the loop is the same:

    client = anthropic.Anthropic()      # reads ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL
    msg = client.messages.create(model=MODEL, max_tokens=4096, tools=TOOLS, messages=messages)
    # msg.stop_reason == "tool_use"; each block with block.type == "tool_use" has
    # block.id, block.name, block.input; answer them all in the next user message with
    # {"type": "tool_result", "tool_use_id": block.id, "content": text, "is_error": is_error}
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from typing import Any, Dict, List, Tuple

from paddock import PaddockError, Sandbox

MODEL = os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-5-5")
BASE_URL = os.environ.get("ANTHROPIC_BASE_URL", "https://api.anthropic.com").rstrip("/")
MAX_TURNS = 12

PROMPT = (
    "Write a C program that counts the prime numbers below 10,000,000 with the sieve of "
    "Eratosthenes. Use the run_command tool to save it as sieve.c, compile it with "
    "`gcc -O2 -Wall -o sieve sieve.c` and run it. Then answer with the count."
)

TOOLS = [
    {
        "name": "run_command",
        "description": (
            "Run a bash command in a sandbox and return its exit code, stdout and stderr. "
            "Use it to write files, compile and run programs. The sandbox is a Linux machine "
            "with gcc and no internet access; the working directory is /workspace and files "
            "persist between calls. Each call may take at most 60 seconds."
        ),
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "A bash command line, run with bash -lc in /workspace."}},
            "required": ["command"],
        },
    }
]


def log(*args: Any) -> None:
    print(*args, file=sys.stderr, flush=True)


def create_message(messages: List[Dict[str, Any]]) -> Dict[str, Any]:
    """POST /v1/messages, retrying rate limits and overloads like the official SDK."""
    body = json.dumps(
        {"model": MODEL, "max_tokens": 4096, "tools": TOOLS, "messages": messages}
    ).encode()
    headers = {
        "x-api-key": os.environ["ANTHROPIC_API_KEY"],
        "anthropic-version": "2023-06-01",
        "content-type": "application/json",
    }
    for attempt in range(4):
        req = urllib.request.Request(BASE_URL + "/v1/messages", data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=600) as resp:
                return json.load(resp)
        except urllib.error.HTTPError as e:
            detail = e.read().decode("utf-8", "replace")
            if e.code in (429, 500, 502, 503, 529) and attempt < 3:
                time.sleep(2**attempt)
                continue
            raise SystemExit(f"Messages API error {e.code}: {detail}")
    raise AssertionError("unreachable")


def run_command(sbx: Sandbox, command: str) -> Tuple[str, bool]:
    """The tool handler: the text for the model and whether the call failed."""
    try:
        res = sbx.exec(command, timeout=60, max_output_bytes=20000)
    except PaddockError as e:
        return f"error: the sandbox could not run the command: {e}", True
    out = {
        "exit_code": res.exit_code,
        "timed_out": res.timed_out,
        "stdout": res.stdout,
        "stderr": res.stderr or (f"killed by {res.signal}" if res.signal else ""),
        "stdout_truncated": res.stdout_truncated,
        "stderr_truncated": res.stderr_truncated,
    }
    return json.dumps(out), not res.ok


def main() -> int:
    messages: List[Dict[str, Any]] = [{"role": "user", "content": PROMPT}]
    with Sandbox.create(metadata={"example": "sieve_c"}) as sbx:
        for _ in range(MAX_TURNS):
            msg = create_message(messages)
            messages.append({"role": "assistant", "content": msg["content"]})
            for block in msg["content"]:
                if block["type"] == "text" and block["text"].strip():
                    log(f"[model] {block['text'].strip()}")
            if msg.get("stop_reason") != "tool_use":
                print("".join(b["text"] for b in msg["content"] if b["type"] == "text").strip())
                return 0
            results = []
            for block in msg["content"]:
                if block["type"] != "tool_use":
                    continue
                if block["name"] == "run_command" and isinstance(block["input"].get("command"), str):
                    log(f"[run_command]\n{block['input']['command']}")
                    text, is_error = run_command(sbx, block["input"]["command"])
                else:
                    text, is_error = f"error: unknown tool or bad input: {block['name']}", True
                log(f"[result{' (error)' if is_error else ''}] {text}")
                results.append({"type": "tool_result", "tool_use_id": block["id"], "content": text, "is_error": is_error})
            messages.append({"role": "user", "content": results})
    log(f"no answer after {MAX_TURNS} turns")
    return 1


if __name__ == "__main__":
    sys.exit(main())
