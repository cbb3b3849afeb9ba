"""Paddock: self-hosted sandboxes that give AI models a real computer.

    from paddock import Sandbox

    with Sandbox.create() as sbx:              # PADDOCK_URL, PADDOCK_API_KEY
        sbx.files.write("main.py", "print(6 * 7)")
        res = sbx.exec(["python3", "main.py"], timeout=30)
        print(res.exit_code, res.stdout)

A non-zero exit and a timeout are results (``exit_code``, ``timed_out``),
not exceptions; errors of the request or the sandbox raise a subclass of
:class:`PaddockError`.
"""

from __future__ import annotations

from .aio import AsyncClient, AsyncEventStream, AsyncFiles, AsyncFileWatch, AsyncProcess, AsyncSandbox, AsyncTerminal
from .client import DEFAULT_URL, ENV_API_KEY, ENV_URL, Client, __version__
from .errors import (
    BadRequest,
    Conflict,
    InternalError,
    LimitExceeded,
    NoCapacity,
    NoSpace,
    NotFound,
    NotSupported,
    PaddockError,
    RequestTimeout,
    TooLarge,
    TransportError,
    Unauthorized,
    Unavailable,
    UnknownTemplate,
)
from ._code import CodeContext, CodeError, CodeEvent, CodeExecution, CodeResult
from .sandbox import EventStream, Files, Process, Sandbox
from .terminal import FileWatch, Terminal
from .types import (
    BuildEvent,
    Event,
    ExecResult,
    FileEntry,
    Health,
    LifecycleEvent,
    Metrics,
    NetworkPolicy,
    Port,
    ProcessInfo,
    PtyInfo,
    Resources,
    SandboxInfo,
    SandboxPage,
    Secret,
    Template,
    Usage,
    WatchEvent,
)

__all__ = [
    "__version__",
    "DEFAULT_URL",
    "ENV_URL",
    "ENV_API_KEY",
    "Client",
    "Sandbox",
    "Files",
    "Process",
    "EventStream",
    "AsyncClient",
    "AsyncSandbox",
    "AsyncEventStream",
    "AsyncFiles",
    "AsyncProcess",
    "AsyncTerminal",
    "AsyncFileWatch",
    "Terminal",
    "FileWatch",
    "PtyInfo",
    "WatchEvent",
    "Event",
    "ExecResult",
    "CodeContext",
    "CodeError",
    "CodeEvent",
    "CodeExecution",
    "CodeResult",
    "FileEntry",
    "Health",
    "ProcessInfo",
    "Resources",
    "SandboxInfo",
    "SandboxPage",
    "BuildEvent",
    "LifecycleEvent",
    "Metrics",
    "NetworkPolicy",
    "Port",
    "Secret",
    "Template",
    "Usage",
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
