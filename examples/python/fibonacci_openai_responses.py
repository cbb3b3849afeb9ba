#!/usr/bin/env python3
"""Compute the 40th Fibonacci number with the OpenAI Responses API and a Paddock sandbox.

The model calls the `run_python` function tool; the handler runs the code in
a sandbox and sends the result back as a `function_call_output` item in a
request chained to the previous one with `previous_response_id`. Errors
(a traceback, a non-zero exit) go back to the model, which fixes its code.

    export PADDOCK_URL=http://127.0.0.1:7419 PADDOCK_API_KEY=pdk_...
    export OPENAI_API_KEY=sk-...
    python3 examples/python/fibonacci_openai_responses.py

Environment: OPENAI_API_KEY, OPENAI_BASE_URL (default
https://api.openai.com/v1), OPENAI_MODEL, PADDOCK_URL, PADDOCK_API_KEY.

This file speaks the Responses API wire format with urllib (standard library
only). With the official SDK (`pip install openai`) the loop is the same:

    client = openai.OpenAI()            # reads OPENAI_API_KEY and OPENAI_BASE_URL
    resp = client.responses.create(model=MODEL, tools=TOOLS, input=PROMPT)
    while calls := [item for item in resp.output if item.type == "function_call"]:
        outputs = [{"type": "function_call_output", "call_id": c.call_id,
                    "output": run_python(sbx, json.loads(c.arguments)["code"])[0]} for c in calls]
        resp = client.responses.create(model=MODEL, tools=TOOLS, input=outputs,
                                        previous_response_id=resp.id)
    print(resp.output_text)
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from typing import Any, Dict, List, Optional, Tuple

from paddock import PaddockError, Sandbox

MODEL = os.environ.get("OPENAI_MODEL", "gpt-5.5")
BASE_URL = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1").rstrip("/")
MAX_TURNS = 10

PROMPT = (
    "What is the 40th Fibonacci number (F(1) = F(2) = 1)? Compute it with the run_python "
    "tool rather than from memory, then answer with the number."
)

TOOLS = [
    {
        "type": "function",
        "name": "run_python",
        "description": (
            "Run Python 3 code in a sandbox and return its exit code, stdout and stderr as JSON. "
            "Print what you want to see. The sandbox is a Linux machine without internet access; "
            "each run may take at most 30 seconds."
        ),
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "Python 3 source code to run as a script."}},
            "required": ["code"],
            "additionalProperties": False,
        },
        "strict": True,
    }
]


def log(*args: Any) -> None:
    print(*args, file=sys.stderr, flush=True)


def create_response(input_items: Any, previous_response_id: Optional[str] = None) -> Dict[str, Any]:
    """POST /responses, retrying rate limits and server errors like the official SDK."""
    payload: Dict[str, Any] = {"model": MODEL, "tools": TOOLS, "input": input_items}
    if previous_response_id:
        payload["previous_response_id"] = previous_response_id
    headers = {"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"}
    for attempt in range(4):
        req = urllib.request.Request(BASE_URL + "/responses", data=json.dumps(payload).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=600) as resp:
                return json.load(resp)
        except urllib.error.HTTPError as e:
            detail = e.read().decode("utf-8", "replace")
            if e.code in (429, 500, 502, 503) and attempt < 3:
                time.sleep(2**attempt)
                continue
            raise SystemExit(f"Responses API error {e.code}: {detail}")
    raise AssertionError("unreachable")


def output_text(resp: Dict[str, Any]) -> str:
    """What the SDK's `resp.output_text` gives: the text of the message items."""
    parts = []
    for item in resp.get("output", []):
        if item.get("type") == "message":
            parts += [c["text"] for c in item.get("content", []) if c.get("type") == "output_text"]
    return "".join(parts)


def run_python(sbx: Sandbox, code: str) -> Tuple[str, bool]:
    """The tool handler: the text for the model and whether the call failed."""
    try:
        sbx.files.write("main.py", code)
        res = sbx.exec(["python3", "main.py"], timeout=30, max_output_bytes=20000)
    except PaddockError as e:
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
    with Sandbox.create(metadata={"example": "fibonacci_openai_responses"}) as sbx:
        resp = create_response(PROMPT)
        for _ in range(MAX_TURNS):
            calls = [item for item in resp.get("output", []) if item.get("type") == "function_call"]
            if not calls:
                print(output_text(resp).strip())
                return 0
            outputs: List[Dict[str, Any]] = []
            for call in calls:
                try:
                    args = json.loads(call.get("arguments") or "{}")
                except ValueError:
                    args = {}
                if call.get("name") == "run_python" and isinstance(args.get("code"), str):
                    log(f"[run_python]\n{args['code']}")
                    text, failed = run_python(sbx, args["code"])
                else:
                    text, failed = f"error: unknown tool or bad arguments: {call.get('name')}", True
                log(f"[result{' (error)' if failed else ''}] {text}")
                # The Responses API has no error flag: the exit code in the JSON says it.
                outputs.append({"type": "function_call_output", "call_id": call["call_id"], "output": text})
            resp = create_response(outputs, previous_response_id=resp["id"])
    log(f"no answer after {MAX_TURNS} turns")
    return 1


if __name__ == "__main__":
    sys.exit(main())
