"""Argument checks: a wrong type or value fails before any request, naming the parameter."""

from __future__ import annotations

import math
import os
from datetime import timedelta
from typing import Any, Dict, Iterable, List, Mapping, Optional

#: The lease-end actions; ``stop`` is sent as is and a daemon that lacks it answers 400.
ON_TIMEOUT = ("kill", "pause", "stop")
NETWORK_MODES = ("off", "allowlist", "full")


def number(name: str, value: Any, *, minimum: Optional[float] = 0.0, allow_none: bool = True) -> Optional[float]:
    """Seconds (or any amount) from an int, a float or a timedelta."""
    if value is None:
        if allow_none:
            return None
        raise TypeError(f"{name} is required")
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds or a timedelta, not {type(value).__name__}")
    v = float(value)
    if math.isnan(v) or math.isinf(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if minimum is not None and v < minimum:
        raise ValueError(f"{name} must be at least {minimum:g}, got {value!r}")
    return v


def integer(name: str, value: Any, *, minimum: Optional[int] = 0, maximum: Optional[int] = None) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum}, got {value}")
    return value


def string(name: str, value: Any, *, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    if required and not value:
        raise ValueError(f"{name} must not be empty")
    return value


def str_map(name: str, value: Any) -> Optional[Dict[str, str]]:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a mapping of str to str, not {type(value).__name__}")
    out = {}
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(f"{name} must map str to str; {k!r}: {type(v).__name__}")
        out[k] = v
    return out


def str_list(name: str, value: Any) -> Optional[List[str]]:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(f"{name} must be a list of str, not {type(value).__name__}")
    out = list(value)
    for x in out:
        if not isinstance(x, str):
            raise TypeError(f"{name} must be a list of str; got an item of type {type(x).__name__}")
    return out


def choice(name: str, value: Any, choices: Iterable[str]) -> Optional[str]:
    if value is None:
        return None
    cs = tuple(choices)
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, one of {', '.join(cs)}; not {type(value).__name__}")
    if value not in cs:
        raise ValueError(f"{name} must be one of {', '.join(cs)}; got {value!r}")
    return value
