"""Code contexts (sbx.run_code) through the sync and the async client,
against a real paddockd."""

from __future__ import annotations

import asyncio
import base64
import json
import unittest
import urllib.error
import urllib.request
from typing import Any, Dict

from _fakemodel import API_KEY, FakeModel
from _support import Daemon

import paddock
from paddock import tooluse

DAEMON: Daemon = None  # type: ignore[assignment]


def setUpModule() -> None:
    global DAEMON
    DAEMON = Daemon().start()


def tearDownModule() -> None:
    if DAEMON is not None:
        DAEMON.stop()


def main_text(ex: paddock.CodeExecution) -> str:
    return next((r.data.get("text/plain", "") for r in ex.results if r.is_main_result), "")


class SyncCode(unittest.TestCase):
    def test_run_code(self) -> None:
        with paddock.Sandbox.create(client=DAEMON.client()) as sbx:
            sbx.run_code("x = 41")
            ex = sbx.run_code("print('hi')\nx + 1")
            self.assertEqual((main_text(ex), ex.stdout, ex.execution_count), ("42", "hi\n", 2))
            chunks, results = [], []
            ex = sbx.run_code("import matplotlib.pyplot as plt\nprint('plotting')\nplt.plot([1, 2, 3])",
                              on_stdout=chunks.append, on_result=results.append)
            self.assertEqual("".join(chunks), "plotting\n")
            png = base64.b64decode(results[0].data["image/png"])
            self.assertTrue(png.startswith(b"\x89PNG"))
            self.assertEqual(ex.stdout, "plotting\n")
            ex = sbx.run_code("1/0")
            self.assertEqual(ex.error.name, "ZeroDivisionError")
            ex = sbx.run_code("while True: pass", timeout=1)
            self.assertTrue(ex.timed_out)
            self.assertEqual(main_text(sbx.run_code("x")), "41")
            ex = sbx.run_code("const v = await Promise.resolve(2); v * 21", language="javascript")
            self.assertEqual(main_text(ex), "42")

    def test_contexts(self) -> None:
        with paddock.Sandbox.create(client=DAEMON.client()) as sbx:
            ctx = sbx.create_code_context("bash")
            sbx.run_code("cd /tmp; N=3", context=ctx)
            self.assertEqual(sbx.run_code("echo $N; pwd", context=ctx.id).stdout, "3\n/tmp\n")
            self.assertEqual([c.id for c in sbx.code_contexts()], [ctx.id])
            self.assertEqual(sbx.code_context(ctx).execution_count, 2)
            self.assertFalse(sbx.interrupt_code_context(ctx).busy)
            self.assertEqual(sbx.restart_code_context(ctx).execution_count, 0)
            self.assertEqual(sbx.run_code("echo ${N:-gone}", context=ctx).stdout, "gone\n")
            sbx.delete_code_context(ctx)
            with self.assertRaises(paddock.NotFound):
                sbx.code_context(ctx)
            with self.assertRaises(paddock.BadRequest):
                sbx.run_code("1", language="cobol")


class AsyncCode(unittest.TestCase):
    def test_async(self) -> None:
        async def go() -> None:
            async with paddock.AsyncClient(DAEMON.url, DAEMON.keys[0]) as c, await c.create() as sbx:
                await sbx.run_code("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})")
                ex = await sbx.run_code("df")
                self.assertIn("<table", ex.results[0].data["text/html"])
                out = []
                ex = await sbx.run_code("print(int(df.a.sum()))", on_stdout=out.append)
                self.assertEqual(("".join(out), ex.stdout), ("3\n", "3\n"))
                ctx = await sbx.create_code_context()
                self.assertEqual(len(await sbx.code_contexts()), 2)
                self.assertEqual((await sbx.run_code("df", context=ctx)).error.name, "NameError")
                self.assertEqual((await sbx.code_context(ctx)).execution_count, 1)
                await sbx.interrupt_code_context(ctx)
                await sbx.restart_code_context(ctx)
                await sbx.delete_code_context(ctx)

        asyncio.run(go())


class _API:
    """A duck-typed model client over urllib: client.messages.create,
    client.chat.completions.create and client.responses.create."""

    def __init__(self, url: str, path: str, headers: Dict[str, str]) -> None:
        self.url, self.path, self.headers = url, path, headers
        self.completions = self

    def create(self, **params: Any) -> Any:
        req = urllib.request.Request(self.url + self.path, data=json.dumps(params).encode(),
                                     headers={"Content-Type": "application/json", **self.headers}, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:
            raise AssertionError(json.load(e)) from e


class ChartLoop(unittest.TestCase):
    """The Python tool loops against the fake model's chart conversation:
    the figure reaches the model as an image block."""

    def setUp(self) -> None:
        self.fake = FakeModel().start()
        self.addCleanup(self.fake.stop)

    def session(self) -> tooluse.Session:
        return tooluse.Session(DAEMON.client(), tools=["run_code"])

    def test_anthropic(self) -> None:
        client = type("C", (), {"messages": _API(self.fake.anthropic_url, "/v1/messages", {"x-api-key": API_KEY, "anthropic-version": "2023-06-01"})})()
        msg, _ = tooluse.run_anthropic(client, self.session(), model="m", max_tokens=100, messages=[{"role": "user", "content": "plot"}])
        self.assertEqual(msg["content"][0]["text"], "The chart is a 640x480 PNG; the sum is 45.")

    def test_responses(self) -> None:
        client = type("C", (), {"responses": _API(self.fake.openai_url, "/responses", {"Authorization": "Bearer " + API_KEY})})()
        resp = tooluse.run_openai_responses(client, self.session(), model="m", input="plot")
        text = [c["text"] for it in resp["output"] if it["type"] == "message" for c in it["content"]]
        self.assertEqual(text, ["The chart is a 640x480 PNG; the sum is 45."])

    def test_chat(self) -> None:
        client = type("C", (), {"chat": _API(self.fake.openai_url, "/chat/completions", {"Authorization": "Bearer " + API_KEY})})()
        cc, _ = tooluse.run_openai_chat(client, self.session(), model="m", messages=[{"role": "user", "content": "plot"}])
        self.assertEqual(cc["choices"][0]["message"]["content"], "The chart was made (not visible here); the sum is 45.")


if __name__ == "__main__":
    unittest.main()
