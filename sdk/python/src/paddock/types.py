"""The data the Paddock API returns, as dataclasses.

Field names follow the JSON wire format of ``api/openapi.yaml``. Timestamps
are parsed into timezone-aware :class:`datetime.datetime` objects.

The wire shapes themselves (``SandboxJSON``, ``ExecResultJSON``, ...: the
JSON as it travels, as TypedDicts) and the enums (``SandboxState``,
``EventType``, ``ErrorCode``, ...) are generated from api/openapi.yaml into
``_types_gen`` and re-exported here; the unit tests check that every field
of the dataclasses below is a key of its wire shape.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, List, Mapping, Optional, Union

from . import _types_gen
from ._convert import parse_time
from ._models_gen import (  # noqa: F401  (generated dataclasses used as they are)
    BuildEvent,
    CopyStep,
    CreateSecretRequest,
    CreateTemplateRequest,
    ErrorBody,
    LifecycleEvent,
    Metrics,
    MetricsHistory,
    MetricsSample,
    NetworkPolicy,
    Port,
    PtyInfo,
    Recipe,
    RecipeStep,
    Secret,
    Template,
    TemplateSource,
    Usage,
    WatchEvent,
)
from ._types_gen import *  # noqa: F401,F403  (the generated wire shapes and enums)
from .errors import PaddockError, error_for

__all__ = [
    "Resources",
    "SandboxInfo",
    "SandboxPage",
    "ExecResult",
    "Event",
    "ProcessInfo",
    "FileEntry",
    "Health",
    "BuildEvent",
    "CopyStep",
    "CreateSecretRequest",
    "CreateTemplateRequest",
    "ErrorBody",
    "LifecycleEvent",
    "Metrics",
    "MetricsHistory",
    "MetricsSample",
    "NetworkPolicy",
    "NetworkLike",
    "Port",
    "Recipe",
    "RecipeStep",
    "Secret",
    "Template",
    "TemplateSource",
    "Usage",
    "PtyInfo",
    "WatchEvent",
    *_types_gen.__all__,
]

def _int(v: Any, default: int = 0) -> int:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else default


def _opt_int(v: Any) -> Optional[int]:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""


def _opt_str(v: Any) -> Optional[str]:
    return v if isinstance(v, str) and v else None


def _str_map(v: Any) -> Dict[str, str]:
    return {str(k): str(x) for k, x in v.items()} if isinstance(v, dict) else {}


@dataclass
class Resources:
    """The limits of a sandbox. In a create request, ``None`` (or 0) takes the daemon's default."""

    vcpus: Optional[float] = None
    memory_mib: Optional[int] = None
    disk_mib: Optional[int] = None
    pids: Optional[int] = None

    @classmethod
    def from_json(cls, d: Any) -> "Resources":
        d = d if isinstance(d, dict) else {}
        v = d.get("vcpus")
        return cls(
            vcpus=float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None,
            memory_mib=_opt_int(d.get("memory_mib")),
            disk_mib=_opt_int(d.get("disk_mib")),
            pids=_opt_int(d.get("pids")),
        )

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for k in ("vcpus", "memory_mib", "disk_mib", "pids"):
            v = getattr(self, k)
            if v:
                out[k] = v
        return out


ResourcesLike = Union[Resources, Mapping[str, Any]]

#: A network policy: a :class:`NetworkPolicy`, a dict of its fields, or a
#: mode alone (``"off"``, ``"full"``).
NetworkLike = Union[NetworkPolicy, Mapping[str, Any], str]


@dataclass
class SandboxInfo:
    """One sandbox as the daemon last reported it."""

    id: str
    template: str = ""
    #: ``creating``, ``running``, ``paused``, ``stopped`` (files kept) or ``terminated``.
    state: str = ""
    created_at: Optional[datetime] = None
    #: When the lease ends and the reaper terminates the sandbox.
    expires_at: Optional[datetime] = None
    metadata: Dict[str, str] = field(default_factory=dict)
    resources: Resources = field(default_factory=Resources)
    #: The OCI runtime running the sandbox (runc, crun, ...).
    runtime: Optional[str] = None
    ended_at: Optional[datetime] = None
    #: Why the sandbox stopped or was terminated: "deleted", "expired", "failed: ...".
    reason: Optional[str] = None
    #: What happens when the lease ends: ``kill``, ``pause`` or ``stop`` (files kept).
    on_timeout: str = ""
    #: The cost cap in micro-units (0: none).
    max_cost_micros: int = 0
    paused_at: Optional[datetime] = None
    #: The egress policy.
    network: Optional[NetworkPolicy] = None
    #: The names of the secrets the sandbox's egress may use.
    secrets: List[str] = field(default_factory=list)
    #: While stopped: when; its files are kept until ``expires_at``.
    stopped_at: Optional[datetime] = None
    #: While paused with ``then_stop_after``: when it will be stopped.
    stop_at: Optional[datetime] = None
    #: The idle policy given at create (0 / "" / False: none).
    idle_timeout_seconds: int = 0
    on_idle: str = ""
    auto_resume: bool = False
    idle_counts_processes: bool = False
    #: The lifecycle transitions, oldest first: ``state``, ``at``, ``reason``.
    history: List[LifecycleEvent] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Any) -> "SandboxInfo":
        d = d if isinstance(d, dict) else {}
        return cls(
            id=_str(d.get("id")),
            template=_str(d.get("template")),
            state=_str(d.get("state")),
            created_at=parse_time(d.get("created_at")),
            expires_at=parse_time(d.get("expires_at")),
            metadata=_str_map(d.get("metadata")),
            resources=Resources.from_json(d.get("resources")),
            runtime=_opt_str(d.get("runtime")),
            ended_at=parse_time(d.get("ended_at")),
            reason=_opt_str(d.get("reason")),
            on_timeout=_str(d.get("on_timeout")),
            max_cost_micros=_int(d.get("max_cost_micros")),
            paused_at=parse_time(d.get("paused_at")),
            network=NetworkPolicy.from_json(d["network"]) if isinstance(d.get("network"), dict) else None,
            secrets=[str(x) for x in d.get("secrets") or [] if isinstance(x, str)],
            stopped_at=parse_time(d.get("stopped_at")),
            stop_at=parse_time(d.get("stop_at")),
            idle_timeout_seconds=_int(d.get("idle_timeout_seconds")),
            on_idle=_str(d.get("on_idle")),
            auto_resume=d.get("auto_resume") is True,
            idle_counts_processes=d.get("idle_counts_processes") is True,
            history=[LifecycleEvent.from_json(x) for x in d.get("history") or [] if isinstance(x, dict)],
        )


@dataclass
class SandboxPage:
    """One page of a sandbox listing; ``next_cursor`` is empty on the last page."""

    sandboxes: List[SandboxInfo]
    next_cursor: str = ""


@dataclass
class ExecResult:
    """The outcome of a command. A non-zero exit and a timeout are results, not errors.

    ``exit_code`` is ``None`` when the process was killed by a signal, and
    ``signal`` then names it (``"SIGKILL"``). ``stdout`` and ``stderr`` hold at
    most ``max_output_bytes`` each (decoded as UTF-8 by the daemon's JSON);
    ``*_truncated`` says output was dropped and ``*_bytes`` counts everything
    the command wrote.
    """

    exit_code: Optional[int]
    signal: Optional[str] = None
    timed_out: bool = False
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    duration_ms: int = 0
    oom_killed: bool = False

    @property
    def ok(self) -> bool:
        """True when the command exited with status 0 (and did not time out)."""
        return self.exit_code == 0 and not self.timed_out and self.signal is None

    @classmethod
    def from_json(cls, d: Any) -> "ExecResult":
        d = d if isinstance(d, dict) else {}
        return cls(
            exit_code=_opt_int(d.get("exit_code")),
            signal=_opt_str(d.get("signal")),
            timed_out=bool(d.get("timed_out")),
            stdout=_str(d.get("stdout")),
            stderr=_str(d.get("stderr")),
            stdout_truncated=bool(d.get("stdout_truncated")),
            stderr_truncated=bool(d.get("stderr_truncated")),
            stdout_bytes=_int(d.get("stdout_bytes")),
            stderr_bytes=_int(d.get("stderr_bytes")),
            duration_ms=_int(d.get("duration_ms")),
            oom_killed=bool(d.get("oom_killed")),
        )


@dataclass
class Event:
    """One event of an output stream (``exec_stream``, ``Process.output``).

    ``type`` is ``"start"`` (``pid`` set), ``"stdout"`` / ``"stderr"`` (``data``
    holds the raw bytes, already base64-decoded), ``"exit"`` (``result`` holds
    the :class:`ExecResult`, with empty ``stdout``/``stderr`` since the output
    was streamed) or ``"error"`` (``error`` set; iterating a stream raises it).
    """

    type: str
    data: bytes = b""
    pid: Optional[int] = None
    process_id: Optional[str] = None
    time: Optional[datetime] = None
    result: Optional[ExecResult] = None
    error: Optional[PaddockError] = None

    @property
    def text(self) -> str:
        """``data`` decoded as UTF-8 (invalid bytes replaced)."""
        return self.data.decode("utf-8", errors="replace")

    @classmethod
    def from_json(cls, d: Any) -> "Event":
        d = d if isinstance(d, dict) else {}
        typ = _str(d.get("type"))
        raw = d.get("data")
        data = base64.b64decode(raw) if isinstance(raw, str) and raw else b""
        ev = cls(
            type=typ,
            data=data,
            pid=_opt_int(d.get("pid")) or None,
            process_id=_opt_str(d.get("process_id")),
            time=parse_time(d.get("time")),
        )
        if typ == "exit":
            ev.result = ExecResult.from_json(d)
        elif typ == "error":
            err = d.get("error") if isinstance(d.get("error"), dict) else {}
            code = _opt_str(err.get("code"))
            ev.error = error_for(None, code or "internal", _str(err.get("message")) or "stream error event")
        return ev


@dataclass
class ProcessInfo:
    """A background process as the daemon last reported it."""

    id: str
    pid: int = 0
    argv: List[str] = field(default_factory=list)
    command: str = ""
    cwd: str = ""
    #: ``running`` or ``exited``.
    state: str = ""
    started_at: Optional[datetime] = None
    ended_at: Optional[datetime] = None
    #: Set once the process has exited.
    result: Optional[ExecResult] = None

    @classmethod
    def from_json(cls, d: Any) -> "ProcessInfo":
        d = d if isinstance(d, dict) else {}
        argv = d.get("argv")
        res = d.get("result")
        return cls(
            id=_str(d.get("id")),
            pid=_int(d.get("pid")),
            argv=[str(a) for a in argv] if isinstance(argv, list) else [],
            command=_str(d.get("command")),
            cwd=_str(d.get("cwd")),
            state=_str(d.get("state")),
            started_at=parse_time(d.get("started_at")),
            ended_at=parse_time(d.get("ended_at")),
            result=ExecResult.from_json(res) if isinstance(res, dict) else None,
        )


@dataclass
class FileEntry:
    """One file, directory or link inside a sandbox."""

    path: str
    name: str = ""
    #: ``file``, ``dir``, ``symlink`` or ``other``.
    type: str = ""
    size: int = 0
    #: Permission bits in octal, for example ``"0644"``.
    mode: str = ""
    modified_at: Optional[datetime] = None
    link_target: Optional[str] = None

    @property
    def is_dir(self) -> bool:
        return self.type == "dir"

    @property
    def is_file(self) -> bool:
        return self.type == "file"

    @classmethod
    def from_json(cls, d: Any) -> "FileEntry":
        d = d if isinstance(d, dict) else {}
        return cls(
            path=_str(d.get("path")),
            name=_str(d.get("name")),
            type=_str(d.get("type")),
            size=_int(d.get("size")),
            mode=_str(d.get("mode")),
            modified_at=parse_time(d.get("modified_at")),
            link_target=_opt_str(d.get("link_target")),
        )


@dataclass
class Health:
    """The answer of ``GET /v1/health``."""

    status: str
    version: str = ""
