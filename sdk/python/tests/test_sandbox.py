"""The SDK against a real paddockd (see _support.Daemon)."""

from __future__ import annotations

import asyncio
import os
import time
import unittest
import uuid
from datetime import datetime, timezone
from unittest import mock

from _support import Daemon

import paddock
from paddock import Sandbox

DAEMON: Daemon = None  # type: ignore[assignment]
MAX_FILE_BYTES = 4 << 20


def setUpModule() -> None:
    global DAEMON
    DAEMON = Daemon(extra_args=["--max-file-bytes", str(MAX_FILE_BYTES)]).start()


def tearDownModule() -> None:
    if DAEMON is not None:
        DAEMON.stop()


class SandboxTest(unittest.TestCase):
    """Tests sharing one sandbox (created once for the class)."""

    sbx: Sandbox

    @classmethod
    def setUpClass(cls) -> None:
        cls.client = DAEMON.client()
        cls.sbx = Sandbox.create(client=cls.client, metadata={"suite": "sandbox-test"})

    @classmethod
    def tearDownClass(cls) -> None:
        cls.sbx.close()

    def test_health(self) -> None:
        h = paddock.Client(DAEMON.url, "").health()  # no key needed
        self.assertEqual(h.status, "ok")
        self.assertTrue(h.version)

    def test_info(self) -> None:
        info = self.sbx.info
        self.assertEqual(info.state, "running")
        self.assertEqual(info.template, "base")
        self.assertEqual(info.metadata, {"suite": "sandbox-test"})
        self.assertIsInstance(info.created_at, datetime)
        self.assertIsNotNone(info.created_at.tzinfo)
        self.assertGreater(info.expires_at, info.created_at)
        self.assertGreater(info.resources.memory_mib, 0)

    def test_write_and_run_python_file(self) -> None:
        code = "import sys\nprint(sum(range(10)))\nprint('warn', file=sys.stderr)\n"
        entry = self.sbx.files.write("prog/main.py", code)
        self.assertEqual(entry.path, "/workspace/prog/main.py")
        self.assertEqual(entry.size, len(code))
        res = self.sbx.exec(["python3", "main.py"], cwd="prog", timeout=30)
        self.assertIsInstance(res, paddock.ExecResult)
        self.assertTrue(res.ok)
        self.assertEqual(res.exit_code, 0)
        self.assertIsNone(res.signal)
        self.assertFalse(res.timed_out)
        self.assertEqual(res.stdout, "45\n")
        self.assertEqual(res.stderr, "warn\n")
        self.assertEqual((res.stdout_bytes, res.stderr_bytes), (3, 5))
        self.assertGreaterEqual(res.duration_ms, 0)

    def test_argv_form_is_not_a_shell(self) -> None:
        res = self.sbx.exec(["echo", "$HOME", "a b", "|", "c;d"])
        self.assertEqual(res.stdout, "$HOME a b | c;d\n")

    def test_shell_form(self) -> None:
        res = self.sbx.exec("echo $GREETING | tr a-z A-Z && echo two >&2", env={"GREETING": "hello"})
        self.assertTrue(res.ok, res)
        self.assertEqual(res.stdout, "HELLO\n")
        self.assertEqual(res.stderr, "two\n")
        self.assertEqual(self.sbx.exec("pwd").stdout, "/workspace\n")
        self.assertEqual(self.sbx.exec("pwd", cwd="/tmp").stdout, "/tmp\n")

    def test_stdin_text_and_bytes(self) -> None:
        res = self.sbx.exec(["python3", "-c", "import sys; print(sys.stdin.read().upper())"], stdin="hi there")
        self.assertEqual(res.stdout, "HI THERE\n")
        blob = bytes(range(256)) * 4
        res = self.sbx.exec(["python3", "-c", "import sys, hashlib; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())"], stdin=blob)
        import hashlib

        self.assertEqual(res.stdout.strip(), hashlib.sha256(blob).hexdigest())

    def test_large_stdin(self) -> None:
        # Large bodies stream their stdin (stdin last, Paddock-Stdin-Last).
        blob = bytes(range(256)) * (8 << 10)  # 2 MiB
        res = self.sbx.exec(["wc", "-c"], stdin=blob)
        self.assertEqual(res.stdout, "2097152\n")
        text = "é" * (1 << 20)
        with self.sbx.exec_stream(["wc", "-c"], stdin=text) as stream:
            out = b"".join(ev.data for ev in stream if ev.data)
        self.assertEqual(out, b"2097152\n")

    def test_nonzero_exit_is_a_result(self) -> None:
        res = self.sbx.exec(["python3", "-c", "import sys; print('bad', file=sys.stderr); sys.exit(3)"])
        self.assertFalse(res.ok)
        self.assertEqual(res.exit_code, 3)
        self.assertEqual(res.stderr, "bad\n")
        res = self.sbx.exec(["python3", "-c", "1/0"])
        self.assertEqual(res.exit_code, 1)
        self.assertIn("ZeroDivisionError", res.stderr)

    def test_timeout_is_a_result(self) -> None:
        t0 = time.monotonic()
        res = self.sbx.exec("echo start; sleep 30; echo never", timeout=1)
        self.assertLess(time.monotonic() - t0, 15)
        self.assertTrue(res.timed_out)
        self.assertFalse(res.ok)
        self.assertIsNone(res.exit_code)
        self.assertEqual(res.signal, "SIGKILL")
        self.assertEqual(res.stdout, "start\n")
        self.assertGreaterEqual(res.duration_ms, 900)

    def test_output_truncation(self) -> None:
        res = self.sbx.exec(["python3", "-c", "import sys; print('x' * 100000); sys.stderr.write('e' * 10)"], max_output_bytes=1000)
        self.assertTrue(res.ok)
        self.assertTrue(res.stdout_truncated)
        self.assertFalse(res.stderr_truncated)
        self.assertEqual(res.stdout, "x" * 1000)
        self.assertEqual(res.stdout_bytes, 100001)
        self.assertEqual(res.stderr, "e" * 10)
        self.assertEqual(res.stderr_bytes, 10)

    def test_exec_stream(self) -> None:
        stream = self.sbx.exec_stream(
            "for i in 1 2 3; do echo $i; sleep 0.2; done; printf '\\x00\\xff' ; echo oops >&2; exit 3", timeout=20
        )
        events = list(stream)
        self.assertEqual(events[0].type, "start")
        self.assertGreater(events[0].pid, 0)
        self.assertEqual(events[-1].type, "exit")
        out = b"".join(e.data for e in events if e.type == "stdout")
        err = b"".join(e.data for e in events if e.type == "stderr")
        self.assertEqual(out, b"1\n2\n3\n\x00\xff")
        self.assertEqual(err, b"oops\n")
        self.assertGreaterEqual(sum(1 for e in events if e.type == "stdout"), 2, "output should arrive in chunks")
        res = stream.result
        self.assertIsNotNone(res)
        self.assertEqual(res, events[-1].result)
        self.assertEqual(res.exit_code, 3)
        self.assertEqual((res.stdout_bytes, res.stderr_bytes), (8, 5))
        self.assertEqual(res.stdout, "")

    def test_exec_stream_live_and_early_close(self) -> None:
        t0 = time.monotonic()
        with self.sbx.exec_stream(["python3", "-u", "-c", "import time\nprint('first')\ntime.sleep(20)"], timeout=30) as stream:
            got = ""
            for ev in stream:
                if ev.type == "stdout":
                    got += ev.text
                    if got == "first\n":
                        break
        self.assertEqual(got, "first\n")
        self.assertLess(time.monotonic() - t0, 10, "the first chunk should arrive before the command ends")
        self.assertIsNone(stream.result)

    def test_exec_stream_timeout(self) -> None:
        stream = self.sbx.exec_stream("sleep 30", timeout=0.5)
        res = stream.wait()
        self.assertTrue(res.timed_out)

    def test_binary_file_round_trip(self) -> None:
        blob = os.urandom(300_000) + bytes(range(256))
        entry = self.sbx.files.write("/tmp/data/blob.bin", blob, mode=0o600)
        self.assertEqual(entry.size, len(blob))
        self.assertEqual(entry.mode, "0600")
        self.assertTrue(entry.is_file)
        self.assertEqual(self.sbx.files.read("/tmp/data/blob.bin"), blob)
        res = self.sbx.exec(["sha256sum", "/tmp/data/blob.bin"])
        import hashlib

        self.assertEqual(res.stdout.split()[0], hashlib.sha256(blob).hexdigest())
        # A file written in the sandbox reads back byte for byte.
        self.sbx.exec(["python3", "-c", "open('gen.bin','wb').write(bytes(range(256))*3)"])
        self.assertEqual(self.sbx.files.read("gen.bin"), bytes(range(256)) * 3)

    def test_files_operations(self) -> None:
        f = self.sbx.files
        d = f.mkdir("tree/sub/deeper")
        self.assertTrue(d.is_dir)
        self.assertEqual(d.path, "/workspace/tree/sub/deeper")
        f.write("tree/a.txt", "héllo\n")
        f.write("tree/sub/run.sh", "#!/bin/sh\necho ran\n", mode="0755")
        self.assertEqual(f.read_text("tree/a.txt"), "héllo\n")
        self.assertEqual(f.stat("tree/sub/run.sh").mode, "0755")
        self.assertEqual(self.sbx.exec(["./tree/sub/run.sh"]).stdout, "ran\n")
        names = sorted(e.name for e in f.list("tree"))
        self.assertEqual(names, ["a.txt", "sub"])
        deep = sorted(e.path for e in f.list("tree", depth=3))
        self.assertIn("/workspace/tree/sub/deeper", deep)
        self.assertIn("/workspace/tree/sub/run.sh", deep)
        self.assertIn("/workspace/tree", [e.path for e in f.list()])
        self.sbx.exec("ln -sf /etc/passwd tree/link")
        link = next(e for e in f.list("tree") if e.name == "link")
        self.assertEqual((link.type, link.link_target), ("symlink", "/etc/passwd"))
        self.assertTrue(f.exists("tree/a.txt"))
        self.assertFalse(f.exists("tree/nope"))
        with self.assertRaises(paddock.NotFound):
            f.read("tree/nope")
        with self.assertRaises(paddock.PaddockError) as cm:
            f.remove("tree")  # not empty
        self.assertIn(cm.exception.status, (400, 409))
        f.remove("tree/a.txt")
        self.assertFalse(f.exists("tree/a.txt"))
        f.remove("tree", recursive=True)
        self.assertFalse(f.exists("tree"))

    def test_file_too_large(self) -> None:
        with self.assertRaises(paddock.TooLarge) as cm:
            self.sbx.files.write("big.bin", b"\0" * (MAX_FILE_BYTES + 1))
        self.assertEqual((cm.exception.status, cm.exception.code), (413, "too_large"))

    def test_background_process_with_stdin(self) -> None:
        proc = self.sbx.start(
            ["python3", "-u", "-c", "import sys\nfor line in sys.stdin:\n    print(line.strip()[::-1])\nprint('bye')"],
            keep_stdin_open=True,
        )
        self.assertIsInstance(proc, paddock.Process)
        self.assertEqual(proc.state, "running")
        self.assertGreater(proc.pid, 0)
        self.assertIsNone(proc.wait(timeout=0.3), "still waiting for stdin")
        proc.write_stdin("hello\n")
        proc.write_stdin(b"world\n", eof=True)
        res = proc.wait(timeout=20)
        self.assertIsNotNone(res)
        self.assertEqual(proc.state, "exited")
        self.assertEqual(res.exit_code, 0)
        self.assertEqual(res.stdout, "olleh\ndlrow\nbye\n")
        # The output stream replays everything and ends with the exit event.
        events = list(proc.output())
        self.assertEqual(b"".join(e.data for e in events if e.type == "stdout"), b"olleh\ndlrow\nbye\n")
        self.assertEqual(events[-1].type, "exit")
        self.assertIn(proc.id, [p.id for p in self.sbx.processes()])
        self.assertEqual(self.sbx.process(proc.id).state, "exited")

    def test_background_process_live_output_and_kill(self) -> None:
        proc = self.sbx.start("for i in $(seq 1 1000); do echo tick $i; sleep 0.1; done")
        got = b""
        stream = proc.output(timeout=30)
        for ev in stream:
            if ev.type == "stdout":
                got += ev.data
            if b"tick 3\n" in got:
                break
        stream.close()
        self.assertTrue(got.startswith(b"tick 1\n"))
        proc.kill()
        res = proc.wait(timeout=20)
        self.assertIsNotNone(res)
        self.assertIsNone(res.exit_code)
        self.assertEqual(res.signal, "SIGKILL")

    def test_background_process_signal(self) -> None:
        proc = self.sbx.start(["sleep", "60"])
        proc.signal("SIGTERM")
        res = proc.wait(timeout=20)
        self.assertEqual(res.signal, "SIGTERM")

    def test_set_timeout(self) -> None:
        before = self.sbx.refresh().expires_at
        info = self.sbx.set_timeout(3600)
        self.assertGreater(info.expires_at, before)
        left = (info.expires_at - datetime.now(timezone.utc)).total_seconds()
        self.assertTrue(3500 < left <= 3601, left)
        self.assertEqual(self.sbx.expires_at, info.expires_at)
        self.sbx.set_timeout(600)

    def test_bad_input_is_bad_request(self) -> None:
        with self.assertRaises(paddock.BadRequest) as cm:
            self.sbx.exec("echo", max_output_bytes=1 << 30)
        e = cm.exception
        self.assertEqual((e.status, e.code), (400, "bad_request"))
        self.assertTrue(e.message)
        self.assertIn("bad_request", str(e))
        with self.assertRaises(ValueError):
            self.sbx.exec([])  # neither argv nor command: refused before sending
        with self.assertRaises(ValueError):
            self.sbx.exec_stream("true", timeout=-1)
        with self.assertRaises(TypeError):
            self.sbx.exec(b"echo")  # type: ignore[arg-type]

    def test_unknown_process(self) -> None:
        with self.assertRaises(paddock.NotFound):
            self.sbx.process("proc-does-not-exist")


class LifecycleTest(unittest.TestCase):
    def setUp(self) -> None:
        self.client = DAEMON.client()

    def test_context_manager_deletes(self) -> None:
        with Sandbox.create(client=self.client, timeout=120) as sbx:
            self.assertEqual(sbx.exec("echo hi").stdout, "hi\n")
            sid = sbx.id
        self.assertTrue(sbx.closed)
        info = self.client.connect(sid).info
        self.assertEqual(info.state, "terminated")
        self.assertEqual(info.reason, "deleted")
        self.assertIsNotNone(info.ended_at)

    def test_context_manager_deletes_on_exception(self) -> None:
        with self.assertRaises(ZeroDivisionError):
            with Sandbox.create(client=self.client) as sbx:
                sid = sbx.id
                1 / 0
        self.assertEqual(self.client.connect(sid).state, "terminated")

    def test_context_manager_keeps_the_original_exception(self) -> None:
        # The sandbox is deleted behind the handle's back: close must not
        # replace the exception that ended the block.
        with self.assertRaises(KeyError):
            with Sandbox.create(client=self.client) as sbx:
                other = paddock.Client(DAEMON.url, "bad-key")
                sbx.client = other  # close() will now fail with 401
                raise KeyError("original")
        self.client.sandbox(sbx.id).kill()

    def test_kill_and_close_are_idempotent(self) -> None:
        sbx = Sandbox.create(client=self.client)
        sbx.kill()
        sbx.kill()
        sbx.close()
        # Another handle on the same, already deleted sandbox.
        self.client.sandbox(sbx.id).close()
        self.client.sandbox("sb-never-existed").kill()
        with self.assertRaises(paddock.Conflict):
            self.client.sandbox(sbx.id).exec("true")

    def test_connect(self) -> None:
        with Sandbox.create(client=self.client, env={"FOO": "bar"}) as sbx:
            again = Sandbox.connect(sbx.id, client=self.client)
            self.assertEqual(again.id, sbx.id)
            self.assertEqual(again.state, "running")
            again.files.write("x.txt", "shared")
            self.assertEqual(sbx.files.read_text("x.txt"), "shared")
            self.assertEqual(sbx.exec("echo $FOO").stdout, "bar\n")

    def test_env_configuration(self) -> None:
        env = {"PADDOCK_URL": DAEMON.url + "/v1/", "PADDOCK_API_KEY": DAEMON.keys[0] + "\n"}
        with mock.patch.dict(os.environ, env):
            with Sandbox.create() as sbx:
                self.assertTrue(sbx.exec(["true"]).ok)
                self.assertEqual(sbx.client.url, DAEMON.url)

    def test_create_options(self) -> None:
        with Sandbox.create(
            "base",
            client=self.client,
            timeout=90,
            metadata={"k": "v"},
            resources=paddock.Resources(memory_mib=256, pids=64),
        ) as sbx:
            self.assertEqual(sbx.info.resources.memory_mib, 256)
            self.assertEqual(sbx.info.resources.pids, 64)
            left = (sbx.expires_at - sbx.info.created_at).total_seconds()
            self.assertAlmostEqual(left, 90, delta=5)
        with Sandbox.create(client=self.client, resources={"vcpus": 0.5}) as sbx:
            self.assertEqual(sbx.info.resources.vcpus, 0.5)

    def test_list_with_metadata_filter(self) -> None:
        tag = uuid.uuid4().hex[:8]
        made = [
            Sandbox.create(client=self.client, metadata={"suite": tag, "user": "alice"}),
            Sandbox.create(client=self.client, metadata={"suite": tag, "user": "bob"}),
            Sandbox.create(client=self.client, metadata={"suite": tag, "user": "alice"}),
        ]
        try:
            ids = lambda it: sorted(s.id for s in it)  # noqa: E731
            self.assertEqual(ids(self.client.list(metadata={"suite": tag})), ids(made))
            alice = ids(self.client.list(metadata={"suite": tag, "user": "alice"}))
            self.assertEqual(alice, ids([made[0], made[2]]))
            # Pages of one are followed to the end.
            self.assertEqual(ids(self.client.list(metadata={"suite": tag}, limit=1)), ids(made))
            page = self.client.list_page(metadata={"suite": tag}, limit=2)
            self.assertEqual(len(page.sandboxes), 2)
            self.assertTrue(page.next_cursor)
            made[1].kill()
            self.assertEqual(ids(self.client.list(metadata={"suite": tag})), ids([made[0], made[2]]))
            self.assertEqual(ids(self.client.list(metadata={"suite": tag}, state="all")), ids(made))
            self.assertEqual(ids(self.client.list(metadata={"suite": tag}, state="terminated")), [made[1].id])
            listed = next(iter(self.client.list(metadata={"suite": tag, "user": "bob"}, state="all")))
            self.assertEqual(listed.metadata, {"suite": tag, "user": "bob"})
        finally:
            for s in made:
                s.close()

    def test_not_found(self) -> None:
        with self.assertRaises(paddock.NotFound) as cm:
            Sandbox.connect("sb-unknown", client=self.client)
        e = cm.exception
        self.assertEqual((e.status, e.code), (404, "not_found"))
        self.assertIsInstance(e, paddock.PaddockError)
        with self.assertRaises(paddock.NotFound):
            self.client.sandbox("sb-unknown").exec("true")
        with self.assertRaises(paddock.NotFound):
            self.client.sandbox("sb-unknown").files.read("x")

    def test_other_keys_sandbox_is_not_found(self) -> None:
        with Sandbox.create(client=self.client) as sbx:
            bob = DAEMON.client(1)
            with self.assertRaises(paddock.NotFound):
                bob.connect(sbx.id)
            self.assertNotIn(sbx.id, [s.id for s in bob.list()])

    def test_bad_key_is_unauthorized(self) -> None:
        bad = paddock.Client(DAEMON.url, "pdk_not_a_key")
        with self.assertRaises(paddock.Unauthorized) as cm:
            list(bad.list())
        self.assertEqual((cm.exception.status, cm.exception.code), (401, "unauthorized"))
        with self.assertRaises(paddock.Unauthorized):
            Sandbox.create(client=paddock.Client(DAEMON.url, ""))

    def test_bad_create_is_bad_request(self) -> None:
        with self.assertRaises(paddock.BadRequest):
            Sandbox.create(client=self.client, timeout=100000)

    def test_unknown_template(self) -> None:
        with self.assertRaises(paddock.UnknownTemplate) as cm:
            Sandbox.create("no-such-template", client=self.client)
        self.assertEqual((cm.exception.status, cm.exception.code), (422, "unknown_template"))

    def test_unreachable_daemon(self) -> None:
        from _support import free_port

        c = paddock.Client(f"127.0.0.1:{free_port()}", "k", timeout=5)
        with self.assertRaises(paddock.TransportError) as cm:
            c.health()
        self.assertIsNone(cm.exception.status)
        self.assertIsInstance(cm.exception, paddock.PaddockError)


class AsyncTest(unittest.TestCase):
    def test_async_sandbox(self) -> None:
        sync_client = DAEMON.client()
        client = paddock.AsyncClient(DAEMON.url, DAEMON.keys[0])

        async def main() -> None:
            async with await paddock.AsyncSandbox.create(client=client, metadata={"suite": "async"}) as sbx:
                await sbx.files.write("a.py", "print(6 * 7)")
                self.assertEqual(await sbx.files.read_text("a.py"), "print(6 * 7)")
                res, res2 = await asyncio.gather(sbx.exec(["python3", "a.py"]), sbx.exec("sleep 0.5; echo done"))
                self.assertEqual((res.stdout, res2.stdout), ("42\n", "done\n"))
                stream = sbx.exec_stream("echo a; echo b >&2")
                types = [ev.type async for ev in stream]
                self.assertEqual(types[0], "start")
                self.assertEqual(types[-1], "exit")
                self.assertEqual(stream.result.exit_code, 0)
                proc = await sbx.start(["cat"], keep_stdin_open=True)
                await proc.write_stdin("meow", eof=True)
                self.assertEqual((await proc.wait(20)).stdout, "meow")
                sid = sbx.id
            self.assertEqual(sync_client.connect(sid).state, "terminated")
            with self.assertRaises(paddock.NotFound):
                await paddock.AsyncSandbox.connect("sb-unknown", client=client)

        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
