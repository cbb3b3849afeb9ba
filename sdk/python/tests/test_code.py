"""Code contexts (sbx.run_code) through the sync and the async client,
against a real paddockd."""

from __future__ import annotations

import asyncio
import base64
import unittest

from _support import Daemon

import paddock

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


if __name__ == "__main__":
    unittest.main()
