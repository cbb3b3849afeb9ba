"""The query of ``/v1/mcp`` that opens an MCP session with options (shared
by the sync and the async client)."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from . import _check

MAX_SECONDS = 86400  # api.MaxExecTimeoutSeconds: the bound of a lease and of a call


def mcp_query(
    sandbox: Any = None,
    template: Any = None,
    sandbox_timeout: Any = None,
    timeout: Any = None,
    network: Any = None,
    allow: Optional[Sequence[str]] = None,
) -> List[Tuple[str, str]]:
    """The query pairs of the session options; each is checked first."""
    q: List[Tuple[str, str]] = []
    if sandbox is not None:
        q.append(("sandbox", _check.string("sandbox", sandbox)))
        if any(v is not None for v in (template, sandbox_timeout, network, allow)):
            raise ValueError("sandbox (attach to an existing sandbox) excludes template, sandbox_timeout, network and allow")
    if template is not None:
        q.append(("template", _check.string("template", template)))
    if sandbox_timeout is not None:
        s = _check.integer("sandbox_timeout", sandbox_timeout, minimum=1, maximum=MAX_SECONDS)
        q.append(("sandbox_timeout", str(s)))
    if timeout is not None:
        t = _check.number("timeout", timeout, minimum=0.001)
        if t is not None and t > MAX_SECONDS:
            raise ValueError(f"timeout must be at most {MAX_SECONDS} seconds, got {t}")
        q.append(("timeout", repr(float(t))))
    if network is not None:
        q.append(("network", _check.choice("network", network, ("off", "allowlist", "full")) or ""))
    for h in _check.str_list("allow", allow) or []:
        q.append(("allow", h))
    return q
