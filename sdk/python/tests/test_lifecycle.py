"""Stop and start with files kept, pause retention and idle auto-resume
through the sync and the async client, against a real paddockd."""

from __future__ import annotations

import asyncio
import time
import unittest
from datetime import timedelta

from _support import Daemon

import paddock

DAEMON: Daemon = None  # type: ignore[assignment]


def setUpModule() -> None:
    global DAEMON
    DAEMON = Daemon(extra_args=["--pause-retention", "600", "--max-pause-retention", "1200"]).start()


def tearDownModule() -> None:
    if DAEMON is not None:
        DAEMON.stop()


def _history(info: paddock.SandboxInfo) -> str:
    return " ".join(f"{e.state}/{e.reason}" for e in info.history)


class SyncLifecycle(unittest.TestCase):
    def test_stop_boot_and_auto_resume(self) -> None:
        c = DAEMON.client()
        with paddock.Sandbox.create(client=c, idle_timeout=timedelta(hours=1), on_idle="stop", auto_resume=True) as sbx:
            self.assertEqual((sbx.info.idle_timeout_seconds, sbx.info.on_idle, sbx.info.auto_resume), (3600, "stop", True))
            sbx.files.write("kept.txt", "kept")
            info = sbx.stop(keep_for=timedelta(minutes=10))
            self.assertEqual(info.state, "stopped")
            self.assertIsNotNone(info.stopped_at)
            self.assertAlmostEqual((info.expires_at - info.stopped_at).total_seconds(), 600, delta=1)
            self.assertEqual(sbx.boot().state, "running")
            self.assertEqual(sbx.files.read("kept.txt"), b"kept")
            sbx.stop()
            # auto_resume: the next call starts it transparently.
            self.assertEqual(sbx.exec("cat /workspace/kept.txt").stdout, "kept")
            self.assertTrue(_history(sbx.refresh()).endswith("stopped/stopped running/auto_resume"))

    def test_pause_retention(self) -> None:
        c = DAEMON.client()
        with paddock.Sandbox.create(client=c) as sbx:
            with self.assertRaises(paddock.BadRequest):
                sbx.pause(keep_for=1201)
            info = sbx.pause(keep_for=900, then_stop_after=1)
            self.assertAlmostEqual((info.expires_at - info.paused_at).total_seconds(), 900, delta=1)
            self.assertIsNotNone(info.stop_at)
            deadline = time.monotonic() + 30
            while sbx.refresh().state != "stopped" and time.monotonic() < deadline:
                time.sleep(0.2)
            self.assertEqual((sbx.info.state, sbx.info.reason), ("stopped", "stopped after pause"))
            self.assertEqual(sbx.resume().state, "running")

    def test_bad_input(self) -> None:
        c = DAEMON.client()
        sbx = c.sandbox("sb-nope")
        for call, exc in [
            (lambda: sbx.pause(keep_for="1h"), TypeError),
            (lambda: sbx.pause(keep_for=5, then_stop_after=10), ValueError),
            (lambda: sbx.stop(keep_for=-1), ValueError),
            (lambda: c.create(on_idle="nap"), ValueError),
            (lambda: c.create(auto_resume="yes"), TypeError),
            (lambda: c.create(idle_timeout=0), ValueError),
        ]:
            with self.assertRaises(exc):
                call()
        with self.assertRaises(paddock.NotFound):
            sbx.boot()


class AsyncLifecycle(unittest.TestCase):
    def test_async(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        async with paddock.AsyncClient(DAEMON.url, DAEMON.keys[1]) as c:
            async with await c.create(auto_resume=True, idle_timeout=3600, idle_counts_processes=True) as sbx:
                self.assertTrue(sbx.info.idle_counts_processes)
                await sbx.files.write("a.txt", b"async")
                self.assertEqual((await sbx.stop(keep_for=60)).state, "stopped")
                self.assertEqual((await sbx.boot()).state, "running")
                self.assertEqual(await sbx.files.read("a.txt"), b"async")
                self.assertEqual((await sbx.pause(keep_for=120)).state, "paused")
                r = await sbx.exec("cat /workspace/a.txt")
                self.assertEqual(r.stdout, "async")
                info = await sbx.refresh()
                self.assertTrue(_history(info).endswith("paused/paused running/auto_resume"), _history(info))


if __name__ == "__main__":
    unittest.main()
