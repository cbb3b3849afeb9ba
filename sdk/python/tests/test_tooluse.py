"""paddock.tooluse: definitions, formatting, the executor against a real
paddockd, and the loops driving duck-typed model clients that speak the
real wire formats to the fake model API (bin/paddock-fakemodel)."""

from __future__ import annotations

import json
import sys
import unittest

from _support import EXAMPLES_DIR, Daemon

from _fakemodel import API_KEY, FakeModel

import paddock
from paddock import tooluse
from paddock.tooluse import Options, Session

if EXAMPLES_DIR not in sys.path:
    sys.path.insert(0, EXAMPLES_DIR)
import _stdlib_clients as clients  # noqa: E402

DAEMON: Daemon = None  # type: ignore[assignment]


class Definitions(unittest.TestCase):
    def test_shapes(self) -> None:
        ts = tooluse.tools()
        self.assertEqual([t.name for t in ts], ["run_python", "run_command", "write_file", "read_file"])
        self.assertIn("at most 1m0s", ts[0].description)
        a = tooluse.anthropic_tools(ts)
        self.assertEqual(set(a[0]), {"name", "description", "input_schema"})
        chat = tooluse.openai_chat_tools(ts)
        self.assertEqual(chat[0]["type"], "function")
        self.assertTrue(all(c["function"]["strict"] for c in chat))
        resp = tooluse.openai_response_tools(ts)
        self.assertEqual(resp[2]["parameters"]["required"], ["path", "content"])
        self.assertTrue(all(r["strict"] for r in resp))
        self.assertFalse(tooluse.strict({"type": "object", "properties": {"a": {}}, "required": [], "additionalProperties": False}))

    def test_options_checked(self) -> None:
        for kwargs, exc in [
            ({"tools": ["run_rust"]}, ValueError),
            ({"tools": []}, ValueError),
            ({"timeout": "30"}, TypeError),
            ({"timeout": 0}, ValueError),
            ({"output_budget": 1.5}, TypeError),
        ]:
            with self.subTest(kwargs=kwargs), self.assertRaises(exc):
                Options(**kwargs)
        with self.assertRaises(TypeError):
            Session(client="http://x")  # type: ignore[arg-type]

    def test_format_exec(self) -> None:
        res = paddock.ExecResult(exit_code=0, stdout="a" * 100 + "TAIL", stderr="")
        r = tooluse.format_exec(res, budget=40)
        out = json.loads(r.text)
        self.assertFalse(r.is_error)
        self.assertTrue(out["stdout"].startswith("a" * 20))
        self.assertTrue(out["stdout"].endswith("TAIL"))
        self.assertIn("[... 64 characters cut ...]", out["stdout"])
        self.assertTrue(out["stdout_truncated"])
        self.assertTrue(tooluse.format_exec(paddock.ExecResult(exit_code=None, timed_out=True, signal="SIGKILL")).is_error)
        killed = json.loads(tooluse.format_exec(paddock.ExecResult(exit_code=None, signal="SIGKILL")).text)
        self.assertEqual(killed["stderr"], "killed by SIGKILL")
        self.assertTrue(tooluse.format_exec(paddock.ExecResult(exit_code=2)).is_error)


def setUpModule() -> None:
    global DAEMON
    DAEMON = Daemon(key_names=("tools",)).start()


def tearDownModule() -> None:
    if DAEMON is not None:
        DAEMON.stop()


class Executor(unittest.TestCase):
    def test_conversation_sandbox(self) -> None:
        c = DAEMON.client()
        with Session(c, create={"metadata": {"t": "conv"}}) as s:
            self.assertFalse(s.call("write_file", {"path": "a.txt", "content": "héllo"}).is_error)
            self.assertEqual(s.call("read_file", '{"path": "a.txt"}').text, "héllo")
            r = s.call("run_python", {"code": "print(open('/workspace/a.txt').read())"})
            self.assertEqual(json.loads(r.text)["stdout"], "héllo\n")
            self.assertTrue(s.call("run_command", {"command": "exit 3"}).is_error)
            self.assertTrue(s.call("run_command", {}).text.startswith("error: run_command: missing required field"))
            self.assertTrue(s.call("nope", {}).is_error)
            self.assertTrue(s.call("run_python", "{not json").is_error)
            self.assertTrue(s.call("read_file", {"path": "missing"}).is_error)
            self.assertEqual(len(list(c.list(metadata={"t": "conv"}))), 1)
        self.assertEqual(list(c.list(metadata={"t": "conv"})), [])

    def test_timeout_is_a_result(self) -> None:
        with Session(DAEMON.client(), timeout=0.5) as s:
            r = s.call("run_command", {"command": "sleep 5"})
            self.assertTrue(r.is_error)
            self.assertTrue(json.loads(r.text)["timed_out"])

    def test_per_call(self) -> None:
        c = DAEMON.client()
        s = Session(c, per_call=True, create={"metadata": {"t": "per-call"}})
        s.call("write_file", {"path": "a.txt", "content": "x"})
        self.assertTrue(s.call("read_file", {"path": "a.txt"}).is_error)  # a new sandbox: no file
        self.assertEqual(list(c.list(metadata={"t": "per-call"})), [])
        self.assertEqual(len(list(c.list(metadata={"t": "per-call"}, state="all"))), 2)

    def test_sandbox_failure_is_a_result(self) -> None:
        s = Session(DAEMON.client(), create={"template": "no-such-template"})
        r = s.call("run_command", {"command": "true"})
        self.assertTrue(r.is_error)
        self.assertIn("sandbox unavailable", r.text)


class Loops(unittest.TestCase):
    def setUp(self) -> None:
        self.fake = FakeModel().start()
        self.addCleanup(self.fake.stop)

    def test_anthropic(self) -> None:
        client = clients.Anthropic(API_KEY, self.fake.anthropic_url)
        seen = []
        msg, conv = tooluse.run_anthropic(
            client, Session(DAEMON.client(), tools=["run_python"]), on_tool_call=lambda n, i, r: seen.append(r.is_error),
            model="m", max_tokens=1000, messages=[{"role": "user", "content": "the 1000th prime"}],
        )
        self.assertEqual(self.fake.errors(), [])
        self.assertEqual(msg.content[0].text, "The 1000th prime number is 7919.")
        self.assertEqual(seen, [True, False, False])
        self.assertEqual(len(conv), 6)

    def test_openai_chat(self) -> None:
        client = clients.OpenAI(API_KEY, self.fake.openai_url)
        cc, _ = tooluse.run_openai_chat(client, Session(DAEMON.client(), tools=["run_python"]), model="m",
                                        messages=[{"role": "user", "content": "fib 40"}])
        self.assertEqual(self.fake.errors(), [])
        self.assertEqual(cc.choices[0].message.content, "The 40th Fibonacci number is 102334155.")

    def test_openai_responses(self) -> None:
        client = clients.OpenAI(API_KEY, self.fake.openai_url)
        resp = tooluse.run_openai_responses(client, Session(DAEMON.client(), tools=["run_python"], per_call=True), model="m", input="fib 40")
        self.assertEqual(self.fake.errors(), [])
        self.assertEqual(resp.output[0].content[0].text, "The 40th Fibonacci number is 102334155.")
        reqs = self.fake.requests()
        self.assertTrue(reqs[2]["body"]["previous_response_id"].startswith("resp_"))
        self.assertEqual(reqs[2]["body"]["input"][0]["type"], "function_call_output")
        with self.assertRaises(ValueError):
            tooluse.run_openai_responses(client, Session(DAEMON.client()), model="m", input="x", store=False)

    def test_max_turns(self) -> None:
        client = clients.OpenAI(API_KEY, self.fake.openai_url)
        with self.assertRaises(tooluse.MaxTurnsExceeded) as cm:
            tooluse.run_openai_responses(client, Session(DAEMON.client(), tools=["run_python"]), max_turns=2, model="m", input="fib 40")
        self.assertIsNotNone(cm.exception.last)
        with self.assertRaises(ValueError):
            tooluse.run_anthropic(client, Session(DAEMON.client()), max_turns=0, messages=[])


if __name__ == "__main__":
    unittest.main()
