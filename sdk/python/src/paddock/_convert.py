"""Lenient JSON readers and the base class of the generated dataclasses."""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Optional, TypeVar

T = TypeVar("T")

_TIME_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$")


def parse_time(value: Any) -> Optional[datetime]:
    """Parse an RFC 3339 timestamp (nanoseconds and ``Z`` included, which
    ``datetime.fromisoformat`` of Python < 3.11 refuses). ``None``, an empty
    string or an unparsable value give ``None``."""
    if not isinstance(value, str) or not value:
        return None
    m = _TIME_RE.match(value)
    if not m:
        return None
    date, clock, frac, tz = m.groups()
    frac = (frac or "")[:6].ljust(6, "0")
    if tz in ("Z", "z"):
        tz = "+00:00"
    try:
        return datetime.fromisoformat(f"{date}T{clock}.{frac}{tz}")
    except ValueError:
        return None


def format_time(value: datetime) -> str:
    """RFC 3339 in UTC (a naive datetime is taken as UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def obj(v: Any) -> Dict[str, Any]:
    return v if isinstance(v, dict) else {}


def s_(v: Any) -> str:
    return v if isinstance(v, str) else ""


def i_(v: Any) -> int:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


def f_(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def b_(v: Any) -> bool:
    return v is True


t_ = parse_time


def list_of(v: Any, conv: Callable[[Any], Optional[T]]) -> List[T]:
    if not isinstance(v, list):
        return []
    return [y for y in (conv(x) for x in v) if y is not None]


def map_of(v: Any, conv: Callable[[Any], Optional[T]]) -> Dict[str, T]:
    if not isinstance(v, dict):
        return {}
    return {str(k): y for k, y in ((k, conv(x)) for k, x in v.items()) if y is not None}


def to_wire(v: Any) -> Any:
    """The JSON form of a dataclass, list, dict, datetime or scalar; empty
    values (None, "", 0, False, [], {}) of dataclass fields are left out."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        out = {}
        for f in dataclasses.fields(v):
            x = getattr(v, f.name)
            if x is None or x == "" or x == [] or x == {} or x is False or (x == 0 and not isinstance(x, bool) and isinstance(x, (int, float))):
                continue
            out[f.name.rstrip("_")] = to_wire(x)
        return out
    if isinstance(v, datetime):
        return format_time(v)
    if isinstance(v, (list, tuple)):
        return [to_wire(x) for x in v]
    if isinstance(v, dict):
        return {str(k): to_wire(x) for k, x in v.items()}
    return v


class Model:
    """Base of the generated dataclasses."""

    def to_json(self) -> Dict[str, Any]:
        """The JSON object of this value, empty fields left out."""
        return to_wire(self)  # type: ignore[no-any-return]
