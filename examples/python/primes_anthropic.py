#!/usr/bin/env python3
"""Find the 1000th prime with Claude and a `run_python` tool run in a Paddock sandbox.

The model writes Python, the tool handler runs it in a sandbox and returns
exit_code, timed_out, stdout and stderr, so the model can read its own
traceback and fix its code. One sandbox serves the whole conversation and is
deleted at the end.

    export PADDOCK_URL=http://127.0.0.1:7419 PADDOCK_API_KEY=pdk_...
    export ANTHROPIC_API_KEY=sk-ant-...
    python3 examples/python/primes_anthropic.py

Environment: ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL (default
https://api.anthropic.com), ANTHROPIC_MODEL, PADDOCK_URL, PADDOCK_API_KEY.

This file speaks the Messages API wire format with urllib so that it needs
nothing but the standard library and the `paddock` package. With the official
SDK (`pip install anthropic`) the loop is the same:

    client = anthropic.Anthropic()      # reads ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL
    while True:
        msg = client.messages.create(model=MODEL, max_tokens=4096, tools=TOOLS, messages=messages)
        messages.append({"role": "assistant", "content": msg.content})
        if msg.stop_reason != "tool_use":
            break
        results = []
        for block in msg.content:
            if block.type == "tool_use":
                text, is_error = run_python(sbx, block.input["code"])
                results.append({"type": "tool_result", "tool_use_id": block.id,
                                "content": text, "is_error": is_error})
        messages.append({"role": "user", "content": results})
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
MAX_TURNS = 10

PROMPT = (
    "What is the 1000th prime number? Compute it with the run_python tool "
    "rather than from memory, then answer with the number."
)

TOOLS = [
    {
        "name": "run_python",
        "description": (
            "Run Python 3 code in a sandbox and return its exit code, stdout and stderr. "
            "Print what you want to see. The sandbox is a Linux machine without internet access; "
            "each run may take at most 30 seconds."
        ),
        "input_schema": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "Python 3 source code to run as a script."}},
            "required": ["code"],
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


def run_python(sbx: Sandbox, code: str) -> Tuple[str, bool]:
    """The tool handler: the text for the model and whether the call failed."""
    try:
        sbx.files.write("main.py", code)
        res = sbx.exec(["python3", "main.py"], timeout=30, max_output_bytes=20000)
    except PaddockError as e:  # the sandbox itself failed: tell the model
        return f"error: the sandbox could not run the code: {e}", True
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
    with Sandbox.create(metadata={"example": "primes_anthropic"}) as sbx:
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
                if block["name"] == "run_python" and isinstance(block["input"].get("code"), str):
                    log(f"[run_python]\n{block['input']['code']}")
                    text, is_error = run_python(sbx, block["input"]["code"])
                else:
                    text, is_error = f"error: unknown tool or bad input: {block['name']}", True
                log(f"[result{' (error)' if is_error else ''}] {text}")
                results.append({"type": "tool_result", "tool_use_id": block["id"], "content": text, "is_error": is_error})
            messages.append({"role": "user", "content": results})
    log(f"no answer after {MAX_TURNS} turns")
    return 1


if __name__ == "__main__":
    sys.exit(main())
