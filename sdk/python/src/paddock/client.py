"""The Paddock client: one daemon address and API key."""

from __future__ import annotations

import math
import os
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Dict, Iterator, Mapping, Optional, Union

from ._http import Transport, path_of, query_pairs
from .errors import TransportError
from .types import Health, Resources, ResourcesLike, SandboxInfo, SandboxPage

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
    if value is None:
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected seconds as a number or a timedelta, got {type(value).__name__}")
    return float(value)


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
    ``PADDOCK_API_KEY``. ``timeout`` bounds ordinary calls in seconds; exec,
    wait and stream calls get their own, longer timeouts derived from the
    command's. A client holds no connection and is safe to share between
    threads.
    """

    def __init__(
        self,
        url: Optional[str] = None,
        api_key: Optional[str] = None,
        *,
        timeout: Optional[Seconds] = DEFAULT_TIMEOUT,
        user_agent: Optional[str] = None,
    ) -> None:
        self.url = resolve_url(url)
        key = api_key if api_key is not None else os.environ.get(ENV_API_KEY, "")
        # A key read from a file often ends with a newline.
        self.api_key = key.strip()
        self.timeout = seconds(timeout)
        self._t = Transport(self.url, self.api_key, user_agent or f"paddock-python/{__version__}")

    def __repr__(self) -> str:
        return f"Client(url={self.url!r})"

    # -- low level -------------------------------------------------------

    def _call(self, method: str, path: str, *, query: Any = None, json_body: Any = None, timeout: Any = _DEFAULT) -> Any:
        """Send a JSON call; ``timeout`` defaults to the client's (None waits forever)."""
        return self._t.call(method, path, query=query, json_body=json_body, timeout=self.timeout if timeout is _DEFAULT else timeout)

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
    ) -> "Sandbox":
        """Create a sandbox and return it once it runs.

        ``template`` defaults to ``base``; ``timeout`` is the lease in seconds
        (default 300, at most 86400); ``env`` applies to every command;
        ``metadata`` are free-form labels usable in :meth:`list`;
        ``resources`` is a :class:`Resources` or a dict with ``vcpus``,
        ``memory_mib``, ``disk_mib``, ``pids``.
        """
        from .sandbox import Sandbox

        body: Dict[str, Any] = {}
        if template:
            body["template"] = template
        t = seconds(timeout)
        if t is not None:
            body["timeout_seconds"] = int(math.ceil(t))
        if env:
            body["env"] = dict(env)
        if metadata:
            body["metadata"] = dict(metadata)
        if resources:
            r = resources.to_json() if isinstance(resources, Resources) else {k: v for k, v in dict(resources).items() if v}
            if r:
                body["resources"] = r
        d = self._call("POST", "/sandboxes", json_body=body)
        return Sandbox(self, SandboxInfo.from_json(d))

    def connect(self, sandbox_id: str) -> "Sandbox":
        """Fetch the sandbox ``sandbox_id`` (raises :class:`NotFound` if there is none)."""
        from .sandbox import Sandbox

        sbx = Sandbox(self, SandboxInfo(id=sandbox_id))
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
        q = query_pairs([("limit", limit or None), ("cursor", cursor or None), ("state", state or None)])
        for k, v in (metadata or {}).items():
            q.append(("metadata." + str(k), str(v)))
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

    def sandbox(self, sandbox_id: str) -> "Sandbox":
        """A handle on ``sandbox_id`` without any request (``.info`` only has the id)."""
        from .sandbox import Sandbox

        return Sandbox(self, SandboxInfo(id=sandbox_id))

    def _sandbox_path(self, sandbox_id: str, *segments: str) -> str:
        return path_of("sandboxes", sandbox_id, *segments)
