"""The asyncio client: the same calls as the blocking SDK, over asyncio
streams (one HTTP/1.1 connection per call, no threads).

    async with AsyncClient() as client:
        async with await client.create(network="off") as sbx:
            res = await sbx.exec(["python3", "-c", "print(6*7)"], timeout=30)
            async for ev in sbx.exec_stream("for i in 1 2 3; do echo $i; sleep 1; done"):
                print(ev.type, ev.data)
"""

from __future__ import annotations

import json
import math
import os
from datetime import datetime
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional, Sequence

from . import _bodies, _check, _lifecycle, _mcp
from ._ahttp import AsyncTransport
from ._code import AsyncCodeMixin
from ._aio_objects import AsyncEventStream, AsyncFiles, AsyncProcess
from ._aio_terminal import AsyncFileWatch, AsyncTerminal, AsyncTerminalMixin
from ._exec import CLOSE_TIMEOUT, DEFAULT_EXEC_TIMEOUT, HTTP_MARGIN, Command, Stdin, _exec_body, exec_headers, with_path
from ._http import NDJSON, path_of, query_pairs
from .client import DEFAULT_TIMEOUT, ENV_API_KEY, Seconds, __version__, parse_build_event, resolve_url
from .errors import NotFound, PaddockError, TransportError
from .types import (
    BuildEvent,
    ExecResult,
    Health,
    Metrics,
    MetricsHistory,
    NetworkLike,
    Port,
    ProcessInfo,
    ResourcesLike,
    SandboxInfo,
    SandboxPage,
    Secret,
    Template,
    Usage,
)

__all__ = ["AsyncClient", "AsyncSandbox", "AsyncFiles", "AsyncProcess", "AsyncEventStream"]

_DEFAULT: Any = object()

class AsyncClient:
    """A connection to one paddockd for asyncio programs; the arguments are
    those of :class:`paddock.Client`."""

    def __init__(
        self,
        url: Optional[str] = None,
        api_key: Optional[str] = None,
        *,
        request_timeout: Optional[Seconds] = DEFAULT_TIMEOUT,
        timeout: Any = _DEFAULT,
        user_agent: Optional[str] = None,
    ) -> None:
        if url is not None and not isinstance(url, str):
            raise TypeError(f"url must be a str, not {type(url).__name__}")
        if api_key is not None and not isinstance(api_key, str):
            raise TypeError(f"api_key must be a str, not {type(api_key).__name__}")
        self.url = resolve_url(url)
        self.api_key = (api_key if api_key is not None else os.environ.get(ENV_API_KEY, "")).strip()
        if timeout is not _DEFAULT:
            request_timeout = timeout
        self.timeout = _check.number("request_timeout", request_timeout, minimum=0)
        self._t = AsyncTransport(self.url, self.api_key, user_agent or f"paddock-python/{__version__}")

    def __repr__(self) -> str:
        return f"AsyncClient(url={self.url!r})"

    async def close(self) -> None:
        """Nothing to release (one connection per call); kept for ``async with``."""

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def _call(self, method: str, path: str, *, query: Any = None, json_body: Any = None, timeout: Any = _DEFAULT,
                    headers: Optional[Mapping[str, str]] = None) -> Any:
        return await self._t.call(method, path, query=query, json_body=json_body, timeout=self.timeout if timeout is _DEFAULT else timeout, headers=headers)

    def _rt(self, request_timeout: Optional[Seconds]) -> Optional[float]:
        t = _check.number("request_timeout", request_timeout, minimum=0)
        return self.timeout if t is None else t

    # -- system ----------------------------------------------------------

    async def health(self) -> Health:
        d = await self._call("GET", "/health") or {}
        return Health(status=str(d.get("status", "")), version=str(d.get("version", "")))

    async def openapi(self) -> str:
        resp = await self._t.send("GET", "/openapi.yaml", accept="application/yaml", timeout=self.timeout)
        return (await resp.read()).decode("utf-8")

    async def metrics_text(self) -> str:
        resp = await self._t.send("GET", "/metrics", accept="text/plain", timeout=self.timeout, root=True)
        return (await resp.read()).decode("utf-8")

    def mcp_url(self, **options: Any) -> str:
        """See :meth:`paddock.Client.mcp_url` (the same keyword options)."""
        return self._t.url("/mcp", _mcp.mcp_query(**options))

    def auth_headers(self) -> Dict[str, str]:
        return {"Authorization": "Bearer " + self.api_key} if self.api_key else {}

    # -- sandboxes -------------------------------------------------------

    async def create(
        self,
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
    ) -> "AsyncSandbox":
        """Create a sandbox; see :meth:`paddock.Client.create`."""
        body = _bodies.create_json(
            template, timeout=timeout, env=env, metadata=metadata, resources=resources, network=network,
            secrets=secrets, on_timeout=on_timeout, max_cost_micros=max_cost_micros,
            idle_timeout=idle_timeout, on_idle=on_idle, auto_resume=auto_resume, idle_counts_processes=idle_counts_processes,
        )
        d = await self._call("POST", "/sandboxes", json_body=body, timeout=self._rt(request_timeout))
        return AsyncSandbox(self, SandboxInfo.from_json(d))

    async def connect(self, sandbox_id: str) -> "AsyncSandbox":
        sbx = AsyncSandbox(self, SandboxInfo(id=_check.string("sandbox_id", sandbox_id)))
        await sbx.refresh()
        return sbx

    get = connect

    def sandbox(self, sandbox_id: str) -> "AsyncSandbox":
        return AsyncSandbox(self, SandboxInfo(id=_check.string("sandbox_id", sandbox_id)))

    async def list_page(
        self, *, limit: Optional[int] = None, cursor: Optional[str] = None, state: Optional[str] = None,
        metadata: Optional[Mapping[str, str]] = None,
    ) -> SandboxPage:
        q = query_pairs([("limit", _check.integer("limit", limit, minimum=1)), ("cursor", cursor or None), ("state", state or None)])
        for k, v in (_check.str_map("metadata", metadata) or {}).items():
            q.append(("metadata." + k, v))
        d = await self._call("GET", "/sandboxes", query=q) or {}
        return SandboxPage(sandboxes=[SandboxInfo.from_json(x) for x in d.get("sandboxes") or []], next_cursor=str(d.get("next_cursor") or ""))

    async def list(
        self, *, metadata: Optional[Mapping[str, str]] = None, state: Optional[str] = None, limit: Optional[int] = None,
    ) -> AsyncIterator["AsyncSandbox"]:
        """``async for sbx in client.list(...)``, fetching pages as needed."""
        cursor: Optional[str] = None
        seen = set()
        while True:
            page = await self.list_page(limit=limit, cursor=cursor, state=state, metadata=metadata)
            for info in page.sandboxes:
                yield AsyncSandbox(self, info)
            if not page.next_cursor:
                return
            if page.next_cursor in seen:
                raise TransportError(f"list sandboxes: cursor {page.next_cursor!r} repeated")
            seen.add(page.next_cursor)
            cursor = page.next_cursor

    # -- usage and secrets ---------------------------------------------------

    async def usage(self, since: Optional[datetime] = None, until: Optional[datetime] = None) -> Usage:
        return Usage.from_json(await self._call("GET", "/usage", query=_bodies.usage_query(since, until)))

    async def create_secret(self, name: str, value: str, hosts: Sequence[str]) -> Secret:
        return Secret.from_json(await self._call("POST", "/secrets", json_body=_bodies.secret_json(name, value, hosts)))

    async def secrets(self) -> List[Secret]:
        d = await self._call("GET", "/secrets") or {}
        return [Secret.from_json(x) for x in d.get("secrets") or []]

    async def delete_secret(self, name: str) -> None:
        await self._call("DELETE", path_of("secrets", _check.string("name", name)))

    # -- templates ---------------------------------------------------------

    async def templates(self) -> List[Template]:
        d = await self._call("GET", "/templates") or {}
        return [Template.from_json(x) for x in d.get("templates") or []]

    async def template(self, name: str) -> Template:
        return Template.from_json(await self._call("GET", path_of("templates", _check.string("name", name))))

    async def delete_template(self, name: str) -> None:
        await self._call("DELETE", path_of("templates", _check.string("name", name)))

    async def create_template(self, name: str, *, request_timeout: Optional[Seconds] = None, **spec: Any) -> Template:
        body = _bodies.template_json(name, spec)
        t = _check.number("request_timeout", request_timeout, minimum=0)
        return Template.from_json(await self._call("POST", "/templates", json_body=body, timeout=t))

    async def build_template(self, name: str, **spec: Any) -> AsyncIterator[BuildEvent]:
        """``async for ev in client.build_template(name, from_=...)``: progress, then ``done``."""
        body = _bodies.template_json(name, spec)
        resp = await self._t.send("POST", "/templates", body=json.dumps(body).encode("utf-8"), content_type="application/json", accept=NDJSON, timeout=None)
        try:
            if resp.content_type == "application/json":
                yield BuildEvent(type="done", template=Template.from_json(await resp.json()))
                return
            while True:
                line = await resp.readline()
                if not line:
                    raise TransportError("build stream ended without a done event")
                ev = parse_build_event(line)
                if ev is None:
                    continue
                yield ev
                if ev.type == "done":
                    return
        finally:
            resp.close()


class AsyncSandbox(AsyncTerminalMixin, AsyncCodeMixin):
    """A sandbox for asyncio programs (see :class:`paddock.Sandbox`);
    ``async with`` deletes it at the end."""

    def __init__(self, client: AsyncClient, info: SandboxInfo) -> None:
        self.client = client
        self.info = info
        self.files = AsyncFiles(self)
        self._closed = False

    @classmethod
    async def create(cls, template: Optional[str] = None, *, client: Optional[AsyncClient] = None, **kwargs: Any) -> "AsyncSandbox":
        """Create a sandbox; the arguments are those of :meth:`paddock.Sandbox.create`."""
        if client is not None and not isinstance(client, AsyncClient):
            raise TypeError(f"client must be a paddock.AsyncClient, not {type(client).__name__}")
        return await (client or AsyncClient()).create(template, **kwargs)

    @classmethod
    async def connect(cls, sandbox_id: str, *, client: Optional[AsyncClient] = None) -> "AsyncSandbox":
        return await (client or AsyncClient()).connect(sandbox_id)

    def __repr__(self) -> str:
        return f"AsyncSandbox(id={self.id!r}, state={self.state!r})"

    id = property(lambda self: self.info.id)
    state = property(lambda self: self.info.state)
    template = property(lambda self: self.info.template)
    metadata = property(lambda self: self.info.metadata)
    expires_at = property(lambda self: self.info.expires_at)
    closed = property(lambda self: self._closed)

    def _path(self, *segments: str) -> str:
        return path_of("sandboxes", self.id, *segments)

    async def _info(self, method: str, verb: str, body: Any = None) -> SandboxInfo:
        self.info = SandboxInfo.from_json(await self.client._call(method, self._path(verb) if verb else self._path(), json_body=body))
        return self.info

    async def refresh(self) -> SandboxInfo:
        return await self._info("GET", "")

    async def set_timeout(self, timeout: Seconds) -> SandboxInfo:
        t = _check.number("timeout", timeout, minimum=1, allow_none=False)
        assert t is not None
        return await self._info("POST", "timeout", {"timeout_seconds": int(math.ceil(t))})

    async def pause(self, *, keep_for: Optional[Seconds] = None, then_stop_after: Optional[Seconds] = None) -> SandboxInfo:
        return await self._info("POST", "pause", _lifecycle.pause_json(keep_for, then_stop_after))

    async def resume(self) -> SandboxInfo:
        return await self._info("POST", "resume", {})

    async def stop(self, *, keep_for: Optional[Seconds] = None) -> SandboxInfo:
        return await self._info("POST", "stop", _lifecycle.stop_json(keep_for))

    async def boot(self) -> SandboxInfo:
        return await self._info("POST", "start", {})

    async def set_network(self, network: NetworkLike) -> SandboxInfo:
        return await self._info("PATCH", "network", _bodies.network_json(network))

    async def metrics(self) -> Metrics:
        return Metrics.from_json(await self.client._call("GET", self._path("metrics")))

    async def metrics_history(self) -> MetricsHistory:
        return MetricsHistory.from_json(await self.client._call("GET", self._path("metrics", "history")))

    async def ports(self) -> List[Port]:
        d = await self.client._call("GET", self._path("ports")) or {}
        return [Port.from_json(p) for p in d.get("ports") or []]

    def port_url(self, port: int, path: str = "") -> str:
        p = _check.integer("port", port, minimum=1)
        if p is None or p > 65535:
            raise ValueError(f"port must be 1..65535, got {port!r}")
        return self.client._t.url(self._path("ports", str(p))) + "/" + _check.string("path", path, required=False).lstrip("/")

    async def signed_port_url(self, port: int, path: str = "") -> str:
        p = _check.integer("port", port, minimum=1)
        for x in await self.ports():
            if x.port == p:
                return with_path(x.signed_url, _check.string("path", path, required=False))
        raise NotFound(f"nothing listens on port {p} in sandbox {self.id}")

    async def snapshot(self, name: str, *, request_timeout: Optional[Seconds] = None) -> Template:
        t = _check.number("request_timeout", request_timeout, minimum=0)
        return Template.from_json(await self.client._call("POST", self._path("snapshot"), json_body={"name": _check.string("name", name)}, timeout=t))

    # -- commands --------------------------------------------------------

    async def exec(
        self, cmd: Command, *, timeout: Optional[Seconds] = None, cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None, stdin: Optional[Stdin] = None,
        max_output_bytes: Optional[int] = None, request_timeout: Optional[Seconds] = None,
    ) -> ExecResult:
        """Run a command to completion (see :meth:`paddock.Sandbox.exec`): a
        timeout is a result (``timed_out``), never an exception."""
        body = _exec_body(cmd, timeout=timeout, cwd=cwd, env=env, stdin=stdin, max_output_bytes=max_output_bytes)
        rt = _check.number("request_timeout", request_timeout, minimum=0)
        http_t = rt if rt is not None else (body.get("timeout_seconds") or DEFAULT_EXEC_TIMEOUT) + HTTP_MARGIN
        return ExecResult.from_json(await self.client._call("POST", self._path("exec"), json_body=body, timeout=http_t, headers=exec_headers(body)))

    def exec_stream(
        self, cmd: Command, *, timeout: Optional[Seconds] = None, cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None, stdin: Optional[Stdin] = None, max_output_bytes: Optional[int] = None,
    ) -> AsyncEventStream:
        """``async for ev in sbx.exec_stream(cmd)``; arguments as :meth:`exec`."""
        body = _exec_body(cmd, timeout=timeout, cwd=cwd, env=env, stdin=stdin, max_output_bytes=max_output_bytes)
        http_t = (body.get("timeout_seconds") or DEFAULT_EXEC_TIMEOUT) + HTTP_MARGIN
        data = json.dumps(body).encode("utf-8")
        # No Paddock-Stdin-Last: see Sandbox.exec_stream.
        return AsyncEventStream(lambda: self.client._t.send("POST", self._path("exec"), body=data, content_type="application/json", accept=NDJSON, timeout=http_t))

    async def start(
        self, cmd: Command, *, timeout: Optional[Seconds] = None, cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None, stdin: Optional[Stdin] = None, keep_stdin_open: bool = False,
        max_output_bytes: Optional[int] = None,
    ) -> AsyncProcess:
        body = _exec_body(cmd, timeout=timeout, cwd=cwd, env=env, stdin=stdin, max_output_bytes=max_output_bytes, keep_stdin_open=keep_stdin_open)
        return AsyncProcess(self, ProcessInfo.from_json(await self.client._call("POST", self._path("processes"), json_body=body)))

    async def processes(self) -> List[AsyncProcess]:
        d = await self.client._call("GET", self._path("processes")) or {}
        return [AsyncProcess(self, ProcessInfo.from_json(p)) for p in d.get("processes") or []]

    async def process(self, process_id: str) -> AsyncProcess:
        p = AsyncProcess(self, ProcessInfo(id=_check.string("process_id", process_id)))
        await p.refresh()
        return p

    # -- end ---------------------------------------------------------------

    async def kill(self) -> None:
        """Delete the sandbox (idempotent)."""
        if self._closed:
            return
        try:
            await self.client._call("DELETE", self._path(), timeout=max(self.client.timeout or 0, CLOSE_TIMEOUT))
        except NotFound:
            pass
        self._closed = True
        self.info.state = "terminated"

    async def close(self) -> None:
        await self.kill()

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            await self.close()
        except PaddockError:
            if exc_type is None:
                raise
