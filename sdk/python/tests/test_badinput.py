"""Bad input fails before any request, naming the parameter (no daemon:
the client points at a port nobody listens on, so a request would raise
TransportError instead)."""

from __future__ import annotations

import asyncio
import unittest
from datetime import timedelta

from _support import free_port

import paddock


class BadInput(unittest.TestCase):
    def setUp(self) -> None:
        url = f"127.0.0.1:{free_port()}"
        self.c = paddock.Client(url, "k")
        self.a = paddock.AsyncClient(url, "k")
        self.s = self.c.sandbox("sb-x")
        self.sa = self.a.sandbox("sb-x")

    def cases(self):  # type: ignore[no-untyped-def]
        c, s = self.c, self.s
        return [
            ("create template", lambda: c.create(42), TypeError, "template"),
            ("create timeout type", lambda: c.create(timeout="60"), TypeError, "timeout"),
            ("create timeout value", lambda: c.create(timeout=0), ValueError, "timeout"),
            ("create env", lambda: c.create(env={"A": 1}), TypeError, "env"),
            ("create metadata", lambda: c.create(metadata=["a"]), TypeError, "metadata"),
            ("create resources", lambda: c.create(resources={"memory": 1}), ValueError, "resources"),
            ("create resources type", lambda: c.create(resources={"memory_mib": "1G"}), TypeError, "resources.memory_mib"),
            ("create network", lambda: c.create(network="restricted"), ValueError, "network"),
            ("create network dict", lambda: c.create(network={"mode": "allowlist", "allow": "a.com"}), TypeError, "network.allow"),
            ("create secrets", lambda: c.create(secrets="TOKEN"), TypeError, "secrets"),
            ("create on_timeout", lambda: c.create(on_timeout="hibernate"), ValueError, "on_timeout"),
            ("create cost", lambda: c.create(max_cost_micros=0.5), TypeError, "max_cost_micros"),
            ("create request_timeout", lambda: c.create(request_timeout=-1), ValueError, "request_timeout"),
            ("exec empty", lambda: s.exec(""), ValueError, "cmd"),
            ("exec argv", lambda: s.exec(["echo", 1]), TypeError, "argv"),
            ("exec timeout", lambda: s.exec("true", timeout=-1), ValueError, "timeout"),
            ("exec env", lambda: s.exec("true", env={"A": None}), TypeError, "env"),
            ("exec stdin", lambda: s.exec("cat", stdin=5), TypeError, "stdin"),
            ("exec max_output_bytes", lambda: s.exec("true", max_output_bytes="1"), TypeError, "max_output_bytes"),
            ("set_timeout", lambda: s.set_timeout(None), TypeError, "timeout"),
            ("set_network", lambda: s.set_network(3), TypeError, "network"),
            ("port_url", lambda: s.port_url(70000), ValueError, "port"),
            ("files write mode", lambda: s.files.write("a", "x", mode="rw"), ValueError, "mode"),
            ("files write data", lambda: s.files.write("a", 5), TypeError, "data"),
            ("files list depth", lambda: s.files.list("/", depth="2"), TypeError, "depth"),
            ("files list depth bound", lambda: s.files.list("/", depth=21), ValueError, "at most 20"),
            ("mcp_url attach excludes", lambda: c.mcp_url(sandbox="sb-x", template="base"), ValueError, "excludes"),
            ("mcp_url timeout", lambda: c.mcp_url(timeout="60"), TypeError, "timeout"),
            ("mcp_url network", lambda: c.mcp_url(network="restricted"), ValueError, "network"),
            ("files upload", lambda: s.files.upload_dir("/nonexistent-dir", "/x"), ValueError, "local_dir"),
            ("secret hosts", lambda: c.create_secret("N", "v", []), ValueError, "hosts"),
            ("secret value", lambda: c.create_secret("N", None, ["a"]), TypeError, "value"),
            ("usage since", lambda: c.usage(since="yesterday"), TypeError, "since"),
            ("template name", lambda: c.template(""), ValueError, "name"),
            ("template option", lambda: c.create_template("t", image="x"), TypeError, "image"),
            ("snapshot", lambda: s.snapshot(None), TypeError, "name"),
            ("client url", lambda: paddock.Client(5), TypeError, "url"),
            ("client timeout", lambda: paddock.Client(request_timeout="5"), TypeError, "request_timeout"),
            ("delete secret", lambda: c.delete_secret(""), ValueError, "name"),
            ("set_timeout timedelta", lambda: s.set_timeout(timedelta(seconds=-5)), ValueError, "timeout"),
        ]

    def test_sync(self) -> None:
        for name, fn, exc, param in self.cases():
            with self.subTest(name):
                with self.assertRaises(exc) as cm:
                    fn()
                self.assertIn(param, str(cm.exception))

    def test_async(self) -> None:
        a, s = self.a, self.sa
        cases = [
            (lambda: a.create(network="restricted"), ValueError, "network"),
            (lambda: a.create(on_timeout=1), TypeError, "on_timeout"),
            (lambda: s.exec([]), ValueError, "cmd"),
            (lambda: s.set_network({"mode": "open"}), ValueError, "network.mode"),
            (lambda: s.files.write("a", "x", mode=0o10000), ValueError, "mode"),
            (lambda: a.create_secret("N", "v", "host"), TypeError, "hosts"),
            (lambda: s.snapshot(""), ValueError, "name"),
        ]

        async def main() -> None:
            for fn, exc, param in cases:
                with self.subTest(param):
                    with self.assertRaises(exc) as cm:
                        await fn()
                    self.assertIn(param, str(cm.exception))

        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
