"""Exceptions raised by the Paddock SDK.

Every error answer of paddockd becomes a subclass of :class:`PaddockError`
chosen by the answer's ``error.code`` (or, when the body carries no code, by
its HTTP status). A command that exits non-zero, times out or is killed is
*not* an error: it is an :class:`~paddock.ExecResult`.

Failures to reach the daemon at all (connection refused, an HTTP timeout, a
stream cut short) raise :class:`TransportError`, also a :class:`PaddockError`,
so ``except paddock.PaddockError`` catches everything the SDK raises.
"""

from __future__ import annotations

import json
from typing import Dict, Optional, Type

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
    "Unavailable",
    "NoCapacity",
    "NoSpace",
    "TransportError",
    "RequestTimeout",
]

# How much of an error body is read.
MAX_ERROR_BODY = 64 << 10


class PaddockError(Exception):
    """Base class of every error raised by the SDK.

    ``status`` is the HTTP status (``None`` when no answer was received),
    ``code`` the daemon's error code such as ``"not_found"`` (``None`` when
    unknown) and ``message`` the human-readable text. Match on the class or on
    ``code``; ``message`` may change between daemon versions.
    """

    #: The error code this class stands for; ``None`` on the base class.
    default_code: Optional[str] = None
    #: The HTTP status the code travels with.
    default_status: Optional[int] = None

    def __init__(self, message: str = "", *, status: Optional[int] = None, code: Optional[str] = None) -> None:
        self.status = status if status is not None else self.default_status
        self.code = code if code is not None else self.default_code
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        label = self.code or (f"HTTP {self.status}" if self.status else None)
        msg = self.message
        if not msg and self.status:
            msg = _STATUS_TEXT.get(self.status, "")
        if msg and label:
            return f"{msg} ({label})"
        return msg or label or self.__class__.__name__

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(status={self.status!r}, code={self.code!r}, message={self.message!r})"

    def __reduce__(self):  # keep pickling (multiprocessing, concurrent.futures) working
        return (_rebuild, (self.__class__, self.message, self.status, self.code))


def _rebuild(cls, message, status, code):
    return cls(message, status=status, code=code)


class BadRequest(PaddockError):
    """400 ``bad_request``: malformed request or a value out of range."""

    default_code, default_status = "bad_request", 400


class Unauthorized(PaddockError):
    """401 ``unauthorized``: missing or unknown API key."""

    default_code, default_status = "unauthorized", 401


class NotFound(PaddockError):
    """404 ``not_found``: no such sandbox, process or file (or another key's sandbox)."""

    default_code, default_status = "not_found", 404


class Conflict(PaddockError):
    """409 ``conflict``: the sandbox or process is in the wrong state (for example not running)."""

    default_code, default_status = "conflict", 409


class TooLarge(PaddockError):
    """413 ``too_large``: a body or file is over its limit."""

    default_code, default_status = "too_large", 413


class UnknownTemplate(PaddockError):
    """422 ``unknown_template``: the daemon has no template of that name."""

    default_code, default_status = "unknown_template", 422


class LimitExceeded(PaddockError):
    """429 ``limit_exceeded``: a limit of the key or a maximum of the daemon was reached."""

    default_code, default_status = "limit_exceeded", 429


class InternalError(PaddockError):
    """500 ``internal``: the daemon failed."""

    default_code, default_status = "internal", 500


class Unavailable(PaddockError):
    """502 ``unavailable``: the sandbox's agent did not answer."""

    default_code, default_status = "unavailable", 502


class NoCapacity(PaddockError):
    """503 ``no_capacity``: the host has no room for another sandbox right now."""

    default_code, default_status = "no_capacity", 503


class NoSpace(PaddockError):
    """507 ``no_space``: the sandbox's disk is full."""

    default_code, default_status = "no_space", 507


class TransportError(PaddockError):
    """The daemon could not be reached, or a response or stream was cut short."""


class RequestTimeout(TransportError):
    """An HTTP request to the daemon took longer than its timeout."""


_BY_CODE: Dict[str, Type[PaddockError]] = {
    c.default_code: c  # type: ignore[misc]
    for c in (
        BadRequest,
        Unauthorized,
        NotFound,
        Conflict,
        TooLarge,
        UnknownTemplate,
        LimitExceeded,
        InternalError,
        Unavailable,
        NoCapacity,
        NoSpace,
    )
}

_BY_STATUS: Dict[int, Type[PaddockError]] = {c.default_status: c for c in _BY_CODE.values()}  # type: ignore[misc]
_BY_STATUS[403] = Unauthorized
_BY_STATUS[504] = Unavailable

_STATUS_TEXT = {
    400: "bad request",
    401: "unauthorized",
    403: "forbidden",
    404: "not found",
    409: "conflict",
    413: "request entity too large",
    422: "unprocessable entity",
    429: "too many requests",
    500: "internal server error",
    502: "bad gateway",
    503: "service unavailable",
    504: "gateway timeout",
    507: "insufficient storage",
}


def error_for(status: Optional[int], code: Optional[str], message: str = "") -> PaddockError:
    """Build the exception for an error ``code`` (preferred) or HTTP ``status``.

    A code this SDK does not know (a newer daemon) falls back on the status,
    so ``except NotFound`` still catches any 404.
    """
    cls = _BY_CODE.get(code or "")
    if cls is None and status is not None:
        cls = _BY_STATUS.get(status)
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
