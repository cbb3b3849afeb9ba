"""Terminals (open_pty, ptys, kill_pty) and file watches (files.watch),
sync and asyncio, against a real paddockd; plus the WebSocket codec."""

from __future__ import annotations

import asyncio
import struct
import unittest

from _support import Daemon

import paddock
from paddock import _ws

DAEMON: Daemon = None  # type: ignore[assignment]
BASH = ["bash", "--norc", "--noprofile", "-i"]
PS1 = {"PS1": "py$ "}


def setUpModule() -> None:
    global DAEMON
    DAEMON = Daemon().start()


def tearDownModule() -> None:
    if DAEMON is not None:
        DAEMON.stop()


class CodecTest(unittest.TestCase):
    def test_frames_round_trip(self) -> None:
        for n in (0, 5, 125, 126, 70000):
            f = _ws.frame(_ws.OP_BINARY, b"x" * n)
            # unmask as a server would, then re-frame unmasked and parse
            off = 2 + (2 if 126 <= n < 65536 else 8 if n >= 65536 else 0)
            mask, payload = f[off : off + 4], f[off + 4 :]
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            self.assertEqual(data, b"x" * n)
            server = bytes([0x82]) + (bytes([n]) if n < 126 else bytes([126]) + struct.pack("!H", n) if n < 65536 else bytes([127]) + struct.pack("!Q", n)) + data
            buf = bytearray(server)

            def read(k: int) -> bytes:
                out = bytes(buf[:k])
                del buf[:k]
                return out

            m = _ws.read_message(read, lambda b: None)
            self.assertEqual((m.opcode, m.data), (_ws.OP_BINARY, b"x" * n))

    def test_oversized_message_refused(self) -> None:
        head = bytes([0x82, 127]) + struct.pack("!Q", _ws.MAX_MESSAGE + 1)
        buf = bytearray(head)

        def read(k: int) -> bytes:
            out = bytes(buf[:k])
            del buf[:k]
            return out

        with self.assertRaises(paddock.TransportError):
            _ws.read_message(read, lambda b: None)


class SyncTerminal(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.sbx = DAEMON.client().create()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.sbx.kill()

    def test_bash_prompt_resize_exit(self) -> None:
        with self.sbx.open_pty(BASH, env=PS1, cols=80, rows=24) as t:
            self.assertTrue(t.id and t.pid > 1)
            t.read_until("py$ ")
            t.write("stty size\n")
            t.read_until("24 80")
            t.resize(100, 30)
            t.write("stty size\n")
            t.read_until("30 100")
            t.write("exit 4\n")
            self.assertEqual(t.wait(timeout=30), 4)
            self.assertTrue(t.exited)

    def test_several_list_kill(self) -> None:
        a = self.sbx.open_pty("echo one; exec sleep 100")
        b = self.sbx.open_pty(["sleep", "100"])
        try:
            a.read_until("one")
            ids = {p.id for p in self.sbx.ptys()}
            self.assertTrue({a.id, b.id} <= ids)
            self.sbx.kill_pty(b.id)
            self.assertIsNone(b.wait(timeout=30))
            self.assertEqual(b.signal, "SIGKILL")
        finally:
            a.close()
            b.close()
        with self.assertRaises(paddock.NotFound):
            self.sbx.kill_pty("t_424242")

    def test_errors_before_upgrade(self) -> None:
        with self.assertRaises(paddock.BadRequest):
            self.sbx.open_pty(cwd="/nonexistent")
        with self.assertRaises(paddock.BadRequest):
            self.sbx.open_pty(cols=0)
        with self.assertRaises(paddock.NotFound):
            DAEMON.client(1).connect(self.sbx.id)

    def test_watch(self) -> None:
        self.sbx.exec("mkdir -p wp")
        with self.sbx.files.watch("wp", recursive=True) as w:
            self.sbx.exec("touch wp/a && mv wp/a wp/b && rm wp/b")
            got = []
            for ev in w:
                got.append((ev.type, ev.path, ev.old_path))
                if ev.type == "remove":
                    break
        self.assertEqual(got, [("create", "/workspace/wp/a", ""), ("rename", "/workspace/wp/b", "/workspace/wp/a"), ("remove", "/workspace/wp/b", "")])
        with self.assertRaises(paddock.BadRequest):
            self.sbx.files.watch("/etc/hostname")

    def test_watch_limit(self) -> None:
        with DAEMON.client().create() as sbx:
            ws = [sbx.files.watch(".") for _ in range(8)]
            try:
                with self.assertRaises(paddock.LimitExceeded):
                    sbx.files.watch(".")
            finally:
                for w in ws:
                    w.close()


class AsyncTerminal(unittest.TestCase):
    def test_async(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        c = paddock.AsyncClient(DAEMON.url, DAEMON.keys[0])
        sbx = await c.create()
        try:
            async with await sbx.open_pty(BASH, env=PS1, cols=90, rows=20) as t:
                await t.read_until("py$ ")
                await t.write("stty size\n")
                await t.read_until("20 90")
                await t.resize(50, 10)
                await t.write("stty size\n")
                await t.read_until("10 50")
                self.assertEqual([p.id for p in await sbx.ptys()], [t.id])
                await t.write("exit 9\n")
                self.assertEqual(await t.wait(timeout=30), 9)
            t2 = await sbx.open_pty(["sleep", "100"])
            await sbx.kill_pty(t2.id)
            self.assertIsNone(await t2.wait(timeout=30))
            await t2.close()
            with self.assertRaises(paddock.BadRequest):
                await sbx.open_pty(cwd="/nonexistent")

            await sbx.exec("mkdir -p wa")
            w = await sbx.files.watch("wa")
            async with w:
                await sbx.exec("echo hi > wa/f")
                ev = await w.__anext__()
                self.assertEqual((ev.type, ev.path), ("create", "/workspace/wa/f"))
                ev = await w.__anext__()
                self.assertEqual((ev.type, ev.path), ("write", "/workspace/wa/f"))
        finally:
            await sbx.kill()


if __name__ == "__main__":
    unittest.main()
