"""Unit tests that need no paddockd: parsing, error mapping, and transport
behaviour against a tiny scripted HTTP server."""

from __future__ import annotations

import base64
import json
import os
import pickle
import socket
import threading
import time
import unittest
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Dict
from unittest import mock

import _support  # noqa: F401  (puts the SDK on sys.path)

import paddock
from paddock.errors import error_for, error_from_body
from paddock.sandbox import _exec_body, exec_headers
from paddock.types import Event, ExecResult, parse_time


class ErrorMappingTest(unittest.TestCase):
    def test_codes(self) -> None:
        cases = {
            "bad_request": (400, paddock.BadRequest),
            "unauthorized": (401, paddock.Unauthorized),
            "not_found": (404, paddock.NotFound),
            "conflict": (409, paddock.Conflict),
            "too_large": (413, paddock.TooLarge),
            "unknown_template": (422, paddock.UnknownTemplate),
            "limit_exceeded": (429, paddock.LimitExceeded),
            "internal": (500, paddock.InternalError),
            "unavailable": (502, paddock.Unavailable),
            "no_capacity": (503, paddock.NoCapacity),
            "not_supported": (501, paddock.NotSupported),
            "no_space": (507, paddock.NoSpace),
        }
        for code, (status, cls) in cases.items():
            body = json.dumps({"error": {"code": code, "message": "msg " + code}}).encode()
            e = error_from_body(status, body)
            self.assertIs(type(e), cls, code)
            self.assertEqual((e.status, e.code, e.message), (status, code, "msg " + code))
            self.assertEqual(str(e), f"msg {code} ({code})")
            self.assertIsInstance(e, paddock.PaddockError)

    def test_unknown_code_falls_back_on_status(self) -> None:
        e = error_from_body(404, b'{"error": {"code": "gone_fishing", "message": "m"}}')
        self.assertIsInstance(e, paddock.NotFound)
        self.assertEqual(e.code, "gone_fishing")
        e = error_from_body(418, b'{"error": {"code": "teapot", "message": "m"}}')
        self.assertIs(type(e), paddock.PaddockError)
        self.assertEqual((e.status, e.code), (418, "teapot"))

    def test_non_json_bodies(self) -> None:
        e = error_from_body(502, b"<html><body>Bad Gateway</body></html>")
        self.assertIsInstance(e, paddock.Unavailable)
        self.assertEqual(e.message, "")
        self.assertEqual(str(e), "bad gateway (unavailable)")
        e = error_from_body(503, b"upstream overloaded\nmore detail")
        self.assertIsInstance(e, paddock.NoCapacity)
        self.assertEqual(e.message, "upstream overloaded")
        self.assertIsInstance(error_from_body(504, b""), paddock.Unavailable)
        self.assertIsInstance(error_from_body(403, b""), paddock.Unauthorized)
        self.assertIsInstance(error_from_body(599, b"\xff\xfe"), paddock.InternalError)

    def test_pickle(self) -> None:
        e = pickle.loads(pickle.dumps(paddock.NotFound("sandbox x not found", status=404, code="not_found")))
        self.assertIsInstance(e, paddock.NotFound)
        self.assertEqual((e.status, e.code, e.message), (404, "not_found", "sandbox x not found"))

    def test_error_for_defaults(self) -> None:
        e = error_for(None, "no_space", "full")
        self.assertIsInstance(e, paddock.NoSpace)
        self.assertEqual(e.status, 507)

    def test_not_supported(self) -> None:
        body = b'{"error": {"code": "not_supported", "message": "networking is not available"}}'
        e = error_from_body(501, body)
        self.assertIs(type(e), paddock.NotSupported)
        self.assertEqual((e.status, e.code, str(e)), (501, "not_supported", "networking is not available (not_supported)"))
        self.assertIsInstance(error_from_body(501, b""), paddock.NotSupported)
        self.assertEqual(str(error_for(None, "not_supported")), "not implemented (not_supported)")
        e = pickle.loads(pickle.dumps(paddock.NotSupported("no")))
        self.assertEqual((type(e), e.status), (paddock.NotSupported, 501))


class WireShapeTest(unittest.TestCase):
    """The dataclasses against the wire shapes generated from api/openapi.yaml."""

    def test_fields_are_wire_keys(self) -> None:
        import dataclasses

        from paddock import types as t

        pairs = [
            (t.Resources, t.ResourcesJSON, set()),
            (t.SandboxInfo, t.SandboxJSON, set()),
            (t.SandboxPage, t.ListSandboxesResponseJSON, set()),
            (t.ExecResult, t.ExecResultJSON, set()),
            (t.Event, t.EventJSON, {"result"}),  # result gathers the flattened exit fields
            (t.ProcessInfo, t.ProcessJSON, set()),
            (t.FileEntry, t.FileEntryJSON, set()),
            (t.Health, t.HealthJSON, set()),
        ]
        for cls, shape, sdk_only in pairs:
            keys = shape.__required_keys__ | shape.__optional_keys__
            fields = {f.name for f in dataclasses.fields(cls)} - sdk_only
            self.assertLessEqual(fields, keys, cls.__name__)

    def test_enums(self) -> None:
        from typing import get_args

        from paddock import types as t

        self.assertEqual(get_args(t.SandboxState), ("creating", "running", "paused", "stopped", "terminated"))
        self.assertIn("not_supported", get_args(t.ErrorCode))


class ParsingTest(unittest.TestCase):
    def test_parse_time(self) -> None:
        t = parse_time("2025-06-01T12:00:00.123456789Z")
        self.assertEqual(t, datetime(2025, 6, 1, 12, 0, 0, 123456, tzinfo=timezone.utc))
        t = parse_time("2025-06-01T12:00:00+02:00")
        self.assertEqual(t.utcoffset(), timedelta(hours=2))
        self.assertEqual(parse_time("2025-06-01T12:00:00.5Z").microsecond, 500000)
        self.assertIsNone(parse_time(None))
        self.assertIsNone(parse_time(""))
        self.assertIsNone(parse_time("yesterday"))

    def test_exec_result(self) -> None:
        r = ExecResult.from_json({"exit_code": None, "signal": "SIGKILL", "timed_out": True, "stdout": "a", "stderr": "", "stdout_bytes": 1})
        self.assertFalse(r.ok)
        self.assertIsNone(r.exit_code)
        self.assertTrue(ExecResult.from_json({"exit_code": 0}).ok)
        self.assertFalse(ExecResult.from_json({"exit_code": 2}).ok)

    def test_events(self) -> None:
        ev = Event.from_json({"type": "stdout", "data": base64.b64encode(b"\x00hi\xff").decode()})
        self.assertEqual(ev.data, b"\x00hi\xff")
        self.assertEqual(ev.text, "\x00hi\ufffd")
        ev = Event.from_json({"type": "exit", "exit_code": 3, "signal": None, "stdout_bytes": 4, "process_id": "p_1"})
        self.assertEqual((ev.result.exit_code, ev.result.stdout_bytes, ev.process_id), (3, 4, "p_1"))
        ev = Event.from_json({"type": "error", "error": {"code": "unavailable", "message": "agent gone"}})
        self.assertIsInstance(ev.error, paddock.Unavailable)

    def test_exec_body(self) -> None:
        b = _exec_body(["python3", "-c", "print(1)"], timeout=timedelta(seconds=1.5), cwd=None, env=None, stdin=b"\x00\x01", max_output_bytes=10)
        self.assertEqual(b, {"argv": ["python3", "-c", "print(1)"], "timeout_seconds": 1.5, "stdin_base64": "AAE=", "max_output_bytes": 10})
        b = _exec_body("ls | wc -l", timeout=None, cwd="src", env={"A": "1"}, stdin="text", max_output_bytes=None, keep_stdin_open=True)
        self.assertEqual(b, {"command": "ls | wc -l", "cwd": "src", "env": {"A": "1"}, "stdin": "text", "keep_stdin_open": True})
        # stdin is the last member, which the header promises the daemon.
        self.assertEqual(list(json.loads(json.dumps(b)))[-1], "stdin")
        self.assertEqual(exec_headers(b), {"Paddock-Stdin-Last": "true"})
        self.assertEqual(exec_headers(_exec_body("true", timeout=None, cwd=None, env=None, stdin=None, max_output_bytes=None)), {})
        from pathlib import PurePosixPath

        self.assertEqual(_exec_body(("cat", PurePosixPath("/etc/hosts")), timeout=None, cwd=None, env=None, stdin=None, max_output_bytes=None)["argv"], ["cat", "/etc/hosts"])
        with self.assertRaises(TypeError):
            _exec_body(["echo", 1], timeout=None, cwd=None, env=None, stdin=None, max_output_bytes=None)  # type: ignore[list-item]
        with self.assertRaises(TypeError):
            _exec_body("x", timeout="5", cwd=None, env=None, stdin=None, max_output_bytes=None)  # type: ignore[arg-type]


class ClientConfigTest(unittest.TestCase):
    def test_defaults_and_env(self) -> None:
        with mock.patch.dict(os.environ, {}, clear=True):
            c = paddock.Client()
            self.assertEqual(c.url, "http://127.0.0.1:7419")
            self.assertEqual(c.api_key, "")
        with mock.patch.dict(os.environ, {"PADDOCK_URL": "example.com:9000/v1/", "PADDOCK_API_KEY": " pdk_x\n"}):
            c = paddock.Client()
            self.assertEqual((c.url, c.api_key), ("http://example.com:9000", "pdk_x"))
            c = paddock.Client("https://h.example/prefix/", "k")
            self.assertEqual((c.url, c.api_key), ("https://h.example/prefix", "k"))
        with self.assertRaises(ValueError):
            paddock.Client("ftp://x")


# -- a scripted HTTP server ----------------------------------------------------

Route = Callable[[BaseHTTPRequestHandler], None]


class FakeDaemon:
    def __init__(self, routes: Dict[str, Route]) -> None:
        self.routes = routes
        self.seen: list = []
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: object) -> None:
                pass

            def route(self) -> None:
                outer.seen.append((self.command, self.path, dict(self.headers)))
                path = self.path.split("?", 1)[0]
                fn = outer.routes.get(f"{self.command} {path}")
                if fn is None:
                    body = b'{"error":{"code":"not_found","message":"no route"}}'
                    self.send_response(404)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                fn(self)

            do_GET = do_POST = do_PUT = do_DELETE = route  # noqa: N815

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def reply(h: BaseHTTPRequestHandler, status: int, body: bytes, ctype: str = "application/json") -> None:
    h.send_response(status)
    h.send_header("Content-Type", ctype)
    h.send_header("Content-Length", str(len(body)))
    h.send_header("Connection", "close")
    h.end_headers()
    h.wfile.write(body)


def read_body(h: BaseHTTPRequestHandler) -> bytes:
    return h.rfile.read(int(h.headers.get("Content-Length") or 0))


def ndjson(h: BaseHTTPRequestHandler, lines: list) -> None:
    read_body(h)
    h.send_response(200)
    h.send_header("Content-Type", "application/x-ndjson")
    h.send_header("Connection", "close")
    h.end_headers()
    for line in lines:
        h.wfile.write(json.dumps(line).encode() + b"\n")
        h.wfile.flush()


SB = {"id": "sb1", "template": "base", "state": "running", "created_at": "2025-06-01T12:00:00Z",
      "expires_at": "2025-06-01T12:05:00Z", "metadata": {}, "resources": {}}


class TransportTest(unittest.TestCase):
    def fake(self, routes: Dict[str, Route]) -> paddock.Client:
        d = FakeDaemon(routes)
        self.addCleanup(d.close)
        self.daemon = d
        return paddock.Client(d.url, "key", timeout=5)

    def test_headers_and_paths(self) -> None:
        c = self.fake({"GET /v1/sandboxes/a%2Fb%20c": lambda h: reply(h, 200, json.dumps(SB).encode())})
        c.connect("a/b c")
        method, path, headers = self.daemon.seen[0]
        self.assertEqual(headers["Authorization"], "Bearer key")
        self.assertTrue(headers["User-Agent"].startswith("paddock-python/"))

    def test_list_follows_cursors_and_metadata_query(self) -> None:
        pages = {"": {"sandboxes": [SB], "next_cursor": "c1"}, "c1": {"sandboxes": [dict(SB, id="sb2")], "next_cursor": ""}}

        def route(h: BaseHTTPRequestHandler) -> None:
            from urllib.parse import parse_qs, urlsplit

            q = parse_qs(urlsplit(h.path).query)
            self.assertEqual(q["metadata.user"], ["alice"])
            reply(h, 200, json.dumps(pages[q.get("cursor", [""])[0]]).encode())

        c = self.fake({"GET /v1/sandboxes": route})
        self.assertEqual([s.id for s in c.list(metadata={"user": "alice"})], ["sb1", "sb2"])

    def test_repeated_cursor(self) -> None:
        c = self.fake({"GET /v1/sandboxes": lambda h: reply(h, 200, b'{"sandboxes": [], "next_cursor": "same"}')})
        with self.assertRaises(paddock.TransportError):
            list(c.list())

    def test_stream_error_event(self) -> None:
        lines = [{"type": "start", "pid": 7}, {"type": "stdout", "data": "aGkK"}, {"type": "error", "error": {"code": "unavailable", "message": "agent died"}}]
        c = self.fake({"POST /v1/sandboxes/sb1/exec": lambda h: ndjson(h, lines)})
        stream = c.sandbox("sb1").exec_stream("x")
        self.assertEqual(next(stream).pid, 7)
        self.assertEqual(next(stream).data, b"hi\n")
        with self.assertRaises(paddock.Unavailable) as cm:
            next(stream)
        self.assertEqual(cm.exception.message, "agent died")
        with self.assertRaises(StopIteration):
            next(stream)

    def test_stream_cut_short(self) -> None:
        c = self.fake({"POST /v1/sandboxes/sb1/exec": lambda h: ndjson(h, [{"type": "start", "pid": 7}])})
        with self.assertRaises(paddock.TransportError):
            list(c.sandbox("sb1").exec_stream("x"))

    def test_stream_json_fallback(self) -> None:
        res = {"exit_code": 0, "signal": None, "timed_out": False, "stdout": "out", "stderr": "err", "stdout_bytes": 3, "stderr_bytes": 3}

        def route(h: BaseHTTPRequestHandler) -> None:
            read_body(h)
            reply(h, 200, json.dumps(res).encode())

        c = self.fake({"POST /v1/sandboxes/sb1/exec": route})
        stream = c.sandbox("sb1").exec_stream("x")
        evs = list(stream)
        self.assertEqual([(e.type, e.data) for e in evs], [("stdout", b"out"), ("stderr", b"err"), ("exit", b"")])
        self.assertEqual(stream.result.stdout_bytes, 3)

    def test_early_answer_to_a_large_upload(self) -> None:
        # Like paddockd: refuse by Content-Length, answer at once, never read the body.
        def route(h: BaseHTTPRequestHandler) -> None:
            reply(h, 413, b'{"error":{"code":"too_large","message":"file is larger than 1024 bytes"}}')
            h.close_connection = True

        c = self.fake({"PUT /v1/sandboxes/sb1/files": route})
        with self.assertRaises(paddock.TooLarge) as cm:
            c.sandbox("sb1").files.write("big", b"\0" * (32 << 20))
        self.assertIn("1024", cm.exception.message)

    def test_http_timeout(self) -> None:
        def slow(h: BaseHTTPRequestHandler) -> None:
            time.sleep(2)
            try:
                reply(h, 200, b"{}")
            except OSError:
                pass  # the client gave up, as it should

        d = FakeDaemon({"GET /v1/health": slow})
        self.addCleanup(d.close)
        with self.assertRaises(paddock.RequestTimeout):
            paddock.Client(d.url, timeout=0.3).health()

    def test_exec_http_timeout_covers_the_command(self) -> None:
        def route(h: BaseHTTPRequestHandler) -> None:
            body = json.loads(read_body(h))
            self.assertEqual(body["timeout_seconds"], 1)
            time.sleep(1.0)  # longer than the client's own 0.3 s
            reply(h, 200, b'{"exit_code": 0, "signal": null, "timed_out": false, "stdout": "", "stderr": ""}')

        d = FakeDaemon({"POST /v1/sandboxes/sb1/exec": route})
        self.addCleanup(d.close)
        c = paddock.Client(d.url, "k", timeout=0.3)
        self.assertTrue(c.sandbox("sb1").exec("true", timeout=1).ok)

    def test_connection_refused(self) -> None:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        with self.assertRaises(paddock.TransportError) as cm:
            paddock.Client(f"http://127.0.0.1:{port}").health()
        self.assertNotIsInstance(cm.exception, paddock.RequestTimeout)


if __name__ == "__main__":
    unittest.main()
