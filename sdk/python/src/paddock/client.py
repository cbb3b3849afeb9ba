"""The Paddock client: one daemon address and API key."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from . import _bodies, _check, _mcp
from ._http import NDJSON, Transport, path_of, query_pairs
from .errors import TransportError, error_for
from .types import (
    BuildEvent,
    Health,
    NetworkLike,
    ResourcesLike,
    SandboxInfo,
    SandboxPage,
    Secret,
    Template,
    Usage,
)

if TYPE_CHECKING:  # pragma: no cover
    from .sandbox import Sandbox

__all__ = ["Client", "DEFAULT_URL", "ENV_URL", "ENV_API_KEY", "__version__"]

__version__ = "0.1.0"

#: The address of a local paddockd, used when neither ``url`` nor ``PADDOCK_URL`` is set.
DEFAULT_URL = "http://127.0.0.1:7419"
ENV_URL = "PADDOCK_URL"
ENV_API_KEY = "PADDOCK_API_KEY"

#: Default timeout of ordinary API calls, in seconds.
DEFAULT_TIMEOUT = 60.0

_DEFAULT: Any = object()

Seconds = Union[int, float, timedelta]


def seconds(value: Optional[Seconds]) -> Optional[float]:
    """A number of seconds from an int, a float or a timedelta (None stays None)."""
    return _check.number("timeout", value, minimum=None)


def resolve_url(url: Optional[str]) -> str:
    """The base URL requests go to: ``url``, else ``$PADDOCK_URL``, else :data:`DEFAULT_URL`.

    ``http://`` is assumed without a scheme; a trailing ``/`` or ``/v1`` is dropped.
    """
    base = url or os.environ.get(ENV_URL) or DEFAULT_URL
    base = base.strip()
    if "://" not in base:
        base = "http://" + base
    base = base.rstrip("/")
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    return base


class Client:
    """A connection to one paddockd.

    ``Client()`` reads ``PADDOCK_URL`` (default ``http://127.0.0.1:7419``) and
    ``PADDOCK_API_KEY``. ``request_timeout`` (alias ``timeout``) is the HTTP
    deadline of ordinary calls in seconds; exec, wait and stream calls derive
    theirs from the command's own ``timeout`` plus a margin. A client holds no
    connection and is safe to share between threads; ``with Client() as c``
    and :meth:`close` exist for symmetry with the async client.
    """

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
        key = api_key if api_key is not None else os.environ.get(ENV_API_KEY, "")
        # A key read from a file often ends with a newline.
        self.api_key = key.strip()
        if timeout is not _DEFAULT:
            request_timeout = timeout
        self.timeout = _check.number("request_timeout", request_timeout, minimum=0)
        self._t = Transport(self.url, self.api_key, user_agent or f"paddock-python/{__version__}")

    def __repr__(self) -> str:
        return f"Client(url={self.url!r})"

    def close(self) -> None:
        """Nothing to release (one connection per call); kept for symmetry."""

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- low level -------------------------------------------------------

    def _call(self, method: str, path: str, *, query: Any = None, json_body: Any = None, timeout: Any = _DEFAULT,
              headers: Optional[Mapping[str, str]] = None) -> Any:
        """Send a JSON call; ``timeout`` defaults to the client's (None waits forever)."""
        return self._t.call(method, path, query=query, json_body=json_body, timeout=self.timeout if timeout is _DEFAULT else timeout, headers=headers)

    # -- system ----------------------------------------------------------

    def health(self) -> Health:
        """The daemon's status and version (needs no API key)."""
        d = self._call("GET", "/health") or {}
        return Health(status=str(d.get("status", "")), version=str(d.get("version", "")))

    def openapi(self) -> str:
        """The daemon's OpenAPI document (YAML)."""
        return self._t.send("GET", "/openapi.yaml", accept="application/yaml", timeout=self.timeout).read().decode("utf-8")

    # -- sandboxes -------------------------------------------------------

    def create(
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
    ) -> "Sandbox":
        """Create a sandbox and return it once it runs.

        ``template`` defaults to ``base``; ``timeout`` is the lease in seconds
        (default 300, at most 86400); ``env`` applies to every command;
        ``metadata`` are free-form labels usable in :meth:`list`;
        ``resources`` is a :class:`Resources` or a dict with ``vcpus``,
        ``memory_mib``, ``disk_mib``, ``pids``; ``network`` is ``"off"``
        (default), ``"full"``, or a :class:`NetworkPolicy` / dict with
        ``mode``, ``allow``, ``deny``; ``secrets`` names secrets made with
        :meth:`create_secret`; ``on_timeout`` is what the lease's end does:
        ``"kill"`` (default), ``"pause"`` or ``"stop"`` (where the daemon
        has it); ``max_cost_micros`` caps the cost. ``idle_timeout`` (seconds
        without API calls or port traffic) pauses the sandbox, or stops it
        with ``on_idle="stop"``; ``auto_resume=True`` resumes or starts it
        transparently on the next call; ``idle_counts_processes=True`` makes
        running processes count as activity.
        """
        from .sandbox import Sandbox

        body = _bodies.create_json(
            template, timeout=timeout, env=env, metadata=metadata, resources=resources, network=network,
            secrets=secrets, on_timeout=on_timeout, max_cost_micros=max_cost_micros,
            idle_timeout=idle_timeout, on_idle=on_idle, auto_resume=auto_resume, idle_counts_processes=idle_counts_processes,
        )
        d = self._call("POST", "/sandboxes", json_body=body, timeout=self._rt(request_timeout))
        return Sandbox(self, SandboxInfo.from_json(d))

    def _rt(self, request_timeout: Optional[Seconds]) -> Optional[float]:
        """A per-call request deadline, else the client's."""
        t = _check.number("request_timeout", request_timeout, minimum=0)
        return self.timeout if t is None else t

    def connect(self, sandbox_id: str) -> "Sandbox":
        """Fetch the sandbox ``sandbox_id`` (raises :class:`NotFound` if there is none)."""
        from .sandbox import Sandbox

        sbx = Sandbox(self, SandboxInfo(id=_check.string("sandbox_id", sandbox_id)))
        sbx.refresh()
        return sbx

    get = connect

    def list_page(
        self,
        *,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        state: Optional[str] = None,
        metadata: Optional[Mapping[str, str]] = None,
    ) -> SandboxPage:
        """One page of sandboxes. ``state`` keeps one state (``"all"`` includes
        terminated ones; the default lists every state but terminated);
        ``metadata`` keeps sandboxes having every given key=value."""
        q = query_pairs([("limit", _check.integer("limit", limit, minimum=1)), ("cursor", cursor or None), ("state", state or None)])
        for k, v in (_check.str_map("metadata", metadata) or {}).items():
            q.append(("metadata." + k, v))
        d = self._call("GET", "/sandboxes", query=q) or {}
        items = d.get("sandboxes") or []
        return SandboxPage(
            sandboxes=[SandboxInfo.from_json(x) for x in items],
            next_cursor=str(d.get("next_cursor") or ""),
        )

    def list(
        self,
        *,
        metadata: Optional[Mapping[str, str]] = None,
        state: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> Iterator["Sandbox"]:
        """Iterate over every matching sandbox, fetching pages of ``limit`` as needed.

        Yields :class:`Sandbox` handles (``.info`` holds what the listing said);
        no sandbox is deleted when the iteration ends.
        """
        from .sandbox import Sandbox

        cursor: Optional[str] = None
        seen = set()
        while True:
            page = self.list_page(limit=limit, cursor=cursor, state=state, metadata=metadata)
            for info in page.sandboxes:
                yield Sandbox(self, info)
            if not page.next_cursor:
                return
            if page.next_cursor in seen:
                raise TransportError(f"list sandboxes: cursor {page.next_cursor!r} repeated")
            seen.add(page.next_cursor)
            cursor = page.next_cursor

    def health_check(self) -> bool:
        """Whether the daemon answers ``ok``."""
        return self.health().status == "ok"

    def metrics_text(self) -> str:
        """The daemon's Prometheus metrics (``GET /metrics``, text format)."""
        return self._t.send("GET", "/metrics", accept="text/plain", timeout=self.timeout, root=True).read().decode("utf-8")

    def mcp_url(
        self,
        *,
        sandbox: Optional[str] = None,
        template: Optional[str] = None,
        sandbox_timeout: Optional[int] = None,
        timeout: Optional[float] = None,
        network: Optional[str] = None,
        allow: Optional[List[str]] = None,
    ) -> str:
        """The daemon's MCP endpoint (streamable HTTP, ``/v1/mcp``): hand it
        with :meth:`auth_headers` to an MCP client; each session gets its own
        sandbox, deleted when the session ends. ``sandbox`` attaches the
        sessions to an existing sandbox of this key instead (never deleted);
        ``template``, ``sandbox_timeout`` (the lease, seconds), ``timeout``
        (per call, seconds), ``network`` and ``allow`` set the options of the
        session's own sandbox. Checked before any request."""
        return self._t.url("/mcp", _mcp.mcp_query(sandbox, template, sandbox_timeout, timeout, network, allow))

    def auth_headers(self) -> Dict[str, str]:
        """The ``Authorization`` header other HTTP clients need (ports, MCP)."""
        return {"Authorization": "Bearer " + self.api_key} if self.api_key else {}

    # -- usage and secrets --------------------------------------------------

    def usage(self, since: Optional[datetime] = None, until: Optional[datetime] = None) -> Usage:
        """The calling key's consumption by sandboxes alive during
        [``since``, ``until``) (defaults: the last 24 hours)."""
        return Usage.from_json(self._call("GET", "/usage", query=_bodies.usage_query(since, until)))

    def create_secret(self, name: str, value: str, hosts: Sequence[str]) -> Secret:
        """Store a secret: sandboxes created with ``secrets=[name]`` see a
        placeholder that the egress proxy replaces by ``value`` in requests
        to ``hosts`` only."""
        return Secret.from_json(self._call("POST", "/secrets", json_body=_bodies.secret_json(name, value, hosts)))

    def secrets(self) -> List[Secret]:
        """This key's secrets (names and hosts, never values)."""
        d = self._call("GET", "/secrets") or {}
        return [Secret.from_json(x) for x in d.get("secrets") or []]

    def delete_secret(self, name: str) -> None:
        """Delete one of this key's secrets."""
        self._call("DELETE", path_of("secrets", _check.string("name", name)))

    # -- templates ---------------------------------------------------------

    def templates(self) -> List[Template]:
        """The templates this key can use (base, shared and its own)."""
        d = self._call("GET", "/templates") or {}
        return [Template.from_json(x) for x in d.get("templates") or []]

    def template(self, name: str) -> Template:
        """One template by ``name[:tag]``."""
        return Template.from_json(self._call("GET", path_of("templates", _check.string("name", name))))

    def delete_template(self, name: str) -> None:
        """Delete one of this key's templates (a template in use raises :class:`Conflict`)."""
        self._call("DELETE", path_of("templates", _check.string("name", name)))

    def create_template(self, name: str, *, request_timeout: Optional[Seconds] = None, **spec: Any) -> Template:
        """Import or build a template and wait for it.

        ``spec``: ``from_`` (an image reference or a dict with ``image``,
        ``oci_layout``, ``tarball``, ``template``), ``recipe``,
        ``dockerfile``, ``context``, ``build_args``, ``resources``,
        ``step_timeout_seconds``, ``no_cache``, ``network``. Builds may be
        long: ``request_timeout`` defaults to none.
        """
        body = _bodies.template_json(name, spec)
        t = _check.number("request_timeout", request_timeout, minimum=0)
        return Template.from_json(self._call("POST", "/templates", json_body=body, timeout=t))

    def build_template(self, name: str, **spec: Any) -> Iterator[BuildEvent]:
        """Build a template and yield its progress (:class:`BuildEvent`:
        ``step``, ``output``, ``cached``, then ``done`` with ``.template``).
        A failed build raises its typed error. Arguments as :meth:`create_template`."""
        body = _bodies.template_json(name, spec)
        resp = self._t.send(
            "POST", "/templates", body=json.dumps(body).encode("utf-8"), content_type="application/json",
            accept=NDJSON, timeout=None,
        )
        return _build_events(resp)

    def sandbox(self, sandbox_id: str) -> "Sandbox":
        """A handle on ``sandbox_id`` without any request (``.info`` only has the id)."""
        from .sandbox import Sandbox

        return Sandbox(self, SandboxInfo(id=_check.string("sandbox_id", sandbox_id)))

    def _sandbox_path(self, sandbox_id: str, *segments: str) -> str:
        return path_of("sandboxes", sandbox_id, *segments)


def parse_build_event(line: bytes) -> Optional[BuildEvent]:
    """One NDJSON line of a build stream (None for a blank line); an error event raises."""
    line = line.strip()
    if not line:
        return None
    try:
        ev = BuildEvent.from_json(json.loads(line.decode("utf-8")))
    except (UnicodeDecodeError, ValueError) as e:
        raise TransportError(f"bad event in build stream: {e}") from e
    if ev.type == "error":
        err = ev.error
        raise error_for(None, (err.code if err else "") or "internal", (err.message if err else "") or "build failed")
    return ev


def _build_events(resp: Any) -> Iterator[BuildEvent]:
    try:
        if resp.content_type == "application/json":
            yield BuildEvent(type="done", template=Template.from_json(resp.json()))
            return
        while True:
            line = resp.readline()
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
