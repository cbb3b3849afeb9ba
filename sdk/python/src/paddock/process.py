"""Background processes of a sandbox."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Optional, Union

from . import _check
from ._exec import _MAX_WAIT, HTTP_MARGIN, EventStream
from ._http import NDJSON, path_of
from .client import Seconds
from .types import ExecResult, ProcessInfo

if TYPE_CHECKING:  # pragma: no cover
    from .sandbox import Sandbox

__all__ = ["Process"]


class Process:
    """A background process started with :meth:`Sandbox.start`.

    :attr:`info` is what the daemon last reported; :meth:`refresh` and
    :meth:`wait` update it.
    """

    def __init__(self, sandbox: "Sandbox", info: ProcessInfo) -> None:
        self.sandbox = sandbox
        self.info = info

    def __repr__(self) -> str:
        return f"Process(id={self.id!r}, pid={self.pid!r}, state={self.state!r})"

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def pid(self) -> int:
        return self.info.pid

    @property
    def state(self) -> str:
        return self.info.state

    @property
    def result(self) -> Optional[ExecResult]:
        """The exit status and output, once the process has exited."""
        return self.info.result

    def _path(self, *segments: str) -> str:
        return path_of("sandboxes", self.sandbox.id, "processes", self.id, *segments)

    def refresh(self) -> ProcessInfo:
        self.info = ProcessInfo.from_json(self.sandbox.client._call("GET", self._path()))
        return self.info

    def wait(self, timeout: Optional[Seconds] = None) -> Optional[ExecResult]:
        """Wait for the process to exit and return its result.

        With ``timeout`` (seconds), return ``None`` if it is still running
        then; without, wait as long as it takes.
        """
        t = _check.number("timeout", timeout, minimum=0)
        deadline = None if t is None else time.monotonic() + t
        c = self.sandbox.client
        while True:
            chunk = 600.0 if deadline is None else min(max(deadline - time.monotonic(), 0.0), _MAX_WAIT)
            q = [("timeout_seconds", "%.3f" % chunk)]
            d = c._call("POST", self._path("wait"), query=q, timeout=chunk + HTTP_MARGIN)
            self.info = ProcessInfo.from_json(d)
            if self.info.state != "running":
                return self.info.result
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def output(self, *, timeout: Optional[Seconds] = None) -> EventStream:
        """Stream the process's output: what was buffered is replayed, then
        live output, then the ``exit`` event. ``timeout`` bounds the silence
        between two events (default: none)."""
        resp = self.sandbox.client._t.send("GET", self._path("output"), accept=NDJSON, timeout=_check.number("timeout", timeout, minimum=0))
        return EventStream(resp)

    def write_stdin(self, data: Union[bytes, bytearray, memoryview, str], eof: bool = False) -> None:
        """Write to the process's stdin (it must have been started with
        ``keep_stdin_open=True``); ``eof`` closes stdin afterwards."""
        if not isinstance(data, (str, bytes, bytearray, memoryview)):
            raise TypeError(f"data must be str or bytes, not {type(data).__name__}")
        body = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        c = self.sandbox.client
        q = [("eof", "true")] if eof else None
        c._t.send("POST", self._path("stdin"), query=q, body=body, content_type="application/octet-stream", timeout=c.timeout).read()

    def close_stdin(self) -> None:
        """Close the process's stdin."""
        self.write_stdin(b"", eof=True)

    def signal(self, sig: str = "SIGTERM") -> None:
        """Send a signal such as ``"SIGTERM"`` or ``"SIGINT"``."""
        self.sandbox.client._call("POST", self._path("kill"), json_body={"signal": _check.string("sig", sig)})

    def kill(self) -> None:
        """Kill the process and every process it started (SIGKILL)."""
        self.signal("SIGKILL")
