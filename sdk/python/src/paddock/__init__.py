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

from .aio import AsyncClient, AsyncEventStream, AsyncFiles, AsyncProcess, AsyncSandbox
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
from .sandbox import EventStream, Files, Process, Sandbox
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
    Resources,
    SandboxInfo,
    SandboxPage,
    Secret,
    Template,
    Usage,
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
    "Event",
    "ExecResult",
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
