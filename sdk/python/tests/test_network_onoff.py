"""PATCH /v1/sandboxes/{id}/network across modes (off → allowlist → off)
through the sync and the async client, against a real paddockd (see
_support.Daemon)."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import unittest

from _support import Daemon

import paddock

DAEMON: Daemon = None  # type: ignore[assignment]
CONFIG = ""

LINKS = "ip -o link | awk '{print $2}' | tr -d ':' | cut -d@ -f1 | sort | tr '\\n' ' '"


def setUpModule() -> None:
    global DAEMON, CONFIG
    # A pool and ports of its own, so that another daemon with networking
    # on this host does not leave this one without.
    fd, CONFIG = tempfile.mkstemp(prefix="paddock-py-net-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump({"network": {"pool": "10.95.0.0/16", "proxy_port": 15501, "dns_port": 15553}}, f)
    DAEMON = Daemon(extra_args=["--config", CONFIG]).start()


def tearDownModule() -> None:
    if DAEMON is not None:
        DAEMON.stop()
    if CONFIG:
        os.remove(CONFIG)


class SyncOnOff(unittest.TestCase):
    def test_off_on_off(self) -> None:
        with paddock.Sandbox.create("base", client=DAEMON.client(), timeout=600) as sbx:
            self.assertEqual(sbx.info.network.mode, "off")
            self.assertEqual(sbx.exec(LINKS).stdout.split(), ["lo"])
            info = sbx.set_network({"mode": "allowlist", "allow": ["example.com"]})
            self.assertEqual((info.network.mode, info.network.allow), ("allowlist", ["example.com"]))
            self.assertEqual(sbx.exec(LINKS).stdout.split(), ["eth0", "lo"])
            self.assertEqual(sbx.set_network("off").network.mode, "off")
            self.assertEqual(sbx.exec(LINKS).stdout.split(), ["lo"])
            with self.assertRaises(paddock.BadRequest):
                sbx.set_network({"mode": "allowlist", "allow": ["127.0.0.1/32"]})


class AsyncOnOff(unittest.TestCase):
    def test_off_on_off(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        async with paddock.AsyncClient(DAEMON.url, DAEMON.keys[1]) as c:
            async with await c.create(timeout=600) as sbx:
                self.assertEqual((await sbx.exec(LINKS)).stdout.split(), ["lo"])
                info = await sbx.set_network(paddock.NetworkPolicy(mode="full"))
                self.assertEqual(info.network.mode, "full")
                self.assertEqual((await sbx.exec(LINKS)).stdout.split(), ["eth0", "lo"])
                self.assertEqual((await sbx.set_network("off")).network.mode, "off")
                self.assertEqual((await sbx.exec(LINKS)).stdout.split(), ["lo"])


if __name__ == "__main__":
    unittest.main()
