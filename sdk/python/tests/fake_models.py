"""A local fake of the Anthropic Messages API and the OpenAI Responses API.

It speaks the real wire formats, validates requests the way the real APIs
do (a request the real API would refuse gets the real API's kind of 400),
and plays a scripted model that

1. sends buggy code through the tool,
2. expects the failure back (Anthropic: a ``tool_result`` with
   ``is_error: true``; OpenAI: a ``function_call_output`` whose JSON has a
   non-zero ``exit_code``) containing ``error_marker``, and sends the fix,
3. expects a successful result and answers with the result's stdout.

The answer is therefore whatever the sandbox printed: a test asserting the
number checks the whole path model → example → Paddock → sandbox → model.
Every validation failure is also kept in ``FakeModelServer.errors``.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple

API_KEY = "test-model-key"
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass
class Script:
    """What the scripted model does."""

    tool: str  # the tool it calls: run_python or run_command
    arg: str  # the tool's input field: code or command
    buggy: str  # first, failing input
    error_marker: str  # must appear in the failure sent back
    fixed: str  # second, working input
    answer: str  # final text; "{stdout}" is replaced by the run's stdout


class Invalid(Exception):
    """A request the real API would refuse."""

    def __init__(self, message: str, status: int = 400, kind: str = "invalid_request_error", param: Optional[str] = None, code: Optional[str] = None):
        super().__init__(message)
        self.message, self.status, self.kind, self.param, self.code = message, status, kind, param, code


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


class FakeModelServer:
    """``ThreadingHTTPServer`` on 127.0.0.1; ``anthropic_url`` and ``openai_url`` are the base URLs."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: List[Dict[str, Any]] = []
        self.errors: List[str] = []
        self.sent_assistant: List[Any] = []  # Anthropic: assistant contents, in order
        self.responses: Dict[str, Tuple[int, List[Dict[str, Any]]]] = {}  # OpenAI: id -> (step, output)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                status, body = server.handle(self.path, {k.lower(): v for k, v in self.headers.items()}, raw)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        port = self._httpd.server_address[1]
        self.anthropic_url = f"http://127.0.0.1:{port}"
        self.openai_url = f"http://127.0.0.1:{port}/v1"

    def start(self) -> "FakeModelServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):04d}fake"

    # -- dispatch ----------------------------------------------------------

    def handle(self, path: str, headers: Dict[str, str], raw: bytes) -> Tuple[int, Any]:
        with self._lock:
            try:
                body = json.loads(raw.decode("utf-8"))
            except ValueError:
                body = None
            self.requests.append({"path": path, "headers": headers, "body": body})
            is_openai = path == "/v1/responses"
            try:
                if not isinstance(body, dict):
                    raise Invalid("request body must be a JSON object")
                if path == "/v1/messages":
                    return 200, self._anthropic(headers, body)
                if is_openai:
                    return 200, self._openai(headers, body)
                raise Invalid(f"no route {path}", status=404, kind="not_found_error")
            except Invalid as e:
                self.errors.append(f"{path}: {e.message}")
                if is_openai:
                    return e.status, {"error": {"message": e.message, "type": e.kind, "param": e.param, "code": e.code}}
                return e.status, {"type": "error", "error": {"type": e.kind, "message": e.message}}

    # -- the scripted model ------------------------------------------------

    def _next_call(self, step: int, result: Optional[str], failed: Optional[bool]) -> Tuple[str, Optional[str]]:
        """(kind, payload): ("tool", input) or ("text", answer) for step 0, 1, 2."""
        s = self.script
        if step == 0:
            return "tool", s.buggy
        if step == 1:
            if not failed or s.error_marker not in (result or ""):
                raise Invalid(f"script: expected a failed result containing {s.error_marker!r}, got failed={failed} {result!r}")
            return "tool", s.fixed
        if step == 2:
            if failed:
                raise Invalid(f"script: expected the fixed code to succeed, got {result!r}")
            try:
                stdout = json.loads(result or "")["stdout"].strip()
            except (ValueError, KeyError, TypeError, AttributeError):
                raise Invalid(f"script: tool result is not the expected JSON: {result!r}")
            if not stdout:
                raise Invalid("script: the fixed code printed nothing")
            return "text", s.answer.format(stdout=stdout)
        raise Invalid("script: the conversation went on past its end")

    # -- Anthropic Messages API --------------------------------------------

    def _anthropic(self, headers: Dict[str, str], body: Dict[str, Any]) -> Any:
        if headers.get("x-api-key") != API_KEY:
            raise Invalid("invalid x-api-key", status=401, kind="authentication_error")
        if not headers.get("anthropic-version"):
            raise Invalid("anthropic-version: header is required")
        if not isinstance(body.get("model"), str) or not body["model"]:
            raise Invalid("model: Field required")
        if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
            raise Invalid("max_tokens: Field required")
        tools = body.get("tools") or []
        names = set()
        for i, t in enumerate(tools):
            if not isinstance(t, dict) or not _TOOL_NAME.match(str(t.get("name", ""))):
                raise Invalid(f"tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'")
            schema = t.get("input_schema")
            if not isinstance(schema, dict) or schema.get("type") != "object":
                raise Invalid(f"tools.{i}.input_schema: Input should be an object schema")
            names.add(t["name"])
        if self.script.tool not in names:
            raise Invalid(f"script: tool {self.script.tool} not offered")
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise Invalid("messages: at least one message is required")
        if msgs[0].get("role") != "user":
            raise Invalid("messages: first message must use the \"user\" role")
        n_assistant = 0
        for i, m in enumerate(msgs):
            role, content = m.get("role"), m.get("content")
            if role not in ("user", "assistant"):
                raise Invalid(f"messages.{i}.role: Input should be 'user' or 'assistant'")
            if i > 0 and role == msgs[i - 1].get("role"):
                raise Invalid(f"messages.{i}: roles must alternate between \"user\" and \"assistant\"")
            if not isinstance(content, (str, list)):
                raise Invalid(f"messages.{i}.content: Input should be a valid string or list")
            blocks = content if isinstance(content, list) else []
            if role == "assistant":
                if n_assistant >= len(self.sent_assistant) or content != self.sent_assistant[n_assistant]:
                    raise Invalid(f"messages.{i}: assistant content differs from what the model sent")
                n_assistant += 1
                ids = [b["id"] for b in blocks if b.get("type") == "tool_use"]
                if ids:
                    nxt = msgs[i + 1] if i + 1 < len(msgs) else None
                    nblocks = nxt.get("content") if nxt and isinstance(nxt.get("content"), list) else []
                    results = []
                    for b in nblocks:
                        if isinstance(b, dict) and b.get("type") == "tool_result":
                            results.append(b)
                        else:
                            break  # tool_result blocks must come first
                    got = [b.get("tool_use_id") for b in results]
                    missing = [x for x in ids if x not in got]
                    if missing:
                        raise Invalid(
                            f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                            f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
                        )
            for j, b in enumerate(blocks):
                if not isinstance(b, dict) or not isinstance(b.get("type"), str):
                    raise Invalid(f"messages.{i}.content.{j}: blocks must be objects with a type")
                if b["type"] == "tool_result":
                    if role != "user":
                        raise Invalid(f"messages.{i}.content.{j}: tool_result blocks are only allowed in user messages")
                    prev = msgs[i - 1] if i > 0 else {}
                    prev_ids = [x.get("id") for x in prev.get("content", []) if isinstance(x, dict) and x.get("type") == "tool_use"] if isinstance(prev.get("content"), list) else []
                    if b.get("tool_use_id") not in prev_ids:
                        raise Invalid(
                            f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {b.get('tool_use_id')}. "
                            "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                        )
                    if any(x.get("type") != "tool_result" for x in blocks[:j]):
                        raise Invalid(f"messages.{i}.content.{j}: tool_result blocks must come first in the content")
                    if "is_error" in b and not isinstance(b["is_error"], bool):
                        raise Invalid(f"messages.{i}.content.{j}.is_error: Input should be a valid boolean")
                    if not isinstance(b.get("content", ""), (str, list)):
                        raise Invalid(f"messages.{i}.content.{j}.content: Input should be a valid string or list")
        if msgs[-1].get("role") != "user":
            raise Invalid("script: the last message should be the user's")
        last = msgs[-1]["content"]
        result = failed = None
        if isinstance(last, list):
            trs = [b for b in last if b.get("type") == "tool_result"]
            if trs:
                result, failed = _text_of(trs[-1].get("content")), bool(trs[-1].get("is_error"))
        kind, payload = self._next_call(n_assistant, result, failed)
        if kind == "tool":
            content = [
                {"type": "text", "text": "Let me run some code."},
                {"type": "tool_use", "id": self._id("toolu"), "name": self.script.tool, "input": {self.script.arg: payload}},
            ]
            stop = "tool_use"
        else:
            content = [{"type": "text", "text": payload}]
            stop = "end_turn"
        self.sent_assistant.append(content)
        return {
            "id": self._id("msg"),
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 50},
        }

    # -- OpenAI Responses API ----------------------------------------------

    def _openai(self, headers: Dict[str, str], body: Dict[str, Any]) -> Any:
        if headers.get("authorization") != "Bearer " + API_KEY:
            raise Invalid("Incorrect API key provided.", status=401, code="invalid_api_key")
        if not isinstance(body.get("model"), str) or not body["model"]:
            raise Invalid("Missing required parameter: 'model'.", param="model", code="missing_required_parameter")
        names = set()
        for i, t in enumerate(body.get("tools") or []):
            if not isinstance(t, dict) or t.get("type") != "function":
                raise Invalid(f"Invalid value for 'tools[{i}].type'.", param=f"tools[{i}].type")
            if not _TOOL_NAME.match(str(t.get("name", ""))):
                raise Invalid(f"Invalid 'tools[{i}].name'.", param=f"tools[{i}].name")
            params = t.get("parameters")
            if not isinstance(params, dict) or params.get("type") != "object":
                raise Invalid(f"Invalid schema for function '{t.get('name')}'.", param=f"tools[{i}].parameters")
            if t.get("strict") and params.get("additionalProperties") is not False:
                raise Invalid(
                    f"Invalid schema for function '{t['name']}': 'additionalProperties' is required to be supplied and to be false.",
                    param=f"tools[{i}].parameters",
                )
            names.add(t["name"])
        if self.script.tool not in names:
            raise Invalid(f"script: tool {self.script.tool} not offered (tools are not carried over by previous_response_id)")
        inp = body.get("input")
        prev_id = body.get("previous_response_id")
        result = failed = None
        if prev_id is None:
            step = 0
            if not isinstance(inp, (str, list)) or not inp:
                raise Invalid("Missing required parameter: 'input'.", param="input")
        else:
            if prev_id not in self.responses:
                raise Invalid(f"Previous response with id '{prev_id}' not found.", param="previous_response_id", code="previous_response_not_found")
            prev_step, prev_output = self.responses[prev_id]
            step = prev_step + 1
            if not isinstance(inp, list):
                raise Invalid("script: expected function_call_output items as input", param="input")
            calls = {o["call_id"] for o in prev_output if o.get("type") == "function_call"}
            outputs = {}
            for k, item in enumerate(inp):
                if not isinstance(item, dict):
                    raise Invalid(f"Invalid type for 'input[{k}]'.", param=f"input[{k}]")
                if item.get("type") == "function_call_output":
                    if item.get("call_id") not in calls:
                        raise Invalid(f"No tool call found for function call output with call_id {item.get('call_id')}.", param="input")
                    if not isinstance(item.get("output"), str):
                        raise Invalid(f"Invalid type for 'input[{k}].output': expected a string.", param=f"input[{k}].output")
                    outputs[item["call_id"]] = item["output"]
            for c in sorted(calls - set(outputs)):
                raise Invalid(f"No tool output found for function call {c}.", param="input")
            if outputs:
                result = list(outputs.values())[-1]
                try:
                    failed = json.loads(result).get("exit_code") != 0
                except (ValueError, AttributeError):
                    failed = True
        kind, payload = self._next_call(step, result, failed)
        rid = self._id("resp")
        if kind == "tool":
            output = [
                {
                    "type": "function_call",
                    "id": self._id("fc"),
                    "call_id": self._id("call"),
                    "name": self.script.tool,
                    "arguments": json.dumps({self.script.arg: payload}),
                    "status": "completed",
                }
            ]
        else:
            output = [
                {
                    "type": "message",
                    "id": self._id("msg"),
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": payload, "annotations": []}],
                }
            ]
        self.responses[rid] = (step, output)
        return {
            "id": rid,
            "object": "response",
            "created_at": 1700000000,
            "status": "completed",
            "model": body["model"],
            "output": output,
            "previous_response_id": prev_id,
            "tools": body.get("tools") or [],
            "usage": {"input_tokens": 100, "output_tokens": 50, "total_tokens": 150},
        }


PRIMES = Script(
    tool="run_python",
    arg="code",
    buggy=(
        "primes = []\n"
        "n = 2\n"
        "while len(primes) < 1000:\n"
        "    if all(n % p for p in primes if p * p <= n):\n"
        "        primes.append(n)\n"
        "    n += 1\n"
        "print(prime[-1])\n"
    ),
    error_marker="NameError",
    fixed=(
        "primes = []\n"
        "n = 2\n"
        "while len(primes) < 1000:\n"
        "    if all(n % p for p in primes if p * p <= n):\n"
        "        primes.append(n)\n"
        "    n += 1\n"
        "print(primes[-1])\n"
    ),
    answer="The 1000th prime number is {stdout}.",
)

_SIEVE_C = r"""#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    const int n = 10000000;
    char *composite = calloc(n, 1);
    int count = 0;
    if (!composite) return 1;
    for (long i = 2; i < n; i++) {
        if (composite[i]) continue;
        count++;
        for (long j = i * i; j < n; j += i) composite[j] = 1;
    }
    printf("%d\n", count)BUG
    free(composite);
    return 0;
}
"""

SIEVE = Script(
    tool="run_command",
    arg="command",
    buggy="cat > sieve.c <<'EOF'\n" + _SIEVE_C.replace("BUG", "") + "EOF\ngcc -O2 -Wall -o sieve sieve.c && ./sieve",
    error_marker="error: expected",
    fixed="cat > sieve.c <<'EOF'\n" + _SIEVE_C.replace("BUG", ";") + "EOF\ngcc -O2 -Wall -o sieve sieve.c && ./sieve",
    answer="There are {stdout} primes below 10,000,000.",
)

FIBONACCI = Script(
    tool="run_python",
    arg="code",
    buggy=(
        "def fib(n):\n"
        "    a, b = 0, 1\n"
        "    for _ in range(n):\n"
        "        a, b = b, a + b\n"
        "    return a\n"
        "print(fib(40)\n"
    ),
    error_marker="SyntaxError",
    fixed=(
        "def fib(n):\n"
        "    a, b = 0, 1\n"
        "    for _ in range(n):\n"
        "        a, b = b, a + b\n"
        "    return a\n"
        "print(fib(40))\n"
    ),
    answer="The 40th Fibonacci number is {stdout}.",
)
