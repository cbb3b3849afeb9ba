"""The base class of the SDK's exceptions, apart from :mod:`paddock.errors`
so that the generated classes of ``_errors_gen`` can derive from it."""

from __future__ import annotations

from typing import Optional

__all__ = ["PaddockError"]


class PaddockError(Exception):
    """Base class of every error raised by the SDK.

    ``status`` is the HTTP status (``None`` when no answer was received),
    ``code`` the daemon's error code such as ``"not_found"`` (``None`` when
    unknown) and ``message`` the human-readable text. Match on the class or on
    ``code``; ``message`` may change between daemon versions.
    """

    __module__ = "paddock.errors"

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
            from ._errors_gen import STATUS_TEXT  # generated; imports this module

            msg = STATUS_TEXT.get(self.status, "")
        if msg and label:
            return f"{msg} ({label})"
        return msg or label or self.__class__.__name__

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(status={self.status!r}, code={self.code!r}, message={self.message!r})"

    def __reduce__(self):  # keep pickling (multiprocessing, concurrent.futures) working
        return (_rebuild, (self.__class__, self.message, self.status, self.code))


def _rebuild(cls, message, status, code):
    return cls(message, status=status, code=code)
