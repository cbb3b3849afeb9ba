"""The asyncio HTTP/1.1 transport: ``asyncio.open_connection``, one
connection per call (``Connection: close``), chunked and length-delimited
answers, and a deadline on connecting and on every read or write."""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from typing import Any, Dict, Mapping, Optional, Tuple

from ._http import Body, Query
from .errors import MAX_ERROR_BODY, RequestTimeout, TransportError, error_from_body

_LIMIT = 1 << 20  # longest header or NDJSON line


class AsyncResponse:
    """A 2xx answer whose body has not been read yet."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, status: int, headers: Dict[str, str], what: str, timeout: Optional[float]) -> None:
        self._r = reader
        self._w = writer
        self.status = status
        self.headers = headers
        self.content_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        self._what = what
        self._timeout = timeout
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        cl = headers.get("content-length")
        self._left: Optional[int] = int(cl) if cl and cl.isdigit() and not self._chunked else None
        self._chunk_left = 0
        self._eof = False
        self._buf = b""

    async def _io(self, coro: Any) -> Any:
        try:
            return await asyncio.wait_for(coro, self._timeout)
        except asyncio.TimeoutError as e:
            self.close()
            raise RequestTimeout(f"{self._what}: timed out") from e
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as e:
            self.close()
            raise TransportError(f"reading the answer of {self._what}: {e}") from e

    async def _more(self) -> bytes:
        """The next piece of the body, b"" at its end."""
        if self._eof:
            return b""
        if self._chunked:
            if self._chunk_left == 0:
                size_line = await self._io(self._r.readline())
                if not size_line:
                    raise TransportError(f"{self._what}: connection closed inside a chunked answer")
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while (await self._io(self._r.readline())).strip():
                        pass  # trailers
                    self._eof = True
                    return b""
                self._chunk_left = size
            data = await self._io(self._r.read(min(self._chunk_left, 65536)))
            if not data:
                raise TransportError(f"{self._what}: connection closed inside a chunk")
            self._chunk_left -= len(data)
            if self._chunk_left == 0:
                await self._io(self._r.readexactly(2))
            return data
        if self._left is not None:
            if self._left == 0:
                self._eof = True
                return b""
            data = await self._io(self._r.read(min(self._left, 65536)))
            if not data:
                raise TransportError(f"{self._what}: connection closed before the whole answer")
            self._left -= len(data)
            return data
        data = await self._io(self._r.read(65536))
        if not data:
            self._eof = True
        return data

    async def read(self) -> bytes:
        parts = [self._buf]
        self._buf = b""
        try:
            while True:
                d = await self._more()
                if not d:
                    return b"".join(parts)
                parts.append(d)
        finally:
            self.close()

    async def readline(self) -> bytes:
        """One line of the body (with its newline), b"" at the end."""
        while b"\n" not in self._buf:
            d = await self._more()
            if not d:
                line, self._buf = self._buf, b""
                return line
            self._buf += d
            if len(self._buf) > _LIMIT:
                raise TransportError(f"{self._what}: line longer than {_LIMIT} bytes")
        i = self._buf.index(b"\n") + 1
        line, self._buf = self._buf[:i], self._buf[i:]
        return line

    async def json(self) -> Any:
        body = await self.read()
        if not body.strip():
            return None
        try:
            return json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise TransportError(f"decoding the answer of {self._what}: {e}") from e

    def close(self) -> None:
        try:
            self._w.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass


class AsyncTransport:
    """Sends requests to ``<base_url>/v1`` with the bearer key, over asyncio streams."""

    def __init__(self, base_url: str, api_key: str, user_agent: str) -> None:
        self.base_url = base_url
        self.api_key = api_key
        self.user_agent = user_agent
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"paddock: bad daemon URL {base_url!r}")
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = u.port or (443 if self._https else 80)
        self._prefix = u.path.rstrip("/")
        self._hostport = u.netloc.rsplit("@", 1)[-1]

    def url(self, path: str, query: Query = None) -> str:
        return self.base_url + "/v1" + path + ("?" + urllib.parse.urlencode(list(query)) if query else "")

    async def send(
        self,
        method: str,
        path: str,
        *,
        query: Query = None,
        body: Body = None,
        content_type: Optional[str] = None,
        accept: str = "application/json",
        timeout: Optional[float] = None,
        root: bool = False,
        headers: Optional[Mapping[str, str]] = None,
    ) -> AsyncResponse:
        """Send a request; a non-2xx answer raises the matching PaddockError."""
        api = "" if root else "/v1"
        qs = "?" + urllib.parse.urlencode(list(query)) if query else ""
        url = self.base_url + api + path + qs
        what = f"{method} {url}"
        data = bytes(body) if body is not None else b""
        head = [f"{method} {self._prefix}{api}{path}{qs} HTTP/1.1", f"Host: {self._hostport}", f"Accept: {accept}",
                f"User-Agent: {self.user_agent}", "Connection: close"]
        if self.api_key:
            head.append("Authorization: Bearer " + self.api_key)
        if content_type:
            head.append("Content-Type: " + content_type)
        head.extend(f"{k}: {v}" for k, v in (headers or {}).items())
        if data or method in ("POST", "PUT", "PATCH"):
            head.append(f"Content-Length: {len(data)}")
        raw = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
        try:
            reader, writer = await asyncio.wait_for(self._open(), timeout)
        except asyncio.TimeoutError as e:
            raise RequestTimeout(f"{what}: timed out connecting") from e
        except OSError as e:
            raise TransportError(f"{what}: {e}") from e
        try:
            status, headers = await asyncio.wait_for(self._exchange(reader, writer, raw, data), timeout)
        except asyncio.TimeoutError as e:
            writer.close()
            raise RequestTimeout(f"{what}: timed out") from e
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as e:
            writer.close()
            raise TransportError(f"{what}: {e}") from e
        resp = AsyncResponse(reader, writer, status, headers, what, timeout)
        if not 200 <= status <= 299:
            try:
                err = (await resp.read())[:MAX_ERROR_BODY]
            except Exception:  # noqa: BLE001
                err = b""
            raise error_from_body(status, err)
        return resp

    async def _open(self) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        ssl_ctx = None
        if self._https:
            import ssl

            ssl_ctx = ssl.create_default_context()
        return await asyncio.open_connection(self._host, self._port, ssl=ssl_ctx, limit=_LIMIT)

    @staticmethod
    async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes, data: bytes) -> Tuple[int, Dict[str, str]]:
        # The head and a small body go in one write: a daemon that answers
        # without reading the body and closes would otherwise reset the
        # connection when the body arrives late, losing its answer.
        first = 65536 - len(head) if len(head) < 65536 else 0
        writer.write(head + data[:first])
        data = data[first:]
        try:
            for off in range(0, len(data), 65536):
                writer.write(data[off : off + 65536])
                await writer.drain()
            await writer.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the daemon may have answered before reading the body (413): read it
        while True:
            line = await reader.readline()
            if not line:
                raise TransportError("connection closed before an answer")
            parts = line.decode("latin-1").split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/"):
                raise TransportError(f"bad status line {line[:80]!r}")
            status = int(parts[1])
            headers: Dict[str, str] = {}
            while True:
                h = await reader.readline()
                if h in (b"\r\n", b"\n", b""):
                    break
                k, _, v = h.decode("latin-1").partition(":")
                headers[k.strip().lower()] = v.strip()
            if status != 100:
                return status, headers

    async def call(self, method: str, path: str, *, query: Query = None, json_body: Any = None, timeout: Optional[float] = None,
                   headers: Optional[Mapping[str, str]] = None) -> Any:
        body = None
        ctype = None
        if json_body is not None:
            body = json.dumps(json_body).encode("utf-8")
            ctype = "application/json"
        resp = await self.send(method, path, query=query, body=body, content_type=ctype, timeout=timeout, headers=headers)
        return await resp.json()
