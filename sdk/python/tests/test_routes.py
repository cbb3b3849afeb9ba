"""Every route of the API through the sync and the async client, against a
real paddockd (see _support.Daemon). The docs/sdks.md table lists them."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
import unittest
import urllib.request
import uuid
from datetime import datetime, timedelta, timezone

from _support import Daemon

import paddock

DAEMON: Daemon = None  # type: ignore[assignment]


def setUpModule() -> None:
    global DAEMON
    DAEMON = Daemon().start()


def tearDownModule() -> None:
    if DAEMON is not None:
        DAEMON.stop()


def _get(url: str, headers: dict, timeout: float = 10) -> bytes:
    req = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read()


def _wait_port(ports, port: int, deadline: float = 20):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        for p in ports():
            if p.port == port:
                return p
        time.sleep(0.2)
    raise AssertionError(f"port {port} never listed")


class SyncRoutes(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.c = DAEMON.client()

    def test_system(self) -> None:
        self.assertEqual(self.c.health().status, "ok")
        self.assertIn("openapi:", self.c.openapi())
        self.assertIn("# TYPE", self.c.metrics_text())

    def test_create_every_option_and_lifecycle(self) -> None:
        self.c.create_secret("TOKEN_" + uuid.uuid4().hex[:6].upper(), "s3cret", ["example.com"])
        name = self.c.secrets()[0].name
        with paddock.Sandbox.create(
            "base", client=self.c, timeout=timedelta(minutes=10), env={"A": "1"}, metadata={"t": "routes"},
            resources={"memory_mib": 256, "vcpus": 0.5}, network={"mode": "allowlist", "allow": ["example.com"]},
            secrets=[name], on_timeout="pause", max_cost_micros=1_000_000,
        ) as sbx:
            i = sbx.info
            self.assertEqual((i.on_timeout, i.max_cost_micros, i.secrets), ("pause", 1_000_000, [name]))
            self.assertEqual((i.network.mode, i.network.allow), ("allowlist", ["example.com"]))
            self.assertEqual(sbx.exec("echo $A").stdout, "1\n")
            n = sbx.set_network({"mode": "allowlist", "allow": ["example.com", "example.org"]}).network
            self.assertEqual(n.allow, ["example.com", "example.org"])
            self.assertEqual(sbx.pause().state, "paused")
            self.assertEqual(sbx.resume().state, "running")
            before = sbx.info.expires_at
            sbx.set_timeout(3000)
            self.assertGreater(sbx.info.expires_at, before)
            m = sbx.metrics()
            self.assertEqual(m.sandbox_id, sbx.id)
            self.assertGreater(m.memory_bytes, 0)
            h = sbx.metrics_history()
            self.assertEqual((h.sandbox_id, h.max_samples), (sbx.id, 360))
            self.assertIn(sbx.id, [s.id for s in self.c.list(metadata={"t": "routes"})])
            self.assertEqual(self.c.connect(sbx.id).id, sbx.id)
        self.assertEqual(self.c.connect(sbx.id).state, "terminated")
        u = self.c.usage(since=datetime.now(timezone.utc) - timedelta(hours=1))
        self.assertGreaterEqual(u.sandboxes, 1)
        self.c.delete_secret(name)
        self.assertNotIn(name, [s.name for s in self.c.secrets()])
        with self.assertRaises(paddock.NotFound):
            self.c.delete_secret(name)

    def test_ports_and_processes(self) -> None:
        with paddock.Sandbox.create(client=self.c) as sbx:
            sbx.files.write("/srv/index.html", "hello port")
            proc = sbx.start(["python3", "-m", "http.server", "8000", "-d", "/srv"])
            self.assertIn(proc.id, [p.id for p in sbx.processes()])
            self.assertEqual(sbx.process(proc.id).state, "running")
            port = _wait_port(sbx.ports, 8000)
            self.assertTrue(port.url and port.signed_url)
            self.assertEqual(_get(sbx.port_url(8000, "index.html"), self.c.auth_headers()), b"hello port")
            self.assertEqual(_get(sbx.signed_port_url(8000, "index.html"), {}), b"hello port")
            proc.signal("SIGTERM")
            res = proc.wait(20)
            self.assertIsNotNone(res)
            events = [e.type for e in proc.output()]
            self.assertEqual(events[-1], "exit")

    def test_templates_and_snapshot(self) -> None:
        tag = "py-" + uuid.uuid4().hex[:6]
        events = list(self.c.build_template(tag + "-r", recipe={"from": "base", "steps": [{"run": "echo hi > /hello"}]}))
        self.assertEqual(events[-1].type, "done")
        self.assertEqual(events[-1].template.name.split(":")[0], tag + "-r")
        t = self.c.create_template(tag + "-copy", from_={"template": "base"})
        self.assertIn(tag + "-copy", [x.name.split(":")[0] for x in self.c.templates()])
        self.assertEqual(self.c.template(t.name).name, t.name)
        with paddock.Sandbox.create(tag + "-r", client=self.c) as sbx:
            self.assertEqual(sbx.files.read_text("/hello"), "hi\n")
            sbx.files.write("snap.txt", "kept")
            snap = sbx.snapshot(tag + "-snap")
        with paddock.Sandbox.create(snap.name, client=self.c) as sbx:
            self.assertEqual(sbx.files.read_text("snap.txt"), "kept")
        for n in (snap.name, t.name, events[-1].template.name):
            self.c.delete_template(n)
        with self.assertRaises(paddock.NotFound):
            self.c.template(t.name)

    def test_dirs(self) -> None:
        with tempfile.TemporaryDirectory() as src, tempfile.TemporaryDirectory() as dst:
            os.makedirs(os.path.join(src, "a", "b"))
            with open(os.path.join(src, "a", "b", "x.sh"), "w") as f:
                f.write("echo x")
            os.chmod(os.path.join(src, "a", "b", "x.sh"), 0o755)
            with open(os.path.join(src, "top.txt"), "w") as f:
                f.write("top")
            with paddock.Sandbox.create(client=self.c) as sbx:
                sbx.files.upload_dir(src, "/workspace/proj")
                self.assertEqual(sbx.exec("/workspace/proj/a/b/x.sh").stdout, "x\n")
                sbx.exec("echo made > /workspace/proj/a/new.txt")
                got = sbx.files.download_dir("/workspace/proj", dst)
                self.assertEqual(len(got), 3)
                with open(os.path.join(dst, "a", "new.txt")) as f:
                    self.assertEqual(f.read(), "made\n")
                self.assertTrue(os.access(os.path.join(dst, "a", "b", "x.sh"), os.X_OK))

    def test_mcp(self) -> None:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}).encode()
        h = dict(self.c.auth_headers(), **{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
        req = urllib.request.Request(self.c.mcp_url(), data=body, headers=h, method="POST")
        with urllib.request.urlopen(req, timeout=60) as r:
            sid = r.headers.get("Mcp-Session-Id")
            self.assertIn(b"serverInfo", r.read())
        if sid:
            urllib.request.urlopen(urllib.request.Request(self.c.mcp_url(), headers=dict(h, **{"Mcp-Session-Id": sid}), method="DELETE"), timeout=30).read()

    def test_timeout_is_a_result(self) -> None:
        with paddock.Sandbox.create(client=self.c) as sbx:
            r = sbx.exec("sleep 10", timeout=0.5)
            self.assertTrue(r.timed_out)
            with self.assertRaises(paddock.RequestTimeout):
                sbx.exec("sleep 5", timeout=10, request_timeout=0.5)

    def test_server_errors_are_typed(self) -> None:
        with self.assertRaises(paddock.UnknownTemplate):
            self.c.create("no-such-template")
        with self.assertRaises(paddock.NotFound):
            self.c.sandbox("sb-nope").pause()
        with self.assertRaises(paddock.BadRequest):
            self.c.create(max_cost_micros=1)


class AsyncRoutes(unittest.TestCase):
    def test_every_route(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        async with paddock.AsyncClient(DAEMON.url, DAEMON.keys[1]) as c:
            self.assertEqual((await c.health()).status, "ok")
            self.assertIn("openapi:", await c.openapi())
            self.assertIn("# TYPE", await c.metrics_text())
            sec = await c.create_secret("ASYNC_TOKEN", "v", ["example.com"])
            self.assertIn(sec.name, [s.name for s in await c.secrets()])
            async with await c.create(network={"mode": "allowlist", "allow": ["example.com"]}, secrets=[sec.name], on_timeout="kill", timeout=600, metadata={"t": "async"}) as sbx:
                self.assertEqual(sbx.info.secrets, [sec.name])
                self.assertEqual([s.id async for s in c.list(metadata={"t": "async"})], [sbx.id])
                self.assertEqual((await c.connect(sbx.id)).id, sbx.id)
                self.assertEqual((await sbx.set_network(paddock.NetworkPolicy(mode="allowlist", allow=["example.org", "example.com"]))).network.allow, ["example.org", "example.com"])
                self.assertEqual((await sbx.pause()).state, "paused")
                self.assertEqual((await sbx.resume()).state, "running")
                await sbx.set_timeout(900)
                self.assertEqual((await sbx.metrics()).sandbox_id, sbx.id)
                self.assertEqual((await sbx.metrics_history()).sandbox_id, sbx.id)
                r = await sbx.exec("sleep 10", timeout=0.3)
                self.assertTrue(r.timed_out)
                await sbx.files.mkdir("d")
                await sbx.files.write("d/f.txt", b"\x00\xff")
                self.assertEqual(await sbx.files.read("d/f.txt"), b"\x00\xff")
                self.assertEqual((await sbx.files.stat("d/f.txt")).size, 2)
                self.assertEqual([e.name for e in await sbx.files.list("d")], ["f.txt"])
                await sbx.files.remove("d", recursive=True)
                self.assertFalse(await sbx.files.exists("d"))
                await sbx.files.write("/srv/i.html", "async port")
                web = await sbx.start(["python3", "-m", "http.server", "8001", "-d", "/srv"])
                self.assertEqual((await sbx.process(web.id)).state, "running")
                self.assertIn(web.id, [p.id for p in await sbx.processes()])
                end = time.monotonic() + 20
                while 8001 not in [p.port for p in await sbx.ports()] and time.monotonic() < end:
                    await asyncio.sleep(0.2)
                url = await sbx.signed_port_url(8001, "i.html")
                self.assertEqual(await asyncio.get_running_loop().run_in_executor(None, _get, url, {}), b"async port")
                await web.kill()
                await web.wait(20)
                self.assertEqual([e.type async for e in web.output()][-1], "exit")
                cat = await sbx.start(["cat"], keep_stdin_open=True)
                await cat.write_stdin("meow", eof=True)
                self.assertEqual((await cat.wait(20)).stdout, "meow")
                tag = "apy-" + uuid.uuid4().hex[:6]
                snap = await sbx.snapshot(tag)
                self.assertEqual((await c.template(snap.name)).name, snap.name)
                self.assertIn(snap.name, [t.name for t in await c.templates()])
            evs = [e async for e in c.build_template(tag + "-b", from_={"template": snap.name})]
            self.assertEqual(evs[-1].type, "done")
            t2 = await c.create_template(tag + "-c", from_={"template": "base"})
            for n in (evs[-1].template.name, t2.name, snap.name):
                await c.delete_template(n)
            await c.delete_secret(sec.name)
            self.assertGreaterEqual((await c.usage()).sandboxes, 1)
            with self.assertRaises(paddock.NotFound):
                await c.connect("sb-nope")


if __name__ == "__main__":
    unittest.main()
