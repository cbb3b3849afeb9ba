"""Exceptions raised by the Paddock SDK.

Every error answer of paddockd becomes a subclass of :class:`PaddockError`
chosen by the answer's ``error.code`` (or, when the body carries no code, by
its HTTP status). The class of each code, and the status it travels with,
are generated from api/openapi.yaml into ``_errors_gen`` (``make
generate``). A command that exits non-zero, times out or is killed is *not*
an error: it is an :class:`~paddock.ExecResult`.

Failures to reach the daemon at all (connection refused, an HTTP timeout, a
stream cut short) raise :class:`TransportError`, also a :class:`PaddockError`,
so ``except paddock.PaddockError`` catches everything the SDK raises.
"""

from __future__ import annotations

import json
from typing import Optional

from ._error_base import PaddockError
from ._errors_gen import (
    BY_CODE,
    BY_STATUS,
    BadRequest,
    Conflict,
    InternalError,
    LimitExceeded,
    NoCapacity,
    NoSpace,
    NotFound,
    NotSupported,
    TooLarge,
    Unauthorized,
    Unavailable,
    UnknownTemplate,
)

__all__ = [
    "PaddockError",
    "BadRequest",
    "Unauthorized",
    "NotFound",
    "Conflict",
    "TooLarge",
    "UnknownTemplate",
    "LimitExceeded",
    "InternalError",
    "NotSupported",
    "Unavailable",
    "NoCapacity",
    "NoSpace",
    "TransportError",
    "RequestTimeout",
]

# How much of an error body is read.
MAX_ERROR_BODY = 64 << 10


class TransportError(PaddockError):
    """The daemon could not be reached, or a response or stream was cut short."""


class RequestTimeout(TransportError):
    """An HTTP request to the daemon took longer than its timeout."""


def error_for(status: Optional[int], code: Optional[str], message: str = "") -> PaddockError:
    """Build the exception for an error ``code`` (preferred) or HTTP ``status``.

    A code this SDK does not know (a newer daemon) falls back on the status,
    so ``except NotFound`` still catches any 404.
    """
    cls = BY_CODE.get(code or "")
    if cls is None and status is not None:
        cls = BY_STATUS.get(status)
        if cls is None and status >= 500:
            cls = InternalError
    if cls is None:
        cls = PaddockError
    if status is None and cls is not PaddockError:
        status = cls.default_status
    return cls(message, status=status, code=code or cls.default_code)


def error_from_body(status: int, body: bytes) -> PaddockError:
    """Build the exception of a non-2xx answer from (at most 64 KiB of) its body.

    Bodies in paddockd's format (``{"error": {"code", "message"}}``) give the
    code and message; anything else (a proxy's HTML page, plain text) falls
    back on the status with the first line of the text as the message.
    """
    try:
        doc = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
        err = doc["error"]
        code = err.get("code")
        if isinstance(code, str) and code:
            message = err.get("message")
            return error_for(status, code, message if isinstance(message, str) else "")
    return error_for(status, None, _plain_message(body))


def _plain_message(body: bytes) -> str:
    try:
        s = body.decode("utf-8").strip()
    except UnicodeDecodeError:
        return ""
    if not s or s.startswith("<"):
        return ""
    s = s.split("\n", 1)[0].strip()
    if len(s) > 200:
        s = s[:200] + "..."
    return s
