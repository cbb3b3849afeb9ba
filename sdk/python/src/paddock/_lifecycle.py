"""Request bodies of the lifecycle calls (stop, start, pause retention,
idle policy), shared by the sync and async clients and checked before
anything is sent."""

from __future__ import annotations

import math
from typing import Any, Dict

from . import _check

#: What idling out does.
ON_IDLE = ("pause", "stop")


def _whole(name: str, value: Any, minimum: float) -> int:
    t = _check.number(name, value, minimum=minimum)
    return 0 if t is None else int(math.ceil(t))


def idle_json(idle_timeout: Any, on_idle: Any, auto_resume: Any, idle_counts_processes: Any) -> Dict[str, Any]:
    """The idle fields of POST /v1/sandboxes (only those given)."""
    out: Dict[str, Any] = {}
    t = _whole("idle_timeout", idle_timeout, 1)
    if t:
        out["idle_timeout_seconds"] = t
    o = _check.choice("on_idle", on_idle, ON_IDLE)
    if o:
        out["on_idle"] = o
    for name, v in (("auto_resume", auto_resume), ("idle_counts_processes", idle_counts_processes)):
        if v is None:
            continue
        if not isinstance(v, bool):
            raise TypeError(f"{name} must be a bool, not {type(v).__name__}")
        if v:
            out[name] = True
    return out


def pause_json(keep_for: Any, then_stop_after: Any) -> Dict[str, Any]:
    """The body of POST /v1/sandboxes/{id}/pause."""
    out: Dict[str, Any] = {}
    k = _whole("keep_for", keep_for, 1)
    if k:
        out["keep_for_seconds"] = k
    s = _whole("then_stop_after", then_stop_after, 1)
    if s:
        out["then_stop_after_seconds"] = s
    if k and s and s >= k:
        raise ValueError(f"keep_for ({k} s) must be longer than then_stop_after ({s} s)")
    return out


def stop_json(keep_for: Any) -> Dict[str, Any]:
    """The body of POST /v1/sandboxes/{id}/stop."""
    k = _whole("keep_for", keep_for, 1)
    return {"keep_for_seconds": k} if k else {}
