"""The async event stream, file system and background process of
:mod:`paddock.aio`."""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, Any, List, Optional, Union

from . import _check
from ._ahttp import AsyncResponse
from ._exec import HTTP_MARGIN, _mode
from ._http import NDJSON, path_of, query_pairs
from .client import Seconds
from .errors import NotFound, TransportError
from .types import Event, ExecResult, FileEntry, ProcessInfo

if TYPE_CHECKING:  # pragma: no cover
    from .aio import AsyncSandbox

__all__ = ["AsyncEventStream", "AsyncFiles", "AsyncProcess"]

_MAX_WAIT = 3600.0


class AsyncEventStream:
    """``async for`` over the events of an NDJSON output stream; the request
    is sent on the first iteration. :attr:`result` is set after ``exit``;
    an ``error`` event raises its :class:`PaddockError`."""

    def __init__(self, opener: Any) -> None:
        self._open = opener
        self._resp: Optional[AsyncResponse] = None
        self._pending: List[Event] = []
        self._done = False
        self.result: Optional[ExecResult] = None

    def __aiter__(self) -> "AsyncEventStream":
        return self

    async def __anext__(self) -> Event:
        if self._resp is None and not self._done:
            self._resp = await self._open()
            if self._resp.content_type == "application/json":
                res = ExecResult.from_json(await self._resp.json())
                for typ, text in (("stdout", res.stdout), ("stderr", res.stderr)):
                    if text:
                        self._pending.append(Event(type=typ, data=text.encode("utf-8")))
                res.stdout = res.stderr = ""
                self._pending.append(Event(type="exit", result=res))
        if self._pending:
            ev = self._pending.pop(0)
        elif self._done:
            raise StopAsyncIteration
        else:
            ev = await self._read()
        if ev.type == "exit":
            self.result = ev.result
            await self.aclose()
        elif ev.type == "error":
            await self.aclose()
            assert ev.error is not None
            raise ev.error
        return ev

    async def _read(self) -> Event:
        assert self._resp is not None
        while True:
            line = await self._resp.readline()
            if not line:
                await self.aclose()
                raise TransportError("event stream ended without an exit event")
            line = line.strip()
            if not line:
                continue
            try:
                return Event.from_json(json.loads(line.decode("utf-8")))
            except (UnicodeDecodeError, ValueError) as e:
                await self.aclose()
                raise TransportError(f"bad event in stream: {e}") from e

    async def wait(self) -> ExecResult:
        """Read the rest of the stream, dropping output, and return the result."""
        async for _ in self:
            pass
        assert self.result is not None
        return self.result

    async def aclose(self) -> None:
        self._done = True
        if self._resp is not None:
            self._resp.close()

    async def __aenter__(self) -> "AsyncEventStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class AsyncFiles:
    """The file system of a sandbox: ``sbx.files`` (see :class:`paddock.Files`)."""

    def __init__(self, sandbox: "AsyncSandbox") -> None:
        self._sbx = sandbox

    def _path(self, *segments: str) -> str:
        return path_of("sandboxes", self._sbx.id, "files", *segments)

    async def watch(self, path: str, recursive: bool = False) -> Any:
        """Watch directory ``path``: ``async for`` over the returned ``AsyncFileWatch``."""
        from ._aio_terminal import awatch_files

        return await awatch_files(self._sbx.client, self._sbx.id, path, recursive)

    async def write(self, path: str, data: Union[bytes, bytearray, memoryview, str], mode: Union[int, str, None] = None) -> FileEntry:
        if isinstance(data, str):
            body = data.encode("utf-8")
        elif isinstance(data, (bytes, bytearray, memoryview)):
            body = bytes(data)
        elif hasattr(data, "read"):
            body = data.read()
            body = body.encode("utf-8") if isinstance(body, str) else body
        else:
            raise TypeError(f"data must be bytes or str, not {type(data).__name__}")
        c = self._sbx.client
        q = query_pairs([("path", _check.string("path", path)), ("mode", _mode(mode))])
        resp = await c._t.send("PUT", self._path(), query=q, body=body, content_type="application/octet-stream", timeout=c.timeout)
        return FileEntry.from_json(await resp.json())

    async def read(self, path: str) -> bytes:
        c = self._sbx.client
        resp = await c._t.send("GET", self._path(), query=[("path", _check.string("path", path))], accept="application/octet-stream", timeout=c.timeout)
        return await resp.read()

    async def read_text(self, path: str, encoding: str = "utf-8", errors: str = "strict") -> str:
        return (await self.read(path)).decode(encoding, errors)

    async def list(self, path: Optional[str] = None, depth: Optional[int] = None) -> List[FileEntry]:
        q = query_pairs([("path", _check.string("path", path) if path else "/workspace"), ("depth", _check.integer("depth", depth, minimum=1, maximum=20))])
        d = await self._sbx.client._call("GET", self._path("list"), query=q) or {}
        return [FileEntry.from_json(e) for e in d.get("entries") or []]

    async def stat(self, path: str) -> FileEntry:
        return FileEntry.from_json(await self._sbx.client._call("GET", self._path("stat"), query=[("path", _check.string("path", path))]))

    async def exists(self, path: str) -> bool:
        try:
            await self.stat(path)
        except NotFound:
            return False
        return True

    async def remove(self, path: str, recursive: bool = False) -> None:
        q = query_pairs([("path", _check.string("path", path)), ("recursive", True if recursive else None)])
        await self._sbx.client._call("DELETE", self._path(), query=q)

    async def mkdir(self, path: str, mode: Union[int, str, None] = None) -> FileEntry:
        q = query_pairs([("path", _check.string("path", path)), ("mode", _mode(mode))])
        return FileEntry.from_json(await self._sbx.client._call("POST", self._path("mkdir"), query=q))

    async def upload_dir(self, local_dir: str, remote_dir: str) -> List[FileEntry]:
        """See :meth:`paddock.Files.upload_dir`."""
        src = _check.string("local_dir", local_dir)
        dst = _check.string("remote_dir", remote_dir).rstrip("/") or "/"
        if not os.path.isdir(src):
            raise ValueError(f"local_dir {src!r} is not a directory")
        out = [await self.mkdir(dst)]
        for root, dirs, names in os.walk(src):
            rel = os.path.relpath(root, src)
            base = dst if rel == "." else dst + "/" + rel.replace(os.sep, "/")
            for d in sorted(dirs):
                if not os.path.islink(os.path.join(root, d)):
                    out.append(await self.mkdir(base + "/" + d))
            for n in sorted(names):
                full = os.path.join(root, n)
                if os.path.islink(full) or not os.path.isfile(full):
                    continue
                with open(full, "rb") as f:
                    out.append(await self.write(base + "/" + n, f.read(), mode=os.stat(full).st_mode & 0o777))
        return out

    async def download_dir(self, remote_dir: str, local_dir: str) -> List[str]:
        """See :meth:`paddock.Files.download_dir`."""
        src = _check.string("remote_dir", remote_dir).rstrip("/") or "/"
        dst = os.path.abspath(_check.string("local_dir", local_dir))
        os.makedirs(dst, exist_ok=True)
        written = []
        for e in await self.list(src, depth=20):
            rel = e.path[len(src):].lstrip("/") if e.path.startswith(src + "/") or src == "/" else ""
            if not rel:
                continue
            target = os.path.abspath(os.path.join(dst, *rel.split("/")))
            if not target.startswith(dst + os.sep):
                raise ValueError(f"sandbox path {e.path!r} leaves {dst!r}")
            if e.is_dir:
                os.makedirs(target, exist_ok=True)
            elif e.is_file:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "wb") as f:
                    f.write(await self.read(e.path))
                written.append(target)
        return written


class AsyncProcess:
    """A background process (see :class:`paddock.Process`)."""

    def __init__(self, sandbox: "AsyncSandbox", info: ProcessInfo) -> None:
        self.sandbox = sandbox
        self.info = info

    def __repr__(self) -> str:
        return f"AsyncProcess(id={self.id!r}, pid={self.pid!r}, state={self.state!r})"

    id = property(lambda self: self.info.id)
    pid = property(lambda self: self.info.pid)
    state = property(lambda self: self.info.state)
    result = property(lambda self: self.info.result)

    def _path(self, *segments: str) -> str:
        return path_of("sandboxes", self.sandbox.id, "processes", self.id, *segments)

    async def refresh(self) -> ProcessInfo:
        self.info = ProcessInfo.from_json(await self.sandbox.client._call("GET", self._path()))
        return self.info

    async def wait(self, timeout: Optional[Seconds] = None) -> Optional[ExecResult]:
        """Wait for the exit; with ``timeout``, ``None`` if still running then."""
        t = _check.number("timeout", timeout, minimum=0)
        deadline = None if t is None else time.monotonic() + t
        c = self.sandbox.client
        while True:
            chunk = 600.0 if deadline is None else min(max(deadline - time.monotonic(), 0.0), _MAX_WAIT)
            d = await c._call("POST", self._path("wait"), query=[("timeout_seconds", "%.3f" % chunk)], timeout=chunk + HTTP_MARGIN)
            self.info = ProcessInfo.from_json(d)
            if self.info.state != "running":
                return self.info.result
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def output(self, *, timeout: Optional[Seconds] = None) -> AsyncEventStream:
        t = _check.number("timeout", timeout, minimum=0)
        return AsyncEventStream(lambda: self.sandbox.client._t.send("GET", self._path("output"), accept=NDJSON, timeout=t))

    async def write_stdin(self, data: Union[bytes, bytearray, memoryview, str], eof: bool = False) -> None:
        if not isinstance(data, (str, bytes, bytearray, memoryview)):
            raise TypeError(f"data must be str or bytes, not {type(data).__name__}")
        body = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        c = self.sandbox.client
        resp = await c._t.send("POST", self._path("stdin"), query=[("eof", "true")] if eof else None, body=body, content_type="application/octet-stream", timeout=c.timeout)
        await resp.read()

    async def close_stdin(self) -> None:
        await self.write_stdin(b"", eof=True)

    async def signal(self, sig: str = "SIGTERM") -> None:
        await self.sandbox.client._call("POST", self._path("kill"), json_body={"signal": _check.string("sig", sig)})

    async def kill(self) -> None:
        await self.signal("SIGKILL")
