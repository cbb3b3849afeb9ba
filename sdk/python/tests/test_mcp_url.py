"""Client.mcp_url with session options against a real paddockd: a session
attached to an existing sandbox of the key, refused for another key's."""

from __future__ import annotations

import json
import unittest
import urllib.error
import urllib.request

from _support import Daemon

import paddock

DAEMON: Daemon = None  # type: ignore[assignment]


def setUpModule() -> None:
    global DAEMON
    DAEMON = Daemon().start()


def tearDownModule() -> None:
    if DAEMON is not None:
        DAEMON.stop()


def initialize(c: paddock.Client, url: str) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}).encode()
    h = dict(c.auth_headers(), **{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
    with urllib.request.urlopen(urllib.request.Request(url, data=body, headers=h, method="POST"), timeout=60) as r:
        out = r.read()
        sid = r.headers.get("Mcp-Session-Id")
    if sid:
        try:
            urllib.request.urlopen(urllib.request.Request(url, headers=dict(h, **{"Mcp-Session-Id": sid}), method="DELETE"), timeout=30).read()
        except urllib.error.HTTPError as e:
            if e.code != 404:  # a session whose initialize failed is gone already
                raise
    return out


class MCPURL(unittest.TestCase):
    def test_attach(self) -> None:
        alice, bob = DAEMON.client(0), DAEMON.client(1)
        with paddock.Sandbox.create(client=alice) as sbx:
            url = alice.mcp_url(sandbox=sbx.id)
            self.assertEqual(url, paddock.AsyncClient(alice.url, alice.api_key).mcp_url(sandbox=sbx.id))
            self.assertIn(b"serverInfo", initialize(alice, url))
            self.assertEqual(sbx.refresh().state, "running", "an attached session never deletes its sandbox")
            self.assertIn(b"not found", initialize(bob, bob.mcp_url(sandbox=sbx.id)))

    def test_create_options(self) -> None:
        c = DAEMON.client(0)
        url = c.mcp_url(template="base", sandbox_timeout=900, timeout=30, network="off")
        self.assertIn(b"serverInfo", initialize(c, url))


if __name__ == "__main__":
    unittest.main()
