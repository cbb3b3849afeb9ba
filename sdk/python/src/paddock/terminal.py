"""Interactive terminals (a pseudo-terminal over a WebSocket) and file watches.

``sandbox.open_pty()`` starts a command (a login shell by default) on a
terminal inside the sandbox and returns a :class:`Terminal`: ``write`` sends
keys, ``read`` returns output, ``resize`` changes the size, ``wait`` returns
the exit code. ``sandbox.files.watch(path)`` streams :class:`WatchEvent`\\ s.
The WebSocket client is the standard library's sockets and ``_ws``.
"""

from __future__ import annotations

import json
import socket
import threading
from typing import TYPE_CHECKING, Any, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import _check, _ws
from ._http import NDJSON, path_of
from .errors import PaddockError, RequestTimeout, TransportError, error_for
from .types import PtyInfo, WatchEvent

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client

__all__ = ["Terminal", "FileWatch", "PtyInfo", "WatchEvent"]

Text = Union[str, bytes, bytearray, memoryview]


def pty_query(
    cmd: Union[str, Sequence[str], None], cwd: Optional[str], env: Optional[Mapping[str, str]], cols: Optional[int], rows: Optional[int]
) -> List[Tuple[str, str]]:
    """The query of GET .../pty: a string ``cmd`` is a shell command line, a list is argv."""
    q: List[Tuple[str, str]] = []
    if isinstance(cmd, str):
        q.append(("command", cmd))
    elif cmd is not None:
        q += [("argv", _check.string("argv", a)) for a in cmd]
    if cwd:
        q.append(("cwd", _check.string("cwd", cwd)))
    for k, v in (env or {}).items():
        q.append(("env", f"{k}={v}"))
    if cols is not None:
        q.append(("cols", str(int(cols))))
    if rows is not None:
        q.append(("rows", str(int(rows))))
    return q


def _to_bytes(data: Text) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


class TerminalBase:
    """What the sync and async terminals share: identity, exit and message handling."""

    def __init__(self) -> None:
        self.id = ""
        self.pid = 0
        self.exited = False
        self.exit_code: Optional[int] = None
        self.signal: Optional[str] = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r}, pid={self.pid}, exited={self.exited})"

    def _on_text(self, data: bytes) -> None:
        try:
            m = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise TransportError(f"terminal: bad message {data[:80]!r}") from e
        t = m.get("type") if isinstance(m, dict) else None
        if t == "started":
            self.id, self.pid = str(m.get("pty_id") or ""), int(m.get("pid") or 0)
        elif t == "exit":
            self.exited = True
            self.exit_code = m.get("exit_code")
            self.signal = m.get("signal")
        elif t == "error":
            e = m.get("error") or {}
            raise error_for(None, e.get("code"), e.get("message") or "terminal failed")

    @staticmethod
    def _resize_message(cols: int, rows: int) -> bytes:
        return json.dumps({"type": "resize", "cols": int(cols), "rows": int(rows)}).encode("utf-8")


class Terminal(TerminalBase):
    """A command on a terminal in a sandbox. Use it in a ``with`` block:
    leaving it closes the WebSocket, which kills the command if it still runs."""

    def __init__(self, client: "Client", path: str, query: List[Tuple[str, str]], timeout: Optional[float]) -> None:
        super().__init__()
        t = client._t
        port = t._port or (443 if t._https else 80)
        sock = socket.create_connection((t._host, port), timeout=timeout)
        if t._https:
            import ssl

            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=t._host)
        self._sock = sock
        self._f = sock.makefile("rb")
        self._send_lock = threading.Lock()
        self._pending: List[bytes] = []
        try:
            self._handshake(client, path, query)
            while not self.id:  # the started message comes first
                self._next(timeout)
        except BaseException:
            self.close()
            raise

    def _handshake(self, client: "Client", path: str, query: List[Tuple[str, str]]) -> None:
        t = client._t
        import urllib.parse

        target = t._prefix + "/v1" + path + ("?" + urllib.parse.urlencode(query) if query else "")
        host = t._host + (f":{t._port}" if t._port else "")
        hdrs = {"User-Agent": t.user_agent}
        if t.api_key:
            hdrs["Authorization"] = "Bearer " + t.api_key
        req, accept = _ws.handshake(host, target, hdrs)
        try:
            self._sock.sendall(req)
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                line = self._f.readline(_ws.MAX_HANDSHAKE)
                if not line or len(head) > _ws.MAX_HANDSHAKE:
                    raise TransportError("terminal: the connection closed during the upgrade")
                head += line
            body = b""
            if not head.startswith(b"HTTP/1.1 101"):
                body = self._f.read(_ws.content_length(head))
        except (OSError, socket.timeout) as e:
            raise TransportError(f"terminal: {e}") from e
        _ws.check_answer(head, body, accept)

    def _read(self, n: int) -> bytes:
        b = self._f.read(n)
        if b is None or len(b) < n:
            raise TransportError("terminal: the connection closed")
        return b

    def _send(self, data: bytes) -> None:
        with self._send_lock:
            try:
                self._sock.sendall(data)
            except OSError as e:
                raise TransportError(f"terminal: {e}") from e

    def _next(self, timeout: Optional[float]) -> Optional[bytes]:
        """Handle the next message; output bytes, or None for a control message."""
        self._sock.settimeout(timeout)
        try:
            m = _ws.read_message(self._read, self._send)
        except socket.timeout as e:
            raise RequestTimeout("terminal: no output within the timeout") from e
        except OSError as e:
            raise TransportError(f"terminal: {e}") from e
        if m.opcode == _ws.OP_BINARY:
            return m.data
        if m.opcode == _ws.OP_TEXT:
            self._on_text(m.data)
            return None
        # close
        if not self.exited:
            raise TransportError(f"terminal: closed ({m.code}) {m.data.decode('utf-8', 'replace')}")
        return b""

    def read(self, timeout: Optional[float] = None) -> bytes:
        """The next piece of output; b"" once the command exited (see :attr:`exit_code`)."""
        while not self.exited:
            out = self._next(timeout)
            if out:
                return out
        return b""

    def read_until(self, marker: Text, timeout: Optional[float] = 30, limit: int = 1 << 20) -> bytes:
        """Read until the output contains ``marker``; everything read (at most ``limit`` bytes kept)."""
        want = _to_bytes(marker)
        buf = b""
        while want not in buf:
            chunk = self.read(timeout)
            if not chunk:
                raise TransportError(f"terminal: the command exited before printing {marker!r}")
            buf = (buf + chunk)[-limit:]
        return buf

    def write(self, data: Text) -> None:
        """Send keys (a str is UTF-8 encoded; "\\x03" is Ctrl-C)."""
        b = _to_bytes(data)
        for off in range(0, len(b), _ws.INPUT_CHUNK):
            self._send(_ws.frame(_ws.OP_BINARY, b[off : off + _ws.INPUT_CHUNK]))

    def resize(self, cols: int, rows: int) -> None:
        """Set the terminal's size; the command gets SIGWINCH."""
        self._send(_ws.frame(_ws.OP_TEXT, self._resize_message(cols, rows)))

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        """Read (and drop) output until the command exits; its exit code (None if a signal ended it)."""
        while self.read(timeout):
            pass
        return self.exit_code

    def close(self) -> None:
        """Close the WebSocket (killing the command if it still runs)."""
        try:
            self._sock.sendall(_ws.close_frame(1000))
        except OSError:
            pass
        try:
            self._f.close()
            self._sock.close()
        except OSError:
            pass

    def __enter__(self) -> "Terminal":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class FileWatch:
    """Iterate over the :class:`WatchEvent`\\ s of a watch; ``close()`` (or a ``with`` block) ends it."""

    def __init__(self, resp: Any) -> None:
        self._resp = resp

    def __iter__(self) -> Iterator[WatchEvent]:
        return self

    def __next__(self) -> WatchEvent:
        line = self._resp.readline()
        if not line:
            raise StopIteration
        try:
            return WatchEvent.from_json(json.loads(line.decode("utf-8")))
        except (UnicodeDecodeError, ValueError) as e:
            raise TransportError(f"bad watch event: {e}") from e

    def close(self) -> None:
        self._resp.close()

    def __enter__(self) -> "FileWatch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class TerminalMixin:
    """The terminal and watch methods of :class:`paddock.Sandbox`."""

    client: "Client"
    id: str  # defined by the sandbox class

    def open_pty(
        self,
        cmd: Union[str, Sequence[str], None] = None,
        *,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        cols: Optional[int] = None,
        rows: Optional[int] = None,
        timeout: Optional[float] = 30,
    ) -> Terminal:
        """Start ``cmd`` (a shell command line, an argv list, or None for a login shell) on a new terminal.

        ``timeout`` bounds the connection and the start. Errors found before
        the command runs (a missing ``cwd``, too many terminals) raise the
        matching :class:`PaddockError`.
        """
        return Terminal(self.client, path_of("sandboxes", self.id, "pty"), pty_query(cmd, cwd, env, cols, rows), timeout)

    def ptys(self) -> List[PtyInfo]:
        """The terminals open in the sandbox."""
        d = self.client._call("GET", path_of("sandboxes", self.id, "pty", "list"))
        return [PtyInfo.from_json(x) for x in (d or {}).get("ptys") or []]

    def kill_pty(self, pty_id: str) -> None:
        """Kill the command of terminal ``pty_id`` (its socket then gets the exit)."""
        self.client._call("POST", path_of("sandboxes", self.id, "pty", _check.string("pty_id", pty_id), "kill"))


def watch_files(client: "Client", sandbox_id: str, path: str, recursive: bool) -> FileWatch:
    """Open a watch (used by ``Files.watch``); returns once the watch is in place."""
    q = [("path", _check.string("path", path)), ("recursive", "true" if recursive else "false")]
    resp = client._t.send("GET", path_of("sandboxes", sandbox_id, "files", "watch"), query=q, accept=NDJSON, timeout=None)
    return FileWatch(resp)


_ = PaddockError  # re-exported for type checkers of callers
