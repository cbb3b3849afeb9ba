"""Command bodies, output event streams and the constants the sandbox calls share."""

from __future__ import annotations

import base64
import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from . import _bodies, _check
from ._http import Response
from .client import Seconds
from .errors import TransportError
from .types import Event, ExecResult

__all__ = ["EventStream", "Command", "Stdin"]

#: Seconds added to a command's own timeout to get the HTTP timeout of the call.
HTTP_MARGIN = 30.0
#: The daemon's default exec timeout, in seconds.
DEFAULT_EXEC_TIMEOUT = 60.0
#: The longest single wait the daemon accepts, in seconds.
_MAX_WAIT = 3600.0
#: How long Sandbox.close may take, in seconds.
CLOSE_TIMEOUT = 30.0

#: A command: a list (argv, run directly) or a string (run by ``bash -lc``).
Command = Union[str, Sequence[Union[str, "os.PathLike[str]"]]]
#: Standard input: text (sent as ``stdin``) or bytes (sent as ``stdin_base64``).
Stdin = Union[str, bytes, bytearray, memoryview]


def _exec_body(
    cmd: Command,
    *,
    timeout: Optional[Seconds],
    cwd: Optional[str],
    env: Optional[Mapping[str, str]],
    stdin: Optional[Stdin],
    max_output_bytes: Optional[int],
    keep_stdin_open: bool = False,
) -> Dict[str, Any]:
    body: Dict[str, Any] = {}
    if isinstance(cmd, str):
        if not cmd.strip():
            raise ValueError("cmd must not be empty")
        body["command"] = cmd
    elif isinstance(cmd, (bytes, bytearray, memoryview)):
        raise TypeError("command must be a str (shell) or a list of str (argv), not bytes")
    else:
        argv = []
        for a in cmd:
            if isinstance(a, os.PathLike):
                a = os.fspath(a)
            if not isinstance(a, str):
                raise TypeError(f"argv items must be str, got {type(a).__name__}")
            argv.append(a)
        if not argv:
            raise ValueError("cmd must not be an empty list")
        body["argv"] = argv
    t = _check.number("timeout", timeout, minimum=0)
    if t is not None:
        body["timeout_seconds"] = t
    if cwd:
        body["cwd"] = _check.string("cwd", cwd)
    e = _check.str_map("env", env)
    if e:
        body["env"] = e
    if max_output_bytes is not None:
        body["max_output_bytes"] = _check.integer("max_output_bytes", max_output_bytes, minimum=1)
    if keep_stdin_open:
        body["keep_stdin_open"] = True
    # stdin goes last (dicts keep their order): see exec_headers.
    if stdin is not None:
        if isinstance(stdin, str):
            body["stdin"] = stdin
        elif isinstance(stdin, (bytes, bytearray, memoryview)):
            body["stdin_base64"] = base64.b64encode(bytes(stdin)).decode("ascii")
        else:
            raise TypeError(f"stdin must be str or bytes, not {type(stdin).__name__}")
    return body


def exec_headers(body: Dict[str, Any]) -> Dict[str, str]:
    """The headers of an exec body from :func:`_exec_body`: its stdin is its
    last member, so the daemon may stream it into the command as it arrives."""
    if "stdin" in body or "stdin_base64" in body:
        return {"Paddock-Stdin-Last": "true"}
    return {}


_mode = _bodies.mode_str


class EventStream:
    """An iterator over the :class:`Event` s of an NDJSON output stream.

    Events come as they happen: ``start``, ``stdout``/``stderr`` chunks
    (``event.data`` is bytes), then ``exit``, after which iteration stops and
    :attr:`result` holds the :class:`ExecResult`. An ``error`` event raises
    its :class:`PaddockError`; a stream that ends without an ``exit`` event
    raises :class:`TransportError`. Closing the stream (``close()``, ``with``,
    or breaking out of a ``for`` loop and dropping it) ends the request.
    """

    def __init__(self, resp: Response) -> None:
        self._resp = resp
        self._done = False
        self._pending: List[Event] = []
        #: The exit event's result, once it has been read.
        self.result: Optional[ExecResult] = None
        if resp.content_type == "application/json":
            # A daemon that ignores Accept answers an exec with one ExecResult.
            res = ExecResult.from_json(resp.json())
            if res.stdout:
                self._pending.append(Event(type="stdout", data=res.stdout.encode("utf-8")))
            if res.stderr:
                self._pending.append(Event(type="stderr", data=res.stderr.encode("utf-8")))
            res.stdout = res.stderr = ""
            self._pending.append(Event(type="exit", result=res))

    def __iter__(self) -> "EventStream":
        return self

    def __next__(self) -> Event:
        if self._pending:
            ev = self._pending.pop(0)
        else:
            if self._done:
                raise StopIteration
            ev = self._read()
        if ev.type == "exit":
            self.result = ev.result
            self.close()
        elif ev.type == "error":
            self.close()
            assert ev.error is not None
            raise ev.error
        return ev

    def _read(self) -> Event:
        while True:
            line = self._resp.readline()
            if not line:
                self.close()
                raise TransportError("event stream ended without an exit event")
            line = line.strip()
            if not line:
                continue
            try:
                return Event.from_json(json.loads(line.decode("utf-8")))
            except (UnicodeDecodeError, ValueError) as e:
                self.close()
                raise TransportError(f"bad event in stream: {e}") from e

    def close(self) -> None:
        """End the stream and its request. Idempotent."""
        self._done = True
        self._resp.close()

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._resp.close()
        except Exception:  # noqa: BLE001
            pass

    def wait(self) -> ExecResult:
        """Read the rest of the stream, dropping output, and return the result."""
        for _ in self:
            pass
        assert self.result is not None
        return self.result


def with_path(url: str, path: str) -> str:
    """``url`` (``.../ports/8000/?paddock_token=...``) with ``path`` after its last slash."""
    base, q, query = url.partition("?")
    return base.rstrip("/") + "/" + path.lstrip("/") + q + query
