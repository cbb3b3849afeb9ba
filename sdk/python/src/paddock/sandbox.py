"""Sandboxes, their files and their background processes."""

from __future__ import annotations

import base64
import json
import math
import os
import threading
import time
from typing import IO, Any, Dict, List, Mapping, Optional, Sequence, Union

from . import _bodies, _check
from ._http import NDJSON, Response, path_of, query_pairs
from .client import Client, Seconds, seconds
from .errors import NotFound, PaddockError, TransportError
from .types import Event, ExecResult, FileEntry, Metrics, NetworkLike, Port, ProcessInfo, ResourcesLike, SandboxInfo, Template

__all__ = ["Sandbox", "Files", "Process", "EventStream", "Command", "Stdin"]

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
    if stdin is not None:
        if isinstance(stdin, str):
            body["stdin"] = stdin
        elif isinstance(stdin, (bytes, bytearray, memoryview)):
            body["stdin_base64"] = base64.b64encode(bytes(stdin)).decode("ascii")
        else:
            raise TypeError(f"stdin must be str or bytes, not {type(stdin).__name__}")
    if max_output_bytes is not None:
        body["max_output_bytes"] = _check.integer("max_output_bytes", max_output_bytes, minimum=1)
    if keep_stdin_open:
        body["keep_stdin_open"] = True
    return body


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


class Files:
    """The file system of a sandbox: ``sbx.files``.

    Paths are absolute or relative to ``/workspace``; every operation runs
    inside the sandbox's own mount namespace.
    """

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sbx = sandbox

    def _path(self, *segments: str) -> str:
        return path_of("sandboxes", self._sbx.id, "files", *segments)

    def write(self, path: str, data: Union[bytes, bytearray, memoryview, str, IO[bytes]], mode: Union[int, str, None] = None) -> FileEntry:
        """Create or replace the file at ``path`` (parents are created).

        ``data`` is bytes, text (encoded as UTF-8) or a binary file object;
        ``mode`` is the permission bits (``0o755`` or ``"0755"``, default 0644).
        """
        if isinstance(data, str):
            body = data.encode("utf-8")
        elif isinstance(data, (bytes, bytearray, memoryview)):
            body = bytes(data)
        elif hasattr(data, "read"):
            body = data.read()
            if isinstance(body, str):
                body = body.encode("utf-8")
        else:
            raise TypeError(f"data must be bytes, str or a binary file, not {type(data).__name__}")
        c = self._sbx.client
        q = query_pairs([("path", _check.string("path", path)), ("mode", _mode(mode))])
        resp = c._t.send("PUT", self._path(), query=q, body=body, content_type="application/octet-stream", timeout=c.timeout)
        return FileEntry.from_json(resp.json())

    def read(self, path: str) -> bytes:
        """The content of the file at ``path``."""
        c = self._sbx.client
        q = [("path", _check.string("path", path))]
        return c._t.send("GET", self._path(), query=q, accept="application/octet-stream", timeout=c.timeout).read()

    def read_text(self, path: str, encoding: str = "utf-8", errors: str = "strict") -> str:
        """The content of the file at ``path``, decoded."""
        return self.read(path).decode(encoding, errors)

    def list(self, path: Optional[str] = None, depth: Optional[int] = None) -> List[FileEntry]:
        """The entries under the directory ``path`` (default ``/workspace``),
        ``depth`` levels down (default 1). Symlinks are listed, not followed."""
        # Sent explicitly: the daemon documents /workspace as the default but
        # answers 400 "path is required" without it.
        q = query_pairs([("path", _check.string("path", path) if path else "/workspace"), ("depth", _check.integer("depth", depth, minimum=1))])
        d = self._sbx.client._call("GET", self._path("list"), query=q) or {}
        return [FileEntry.from_json(e) for e in d.get("entries") or []]

    def stat(self, path: str) -> FileEntry:
        """Describe ``path``; raises :class:`NotFound` if it does not exist."""
        d = self._sbx.client._call("GET", self._path("stat"), query=[("path", _check.string("path", path))])
        return FileEntry.from_json(d)

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists (a dangling symlink counts)."""
        try:
            self.stat(path)
        except NotFound:
            return False
        return True

    def remove(self, path: str, recursive: bool = False) -> None:
        """Delete a file or an empty directory; ``recursive`` deletes a directory's contents too."""
        q = query_pairs([("path", _check.string("path", path)), ("recursive", True if recursive else None)])
        self._sbx.client._call("DELETE", self._path(), query=q)

    def mkdir(self, path: str, mode: Union[int, str, None] = None) -> FileEntry:
        """Create the directory ``path`` and any missing parents (default mode 0755)."""
        q = query_pairs([("path", _check.string("path", path)), ("mode", _mode(mode))])
        return FileEntry.from_json(self._sbx.client._call("POST", self._path("mkdir"), query=q))


    def upload_dir(self, local_dir: str, remote_dir: str) -> List[FileEntry]:
        """Copy the local directory tree ``local_dir`` to ``remote_dir`` in the
        sandbox, file by file, keeping permission bits; returns what was written.
        Symlinks are skipped."""
        src = _check.string("local_dir", local_dir)
        dst = _check.string("remote_dir", remote_dir).rstrip("/") or "/"
        if not os.path.isdir(src):
            raise ValueError(f"local_dir {src!r} is not a directory")
        out = [self.mkdir(dst)]
        for root, dirs, names in os.walk(src):
            rel = os.path.relpath(root, src)
            base = dst if rel == "." else dst + "/" + rel.replace(os.sep, "/")
            for d in sorted(dirs):
                if not os.path.islink(os.path.join(root, d)):
                    out.append(self.mkdir(base + "/" + d))
            for n in sorted(names):
                full = os.path.join(root, n)
                if os.path.islink(full) or not os.path.isfile(full):
                    continue
                with open(full, "rb") as f:
                    out.append(self.write(base + "/" + n, f, mode=os.stat(full).st_mode & 0o777))
        return out

    def download_dir(self, remote_dir: str, local_dir: str) -> List[str]:
        """Copy the directory tree ``remote_dir`` of the sandbox into
        ``local_dir`` (created if missing); returns the local paths of the
        files written. Symlinks and special files are skipped, and no entry
        may leave ``local_dir``."""
        src = _check.string("remote_dir", remote_dir).rstrip("/") or "/"
        dst = os.path.abspath(_check.string("local_dir", local_dir))
        os.makedirs(dst, exist_ok=True)
        written = []
        for e in self.list(src, depth=20):
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
                    f.write(self.read(e.path))
                try:
                    os.chmod(target, int(e.mode or "644", 8) & 0o777)
                except ValueError:
                    pass
                written.append(target)
        return written


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


class Sandbox:
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
        request_timeout: Optional[Seconds] = None,
        client: Optional[Client] = None,
    ) -> "Sandbox":
        """Create a sandbox (see :meth:`Client.create`); ``client`` defaults to ``Client()``."""
        if client is not None and not isinstance(client, Client):
            raise TypeError(f"client must be a paddock.Client, not {type(client).__name__}")
        return (client or Client()).create(
            template, timeout=timeout, env=env, metadata=metadata, resources=resources, network=network,
            secrets=secrets, on_timeout=on_timeout, max_cost_micros=max_cost_micros, request_timeout=request_timeout,
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

    def pause(self) -> SandboxInfo:
        """Freeze every process (memory and files kept, CPU billing stops)."""
        self.info = SandboxInfo.from_json(self.client._call("POST", self._path("pause"), json_body={}))
        return self.info

    def resume(self) -> SandboxInfo:
        """Continue a paused sandbox with a new lease of its original length."""
        self.info = SandboxInfo.from_json(self.client._call("POST", self._path("resume"), json_body={}))
        return self.info

    def metrics(self) -> Metrics:
        """The sandbox's resource accounting (CPU, memory, disk, network, cost)."""
        return Metrics.from_json(self.client._call("GET", self._path("metrics")))

    def set_network(self, network: NetworkLike) -> SandboxInfo:
        """Replace the egress policy (``"off"``, ``"full"`` or a
        :class:`NetworkPolicy` / dict); it applies at once."""
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
        d = self.client._call("POST", self._path("exec"), json_body=body, timeout=rt if rt is not None else self._exec_http_timeout(body))
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
