"""The fake model API (bin/paddock-fakemodel) refuses what the real APIs refuse, so the example tests mean something.

The Go tests of internal/fakemodel cover its validation in depth; these check
the binary the Python suite runs, over HTTP, as the examples reach it.
"""

from __future__ import annotations

import json
import unittest
import urllib.error
import urllib.request
from typing import Dict, List

import _support  # noqa: F401  (puts the SDK on sys.path)
from _fakemodel import API_KEY, FakeModel


def post(url: str, body: object, headers: Dict[str, str]) -> tuple:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json", **headers}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


class FakeModelValidationTest(unittest.TestCase):
    def setUp(self) -> None:
        self.fake = FakeModel().start()
        self.addCleanup(self.fake.stop)
        self.h = {"x-api-key": API_KEY, "anthropic-version": "2023-06-01"}
        self.tools = [{"name": "run_python", "input_schema": {"type": "object"}}]

    def first_turn(self) -> List[dict]:
        msgs = [{"role": "user", "content": "go"}]
        status, msg = post(self.fake.anthropic_url + "/v1/messages", {"model": "m", "max_tokens": 10, "tools": self.tools, "messages": msgs}, self.h)
        self.assertEqual(status, 200, msg)
        self.assertEqual(msg["stop_reason"], "tool_use")
        return msgs + [{"role": "assistant", "content": msg["content"]}]

    def anthropic(self, msgs: List[dict]) -> tuple:
        return post(self.fake.anthropic_url + "/v1/messages", {"model": "m", "max_tokens": 10, "tools": self.tools, "messages": msgs}, self.h)

    def test_bad_key(self) -> None:
        status, body = post(self.fake.anthropic_url + "/v1/messages", {}, {"x-api-key": "nope", "anthropic-version": "2023-06-01"})
        self.assertEqual((status, body["error"]["type"]), (401, "authentication_error"))

    def test_missing_tool_result(self) -> None:
        msgs = self.first_turn() + [{"role": "user", "content": "where is my answer?"}]
        status, body = self.anthropic(msgs)
        self.assertEqual(status, 400)
        self.assertIn("without `tool_result` blocks", body["error"]["message"])

    def test_tool_result_not_first(self) -> None:
        msgs = self.first_turn()
        tid = msgs[-1]["content"][1]["id"]
        msgs.append({"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "tool_result", "tool_use_id": tid, "content": "{}"}]})
        status, _ = self.anthropic(msgs)
        self.assertEqual(status, 400)

    def test_wrong_tool_use_id(self) -> None:
        msgs = self.first_turn()
        tids = [b["id"] for b in msgs[-1]["content"] if b["type"] == "tool_use"]
        results = [{"type": "tool_result", "tool_use_id": t, "content": "{}"} for t in tids]
        msgs.append({"role": "user", "content": results + [{"type": "tool_result", "tool_use_id": "toolu_other", "content": "x"}]})
        status, body = self.anthropic(msgs)
        self.assertEqual(status, 400)
        self.assertIn("unexpected `tool_use_id`", body["error"]["message"])

    def test_changed_tool_use(self) -> None:
        msgs = self.first_turn()
        msgs[-1]["content"][1]["input"] = {"code": "print('not what the model sent')"}
        tids = [b["id"] for b in msgs[-1]["content"] if b["type"] == "tool_use"]
        msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": t, "content": "{}"} for t in tids]})
        status, body = self.anthropic(msgs)
        self.assertEqual(status, 400)
        self.assertIn("is not one the model sent", body["error"]["message"])

    def test_openai_unknown_previous_response(self) -> None:
        h = {"Authorization": "Bearer " + API_KEY}
        tools = [{"type": "function", "name": "run_python", "parameters": {"type": "object"}, "strict": False}]
        status, body = post(self.fake.openai_url + "/responses", {"model": "m", "tools": tools, "input": [], "previous_response_id": "resp_nope"}, h)
        self.assertEqual((status, body["error"]["code"]), (400, "previous_response_not_found"))
        status, first = post(self.fake.openai_url + "/responses", {"model": "m", "tools": tools, "input": "go"}, h)
        self.assertEqual(status, 200, first)
        call_id = first["output"][0]["call_id"]
        # No output for the call.
        status, body = post(self.fake.openai_url + "/responses", {"model": "m", "tools": tools, "input": [], "previous_response_id": first["id"]}, h)
        self.assertEqual(status, 400)
        self.assertIn(f"No tool output found for function call {call_id}", body["error"]["message"])
        # An output for a call that does not exist.
        bad = [{"type": "function_call_output", "call_id": "call_other", "output": "{}"}]
        status, body = post(self.fake.openai_url + "/responses", {"model": "m", "tools": tools, "input": bad, "previous_response_id": first["id"]}, h)
        self.assertEqual(status, 400)
        self.assertIn("No tool call found", body["error"]["message"])


if __name__ == "__main__":
    unittest.main()
