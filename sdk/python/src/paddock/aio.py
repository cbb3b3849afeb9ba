"""An asyncio front end: the blocking SDK run in worker threads (``asyncio.to_thread``).

    async with await AsyncSandbox.create() as sbx:
        res = await sbx.exec(["python3", "-c", "print(6*7)"])
        async for ev in sbx.exec_stream("for i in 1 2 3; do echo $i; sleep 1; done"):
            print(ev.type, ev.data)
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Union

from .types import Event, ExecResult, FileEntry, ProcessInfo, SandboxInfo

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client, Seconds
    from .sandbox import EventStream, Files, Process, Sandbox

__all__ = ["AsyncSandbox", "AsyncFiles", "AsyncProcess", "AsyncEventStream"]

_END = object()


async def _run(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return await asyncio.to_thread(fn, *args, **kwargs)


class AsyncEventStream:
    """``async for`` over the events of a stream; the request is sent on the
    first iteration. :attr:`result` is set after the ``exit`` event."""

    def __init__(self, open_stream: Callable[[], "EventStream"]) -> None:
        self._open = open_stream
        self._stream: Optional["EventStream"] = None
        self.result: Optional[ExecResult] = None

    def __aiter__(self) -> "AsyncEventStream":
        return self

    async def __anext__(self) -> Event:
        if self._stream is None:
            self._stream = await _run(self._open)
        ev = await _run(next, self._stream, _END)
        if ev is _END:
            raise StopAsyncIteration
        self.result = self._stream.result
        return ev  # type: ignore[return-value]

    async def aclose(self) -> None:
        if self._stream is not None:
            await _run(self._stream.close)

    async def __aenter__(self) -> "AsyncEventStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class AsyncFiles:
    """The async twin of :class:`paddock.Files`."""

    def __init__(self, files: "Files") -> None:
        self.sync = files

    async def write(self, path: str, data: Union[bytes, str], mode: Union[int, str, None] = None) -> FileEntry:
        return await _run(self.sync.write, path, data, mode)

    async def read(self, path: str) -> bytes:
        return await _run(self.sync.read, path)

    async def read_text(self, path: str, encoding: str = "utf-8", errors: str = "strict") -> str:
        return await _run(self.sync.read_text, path, encoding, errors)

    async def list(self, path: Optional[str] = None, depth: Optional[int] = None) -> List[FileEntry]:
        return await _run(self.sync.list, path, depth)

    async def stat(self, path: str) -> FileEntry:
        return await _run(self.sync.stat, path)

    async def exists(self, path: str) -> bool:
        return await _run(self.sync.exists, path)

    async def remove(self, path: str, recursive: bool = False) -> None:
        await _run(self.sync.remove, path, recursive)

    async def mkdir(self, path: str, mode: Union[int, str, None] = None) -> FileEntry:
        return await _run(self.sync.mkdir, path, mode)


class AsyncProcess:
    """The async twin of :class:`paddock.Process`."""

    def __init__(self, process: "Process") -> None:
        self.sync = process

    id = property(lambda self: self.sync.id)
    pid = property(lambda self: self.sync.pid)
    state = property(lambda self: self.sync.state)
    result = property(lambda self: self.sync.result)
    info = property(lambda self: self.sync.info)

    async def refresh(self) -> ProcessInfo:
        return await _run(self.sync.refresh)

    async def wait(self, timeout: Optional["Seconds"] = None) -> Optional[ExecResult]:
        return await _run(self.sync.wait, timeout)

    def output(self, *, timeout: Optional["Seconds"] = None) -> AsyncEventStream:
        return AsyncEventStream(lambda: self.sync.output(timeout=timeout))

    async def write_stdin(self, data: Union[bytes, str], eof: bool = False) -> None:
        await _run(self.sync.write_stdin, data, eof)

    async def close_stdin(self) -> None:
        await _run(self.sync.close_stdin)

    async def signal(self, sig: str = "SIGTERM") -> None:
        await _run(self.sync.signal, sig)

    async def kill(self) -> None:
        await _run(self.sync.kill)


class AsyncSandbox:
    """The async twin of :class:`paddock.Sandbox`; ``async with`` deletes it at the end."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self.sync = sandbox
        self.files = AsyncFiles(sandbox.files)

    @classmethod
    async def create(cls, template: Optional[str] = None, *, client: Optional["Client"] = None, **kwargs: Any) -> "AsyncSandbox":
        """Create a sandbox; the arguments are those of :meth:`paddock.Sandbox.create`."""
        from .sandbox import Sandbox

        return cls(await _run(Sandbox.create, template, client=client, **kwargs))

    @classmethod
    async def connect(cls, sandbox_id: str, *, client: Optional["Client"] = None) -> "AsyncSandbox":
        from .sandbox import Sandbox

        return cls(await _run(Sandbox.connect, sandbox_id, client=client))

    def __repr__(self) -> str:
        return f"AsyncSandbox(id={self.id!r}, state={self.state!r})"

    id = property(lambda self: self.sync.id)
    state = property(lambda self: self.sync.state)
    info = property(lambda self: self.sync.info)
    metadata = property(lambda self: self.sync.metadata)
    expires_at = property(lambda self: self.sync.expires_at)

    async def refresh(self) -> SandboxInfo:
        return await _run(self.sync.refresh)

    async def set_timeout(self, timeout: "Seconds") -> SandboxInfo:
        return await _run(self.sync.set_timeout, timeout)

    async def exec(self, cmd: Any, **kwargs: Any) -> ExecResult:
        """Run a command; the arguments are those of :meth:`paddock.Sandbox.exec`."""
        return await _run(self.sync.exec, cmd, **kwargs)

    def exec_stream(self, cmd: Any, **kwargs: Any) -> AsyncEventStream:
        """``async for ev in sbx.exec_stream(cmd)``; arguments as :meth:`paddock.Sandbox.exec`."""
        return AsyncEventStream(lambda: self.sync.exec_stream(cmd, **kwargs))

    async def start(self, cmd: Any, **kwargs: Any) -> AsyncProcess:
        """Start a background process; arguments as :meth:`paddock.Sandbox.start`."""
        return AsyncProcess(await _run(self.sync.start, cmd, **kwargs))

    async def processes(self) -> List[AsyncProcess]:
        return [AsyncProcess(p) for p in await _run(self.sync.processes)]

    async def kill(self) -> None:
        await _run(self.sync.kill)

    async def close(self) -> None:
        await _run(self.sync.close)

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        from .errors import PaddockError

        try:
            await self.close()
        except PaddockError:
            if exc_type is None:
                raise
