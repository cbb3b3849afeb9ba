"""The asyncio terminal and file watch (``await sbx.open_pty()``, ``sbx.files.watch()``)."""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from typing import TYPE_CHECKING, Any, List, Mapping, Optional, Sequence, Tuple, Union

from . import _check, _ws
from ._http import NDJSON, path_of
from .errors import RequestTimeout, TransportError
from .terminal import TerminalBase, Text, _to_bytes, pty_query
from .types import PtyInfo, WatchEvent

if TYPE_CHECKING:  # pragma: no cover
    from .aio import AsyncClient

__all__ = ["AsyncTerminal", "AsyncFileWatch"]


class AsyncTerminal(TerminalBase):
    """:class:`paddock.Terminal` for asyncio; use ``async with`` to close it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        super().__init__()
        self._r = reader
        self._w = writer
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, client: "AsyncClient", path: str, query: List[Tuple[str, str]], timeout: Optional[float]) -> "AsyncTerminal":
        t = client._t
        try:
            reader, writer = await asyncio.wait_for(t._open(), timeout)
        except asyncio.TimeoutError as e:
            raise RequestTimeout("terminal: timed out connecting") from e
        except OSError as e:
            raise TransportError(f"terminal: {e}") from e
        term = cls(reader, writer)
        try:
            await asyncio.wait_for(term._handshake(client, path, query), timeout)
            while not term.id:
                await term._next(timeout)
        except asyncio.TimeoutError as e:
            term._close_now()
            raise RequestTimeout("terminal: timed out starting") from e
        except BaseException:
            term._close_now()
            raise
        return term

    async def _handshake(self, client: "AsyncClient", path: str, query: List[Tuple[str, str]]) -> None:
        t = client._t
        target = t._prefix + "/v1" + path + ("?" + urllib.parse.urlencode(query) if query else "")
        hdrs = {"User-Agent": t.user_agent}
        if t.api_key:
            hdrs["Authorization"] = "Bearer " + t.api_key
        req, accept = _ws.handshake(t._hostport, target, hdrs)
        try:
            self._w.write(req)
            await self._w.drain()
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                line = await self._r.readline()
                if not line or len(head) > _ws.MAX_HANDSHAKE:
                    raise TransportError("terminal: the connection closed during the upgrade")
                head += line
            body = b""
            if not head.startswith(b"HTTP/1.1 101"):
                body = await self._r.read(_ws.content_length(head))
        except (OSError, ValueError) as e:
            raise TransportError(f"terminal: {e}") from e
        _ws.check_answer(head, body, accept)

    async def _read(self, n: int) -> bytes:
        try:
            return await self._r.readexactly(n)
        except (asyncio.IncompleteReadError, OSError) as e:
            raise TransportError("terminal: the connection closed") from e

    async def _send(self, data: bytes) -> None:
        async with self._lock:
            try:
                self._w.write(data)
                await self._w.drain()
            except OSError as e:
                raise TransportError(f"terminal: {e}") from e

    async def _next(self, timeout: Optional[float]) -> Optional[bytes]:
        try:
            m = await asyncio.wait_for(_ws.aread_message(self._read, self._send), timeout)
        except asyncio.TimeoutError as e:
            raise RequestTimeout("terminal: no output within the timeout") from e
        if m.opcode == _ws.OP_BINARY:
            return m.data
        if m.opcode == _ws.OP_TEXT:
            self._on_text(m.data)
            return None
        if not self.exited:
            raise TransportError(f"terminal: closed ({m.code}) {m.data.decode('utf-8', 'replace')}")
        return b""

    async def read(self, timeout: Optional[float] = None) -> bytes:
        """The next piece of output; b"" once the command exited."""
        while not self.exited:
            out = await self._next(timeout)
            if out:
                return out
        return b""

    async def read_until(self, marker: Text, timeout: Optional[float] = 30, limit: int = 1 << 20) -> bytes:
        """Read until the output contains ``marker``; everything read (at most ``limit`` bytes kept)."""
        want = _to_bytes(marker)
        buf = b""
        while want not in buf:
            chunk = await self.read(timeout)
            if not chunk:
                raise TransportError(f"terminal: the command exited before printing {marker!r}")
            buf = (buf + chunk)[-limit:]
        return buf

    async def write(self, data: Text) -> None:
        b = _to_bytes(data)
        for off in range(0, len(b), _ws.INPUT_CHUNK):
            await self._send(_ws.frame(_ws.OP_BINARY, b[off : off + _ws.INPUT_CHUNK]))

    async def resize(self, cols: int, rows: int) -> None:
        await self._send(_ws.frame(_ws.OP_TEXT, self._resize_message(cols, rows)))

    async def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        while await self.read(timeout):
            pass
        return self.exit_code

    def _close_now(self) -> None:
        try:
            self._w.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass

    async def close(self) -> None:
        """Close the WebSocket (killing the command if it still runs)."""
        try:
            self._w.write(_ws.close_frame(1000))
        except Exception:  # noqa: BLE001
            pass
        self._close_now()

    async def __aenter__(self) -> "AsyncTerminal":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class AsyncFileWatch:
    """``async for`` over the :class:`WatchEvent`\\ s of a watch; ``close()`` ends it."""

    def __init__(self, resp: Any) -> None:
        self._resp = resp

    def __aiter__(self) -> "AsyncFileWatch":
        return self

    async def __anext__(self) -> WatchEvent:
        line = await self._resp.readline()
        if not line:
            raise StopAsyncIteration
        try:
            return WatchEvent.from_json(json.loads(line.decode("utf-8")))
        except (UnicodeDecodeError, ValueError) as e:
            raise TransportError(f"bad watch event: {e}") from e

    def close(self) -> None:
        self._resp.close()

    async def __aenter__(self) -> "AsyncFileWatch":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()


class AsyncTerminalMixin:
    """The terminal methods of :class:`paddock.AsyncSandbox`."""

    client: "AsyncClient"
    id: str  # defined by the sandbox class

    async def open_pty(
        self,
        cmd: Union[str, Sequence[str], None] = None,
        *,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        cols: Optional[int] = None,
        rows: Optional[int] = None,
        timeout: Optional[float] = 30,
    ) -> AsyncTerminal:
        """See :meth:`paddock.Sandbox.open_pty`."""
        return await AsyncTerminal.open(self.client, path_of("sandboxes", self.id, "pty"), pty_query(cmd, cwd, env, cols, rows), timeout)

    async def ptys(self) -> List[PtyInfo]:
        d = await self.client._call("GET", path_of("sandboxes", self.id, "pty", "list"))
        return [PtyInfo.from_json(x) for x in (d or {}).get("ptys") or []]

    async def kill_pty(self, pty_id: str) -> None:
        await self.client._call("POST", path_of("sandboxes", self.id, "pty", _check.string("pty_id", pty_id), "kill"))


async def awatch_files(client: "AsyncClient", sandbox_id: str, path: str, recursive: bool) -> AsyncFileWatch:
    q = [("path", _check.string("path", path)), ("recursive", "true" if recursive else "false")]
    resp = await client._t.send("GET", path_of("sandboxes", sandbox_id, "files", "watch"), query=q, accept=NDJSON, timeout=None)
    return AsyncFileWatch(resp)
