"""Sandboxes: create, connect, commands, lifecycle, network, ports, snapshots."""

from __future__ import annotations

import json
import math
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence

from . import _bodies, _check, _lifecycle
from ._code import CodeMixin
from ._exec import CLOSE_TIMEOUT, DEFAULT_EXEC_TIMEOUT, HTTP_MARGIN, Command, EventStream, Stdin, _exec_body, exec_headers, with_path
from ._http import NDJSON, path_of
from .client import Client, Seconds
from .errors import NotFound, PaddockError
from .files import Files
from .process import Process
from .terminal import TerminalMixin
from .types import ExecResult, Metrics, MetricsHistory, NetworkLike, Port, ProcessInfo, ResourcesLike, SandboxInfo, Template

__all__ = ["Sandbox", "Files", "Process", "EventStream", "Command", "Stdin", "HTTP_MARGIN", "DEFAULT_EXEC_TIMEOUT", "CLOSE_TIMEOUT"]


class Sandbox(TerminalMixin, CodeMixin):
    """A sandbox: an isolated Linux machine to run untrusted code in.

    Create one with :meth:`Sandbox.create` (best in a ``with`` block, which
    deletes it at the end, also on exceptions) or reattach with
    :meth:`Sandbox.connect`. :attr:`info` is the state the daemon last
    reported; :meth:`refresh` and :meth:`set_timeout` update it.
    """

    def __init__(self, client: Client, info: SandboxInfo) -> None:
        self.client = client
        self.info = info
        self.files = Files(self)
        self._lock = threading.Lock()
        self._closed = False

    # -- construction ----------------------------------------------------

    @classmethod
    def create(
        cls,
        template: Optional[str] = None,
        *,
        timeout: Optional[Seconds] = None,
        env: Optional[Mapping[str, str]] = None,
        metadata: Optional[Mapping[str, str]] = None,
        resources: Optional[ResourcesLike] = None,
        network: Optional[NetworkLike] = None,
        secrets: Optional[Sequence[str]] = None,
        on_timeout: Optional[str] = None,
        max_cost_micros: Optional[int] = None,
        idle_timeout: Optional[Seconds] = None,
        on_idle: Optional[str] = None,
        auto_resume: Optional[bool] = None,
        idle_counts_processes: Optional[bool] = None,
        request_timeout: Optional[Seconds] = None,
        client: Optional[Client] = None,
    ) -> "Sandbox":
        """Create a sandbox (see :meth:`Client.create`); ``client`` defaults to ``Client()``."""
        if client is not None and not isinstance(client, Client):
            raise TypeError(f"client must be a paddock.Client, not {type(client).__name__}")
        return (client or Client()).create(
            template, timeout=timeout, env=env, metadata=metadata, resources=resources, network=network,
            secrets=secrets, on_timeout=on_timeout, max_cost_micros=max_cost_micros, request_timeout=request_timeout,
            idle_timeout=idle_timeout, on_idle=on_idle, auto_resume=auto_resume, idle_counts_processes=idle_counts_processes,
        )

    @classmethod
    def connect(cls, sandbox_id: str, *, client: Optional[Client] = None) -> "Sandbox":
        """Reattach to an existing sandbox (raises :class:`NotFound` if there is none)."""
        return (client or Client()).connect(sandbox_id)

    # -- state -----------------------------------------------------------

    def __repr__(self) -> str:
        return f"Sandbox(id={self.id!r}, state={self.state!r})"

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def state(self) -> str:
        return self.info.state

    @property
    def template(self) -> str:
        return self.info.template

    @property
    def metadata(self) -> Dict[str, str]:
        return self.info.metadata

    @property
    def expires_at(self):  # type: ignore[no-untyped-def]
        return self.info.expires_at

    @property
    def closed(self) -> bool:
        """Whether this handle deleted the sandbox (``close``/``kill``)."""
        return self._closed

    def _path(self, *segments: str) -> str:
        return path_of("sandboxes", self.id, *segments)

    def refresh(self) -> SandboxInfo:
        """Fetch the sandbox's current state into :attr:`info`."""
        self.info = SandboxInfo.from_json(self.client._call("GET", self._path()))
        return self.info

    def set_timeout(self, timeout: Seconds) -> SandboxInfo:
        """Set the lease to end ``timeout`` seconds from now (it may shorten
        it; at most 86400) and return the updated :attr:`info`."""
        t = _check.number("timeout", timeout, minimum=1, allow_none=False)
        assert t is not None
        d = self.client._call("POST", self._path("timeout"), json_body={"timeout_seconds": int(math.ceil(t))})
        self.info = SandboxInfo.from_json(d)
        return self.info

    def pause(self, *, keep_for: Optional[Seconds] = None, then_stop_after: Optional[Seconds] = None) -> SandboxInfo:
        """Freeze every process (memory and files kept, CPU billing stops).

        ``keep_for`` (seconds or a timedelta) is how long it is kept paused
        before it is deleted (default: the daemon's, 24 h); with
        ``then_stop_after`` the daemon stops it (files kept, processes
        ended) that long after the pause, so its files outlive a host
        reboot, and ``keep_for`` must be longer."""
        body = _lifecycle.pause_json(keep_for, then_stop_after)
        self.info = SandboxInfo.from_json(self.client._call("POST", self._path("pause"), json_body=body))
        return self.info

    def resume(self) -> SandboxInfo:
        """Continue a paused sandbox (or boot a stopped one) with a new lease of its original length."""
        self.info = SandboxInfo.from_json(self.client._call("POST", self._path("resume"), json_body={}))
        return self.info

    def stop(self, *, keep_for: Optional[Seconds] = None) -> SandboxInfo:
        """End every process and keep the files for ``keep_for`` (default: the
        daemon's, 7 days); only storage is billed. :meth:`boot` starts it again."""
        body = _lifecycle.stop_json(keep_for)
        self.info = SandboxInfo.from_json(self.client._call("POST", self._path("stop"), json_body=body))
        return self.info

    def boot(self) -> SandboxInfo:
        """Start a stopped sandbox again from its files (``POST .../start``):
        fresh processes, same id, network policy and resources. (:meth:`start`
        runs a process.)"""
        self.info = SandboxInfo.from_json(self.client._call("POST", self._path("start"), json_body={}))
        return self.info

    def metrics(self) -> Metrics:
        """The sandbox's resource accounting (CPU, memory, disk, network, cost)."""
        return Metrics.from_json(self.client._call("GET", self._path("metrics")))

    def metrics_history(self) -> MetricsHistory:
        """The sandbox's metrics over time, oldest first (one sample per
        metering pass of the daemon, at most ``max_samples``)."""
        return MetricsHistory.from_json(self.client._call("GET", self._path("metrics", "history")))

    def set_network(self, network: NetworkLike) -> SandboxInfo:
        """Replace the egress policy (``"off"``, ``"full"`` or a
        :class:`NetworkPolicy` / dict); it applies at once. Any mode
        change works: from ``"off"`` the sandbox gets its interface, to
        ``"off"`` every connection is cut."""
        body = _bodies.network_json(network)
        self.info = SandboxInfo.from_json(self.client._call("PATCH", self._path("network"), json_body=body))
        return self.info

    def ports(self) -> List[Port]:
        """The TCP ports processes in the sandbox listen on, each with a
        ``url`` (needs the API key) and a ``signed_url`` (needs nothing)."""
        d = self.client._call("GET", self._path("ports")) or {}
        return [Port.from_json(p) for p in d.get("ports") or []]

    def port_url(self, port: int, path: str = "") -> str:
        """The URL reaching ``port`` inside the sandbox through the daemon
        (send the API key as ``Authorization: Bearer``)."""
        p = _check.integer("port", port, minimum=1)
        if p is None or p > 65535:
            raise ValueError(f"port must be 1..65535, got {port!r}")
        return self.client._t.url(self._path("ports", str(p))) + "/" + _check.string("path", path, required=False).lstrip("/")

    def signed_port_url(self, port: int, path: str = "") -> str:
        """A URL reaching ``path`` on ``port`` that needs no API key (valid
        one hour; from :meth:`ports`; raises :class:`NotFound` if nothing
        listens on it)."""
        p = _check.integer("port", port, minimum=1)
        for x in self.ports():
            if x.port == p:
                return with_path(x.signed_url, _check.string("path", path, required=False))
        raise NotFound(f"nothing listens on port {p} in sandbox {self.id}")

    def snapshot(self, name: str, *, request_timeout: Optional[Seconds] = None) -> Template:
        """Save the sandbox's files as a new template ``name[:tag]`` (the
        sandbox is frozen meanwhile and keeps running afterwards)."""
        body = {"name": _check.string("name", name)}
        t = _check.number("request_timeout", request_timeout, minimum=0)
        return Template.from_json(self.client._call("POST", self._path("snapshot"), json_body=body, timeout=t))

    # -- commands --------------------------------------------------------

    def exec(
        self,
        cmd: Command,
        *,
        timeout: Optional[Seconds] = None,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        stdin: Optional[Stdin] = None,
        max_output_bytes: Optional[int] = None,
        request_timeout: Optional[Seconds] = None,
    ) -> ExecResult:
        """Run a command to completion and return its :class:`ExecResult`.

        ``cmd`` is a list (argv, run directly, resolved through PATH) or a
        string (run by ``bash -lc``: pipes, ``&&`` and ``$VARS`` work).
        ``timeout`` bounds the run in seconds (default 60); ``stdin`` is text
        or bytes; ``max_output_bytes`` caps stdout and stderr each (default
        65536). A non-zero exit or a timeout is a result, not an exception:
        a command that outlives ``timeout`` is killed and comes back with
        ``timed_out=True``. The HTTP deadline is ``timeout`` plus a margin;
        ``request_timeout`` overrides it (then a too-short one raises
        :class:`RequestTimeout`).
        """
        body = _exec_body(cmd, timeout=timeout, cwd=cwd, env=env, stdin=stdin, max_output_bytes=max_output_bytes)
        rt = _check.number("request_timeout", request_timeout, minimum=0)
        d = self.client._call("POST", self._path("exec"), json_body=body, timeout=rt if rt is not None else self._exec_http_timeout(body),
                              headers=exec_headers(body))
        return ExecResult.from_json(d)

    def exec_stream(
        self,
        cmd: Command,
        *,
        timeout: Optional[Seconds] = None,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        stdin: Optional[Stdin] = None,
        max_output_bytes: Optional[int] = None,
    ) -> EventStream:
        """Run a command and stream its events as they happen (see :class:`EventStream`).

        Errors of the request itself (bad input, unknown sandbox) raise here;
        the arguments are those of :meth:`exec`.
        """
        body = _exec_body(cmd, timeout=timeout, cwd=cwd, env=env, stdin=stdin, max_output_bytes=max_output_bytes)
        resp = self.client._t.send(
            "POST",
            self._path("exec"),
            body=json.dumps(body).encode("utf-8"),
            content_type="application/json",
            accept=NDJSON,
            timeout=self._exec_http_timeout(body),
            # No Paddock-Stdin-Last here: events would start while the body
            # is sent, and this transport stops sending once an answer starts.
        )
        return EventStream(resp)

    @staticmethod
    def _exec_http_timeout(body: Dict[str, Any]) -> float:
        return (body.get("timeout_seconds") or DEFAULT_EXEC_TIMEOUT) + HTTP_MARGIN

    def start(
        self,
        cmd: Command,
        *,
        timeout: Optional[Seconds] = None,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        stdin: Optional[Stdin] = None,
        keep_stdin_open: bool = False,
        max_output_bytes: Optional[int] = None,
    ) -> Process:
        """Start a command in the background and return its :class:`Process` at once.

        ``timeout`` (default: none beyond the sandbox's lease) bounds its run;
        ``keep_stdin_open`` lets you feed it with :meth:`Process.write_stdin`.
        """
        body = _exec_body(
            cmd, timeout=timeout, cwd=cwd, env=env, stdin=stdin, max_output_bytes=max_output_bytes, keep_stdin_open=keep_stdin_open
        )
        return Process(self, ProcessInfo.from_json(self.client._call("POST", self._path("processes"), json_body=body)))

    def processes(self) -> List[Process]:
        """The sandbox's background processes, running and exited."""
        d = self.client._call("GET", self._path("processes")) or {}
        return [Process(self, ProcessInfo.from_json(p)) for p in d.get("processes") or []]

    def process(self, process_id: str) -> Process:
        """Fetch the background process ``process_id``."""
        p = Process(self, ProcessInfo(id=_check.string("process_id", process_id)))
        p.refresh()
        return p

    # -- end ---------------------------------------------------------------

    def kill(self) -> None:
        """Delete the sandbox and everything running in it.

        Idempotent: a second call, or a sandbox already gone on the daemon,
        is not an error.
        """
        with self._lock:
            if self._closed:
                return
            try:
                self.client._call("DELETE", self._path(), timeout=max(self.client.timeout or 0, CLOSE_TIMEOUT))
            except NotFound:
                pass
            self._closed = True
            self.info.state = "terminated"

    def close(self) -> None:
        """Same as :meth:`kill`: delete the sandbox (idempotent)."""
        self.kill()

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            self.close()
        except PaddockError:
            # Do not hide the exception that ended the block.
            if exc_type is None:
                raise
