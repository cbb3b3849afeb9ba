"""Code contexts: ``sbx.run_code`` and the context routes, for the sync
(:class:`CodeMixin`) and the asyncio (:class:`AsyncCodeMixin`) sandboxes.

A code context is a long-lived interpreter (Python, JavaScript or Bash) in
the sandbox whose globals survive between cells; ``run_code`` without
``context`` uses the sandbox's default context of ``language``.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Mapping, Optional, Union

from . import _check
from ._http import NDJSON
from ._models_gen import CodeContext, CodeError, CodeEvent, CodeExecution, CodeResult
from .errors import TransportError

__all__ = ["CodeMixin", "AsyncCodeMixin", "CodeContext", "CodeExecution", "CodeResult", "CodeError", "CodeEvent"]

#: A cell's timeout when none is given (seconds), as the daemon's.
DEFAULT_CODE_TIMEOUT = 60.0
#: Added to the cell's timeout for the HTTP deadline: the interrupt grace
#: and transport.
CODE_HTTP_MARGIN = 35.0

ContextLike = Union[str, CodeContext, None]


def _context_id(context: ContextLike) -> str:
    if isinstance(context, CodeContext):
        return context.id
    return _check.string("context", context, required=False) or ""


def _code_body(code: str, language: Optional[str], context: ContextLike, timeout: Any, env: Optional[Mapping[str, str]]) -> Dict[str, Any]:
    body: Dict[str, Any] = {"code": _check.string("code", code, required=False)}
    if language:
        body["language"] = _check.string("language", language)
    cid = _context_id(context)
    if cid:
        body["context_id"] = cid
    t = _check.number("timeout", timeout, minimum=0)
    if t:
        body["timeout_seconds"] = t
    if env:
        body["env"] = _check.str_map("env", env)
    return body


def _http_timeout(body: Dict[str, Any]) -> float:
    return float(body.get("timeout_seconds") or DEFAULT_CODE_TIMEOUT) + CODE_HTTP_MARGIN


class _Collector:
    """Dispatches a cell's events to callbacks and rebuilds its execution."""

    def __init__(self, on_stdout: Any, on_stderr: Any, on_result: Any, on_error: Any) -> None:
        self.cb = {"stdout": on_stdout, "stderr": on_stderr, "result": on_result, "error": on_error}
        self.out: Dict[str, List[str]] = {"stdout": [], "stderr": []}
        self.results: List[CodeResult] = []
        self.execution: Optional[CodeExecution] = None

    def line(self, raw: bytes) -> bool:
        """Handles one NDJSON line; True once the end event was read."""
        raw = raw.strip()
        if not raw:
            return False
        try:
            ev = CodeEvent.from_json(json.loads(raw.decode("utf-8")))
        except (UnicodeDecodeError, ValueError) as e:
            raise TransportError(f"bad event in code stream: {e}") from e
        cb = self.cb.get(ev.type)
        if ev.type in ("stdout", "stderr"):
            self.out[ev.type].append(ev.text)
            if cb:
                cb(ev.text)
        elif ev.type == "result" and ev.result is not None:
            self.results.append(ev.result)
            if cb:
                cb(ev.result)
        elif ev.type == "error" and ev.error is not None and cb:
            cb(ev.error)
        elif ev.type == "end" and ev.execution is not None:
            ex = ev.execution
            ex.stdout, ex.stderr, ex.results = "".join(self.out["stdout"]), "".join(self.out["stderr"]), self.results
            self.execution = ex
            return True
        return False

    def finish(self) -> CodeExecution:
        if self.execution is None:
            raise TransportError("code stream ended without an end event")
        return self.execution


Callback = Optional[Callable[[Any], None]]


class CodeMixin:
    """``run_code`` and the code-context methods of :class:`paddock.Sandbox`."""

    client: Any

    def _path(self, *segments: str) -> str:  # provided by Sandbox
        raise NotImplementedError

    def run_code(
        self,
        code: str,
        *,
        language: Optional[str] = None,
        context: ContextLike = None,
        timeout: Optional[float] = None,
        env: Optional[Mapping[str, str]] = None,
        on_stdout: Callback = None,
        on_stderr: Callback = None,
        on_result: Callback = None,
        on_error: Callback = None,
    ) -> CodeExecution:
        """Run a cell in a stateful interpreter and return its :class:`CodeExecution`.

        ``language`` is ``python`` (default), ``javascript`` or ``bash``;
        ``context`` a context (or its id) from :meth:`create_code_context`,
        else the sandbox's default context of the language. The result has
        ``stdout``, ``stderr``, ``results`` (MIME bundles: the last
        expression's value with ``is_main_result``, matplotlib figures as
        ``image/png``) and ``error`` (name, value, traceback). An exception
        or a timeout (``timed_out``) is a result, not a Python exception.
        With any ``on_*`` callback the cell is streamed and the callbacks get
        stdout/stderr text, each :class:`CodeResult` and the
        :class:`CodeError` as they happen.
        """
        body = _code_body(code, language, context, timeout, env)
        if not any((on_stdout, on_stderr, on_result, on_error)):
            return CodeExecution.from_json(self.client._call("POST", self._path("code"), json_body=body, timeout=_http_timeout(body)))
        resp = self.client._t.send("POST", self._path("code"), body=json.dumps(body).encode("utf-8"),
                                   content_type="application/json", accept=NDJSON, timeout=_http_timeout(body))
        col = _Collector(on_stdout, on_stderr, on_result, on_error)
        try:
            while True:
                line = resp.readline()
                if not line or col.line(line):
                    break
        finally:
            resp.close()
        return col.finish()

    def create_code_context(self, language: str = "python", *, cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None) -> CodeContext:
        """Start a new code context (at most 16 per sandbox)."""
        body: Dict[str, Any] = {"language": _check.string("language", language)}
        if cwd:
            body["cwd"] = _check.string("cwd", cwd)
        if env:
            body["env"] = {str(k): str(v) for k, v in env.items()}
        return CodeContext.from_json(self.client._call("POST", self._path("code", "contexts"), json_body=body))

    def code_contexts(self) -> List[CodeContext]:
        """The sandbox's code contexts, oldest first."""
        d = self.client._call("GET", self._path("code", "contexts")) or {}
        return [CodeContext.from_json(c) for c in d.get("contexts") or []]

    def code_context(self, context: ContextLike) -> CodeContext:
        """Describe one code context."""
        return CodeContext.from_json(self.client._call("GET", self._path("code", "contexts", _context_id(context))))

    def restart_code_context(self, context: ContextLike) -> CodeContext:
        """Restart a context: its state is gone, its count starts again."""
        return CodeContext.from_json(self.client._call("POST", self._path("code", "contexts", _context_id(context), "restart")))

    def interrupt_code_context(self, context: ContextLike) -> CodeContext:
        """Interrupt the cell running in a context (SIGINT; restarted after 2 s)."""
        return CodeContext.from_json(self.client._call("POST", self._path("code", "contexts", _context_id(context), "interrupt")))

    def delete_code_context(self, context: ContextLike) -> None:
        """Delete a context and kill its interpreter."""
        self.client._call("DELETE", self._path("code", "contexts", _context_id(context)))


class AsyncCodeMixin:
    """The asyncio twin of :class:`CodeMixin` for :class:`paddock.AsyncSandbox`."""

    client: Any

    def _path(self, *segments: str) -> str:  # provided by AsyncSandbox
        raise NotImplementedError

    async def run_code(
        self,
        code: str,
        *,
        language: Optional[str] = None,
        context: ContextLike = None,
        timeout: Optional[float] = None,
        env: Optional[Mapping[str, str]] = None,
        on_stdout: Callback = None,
        on_stderr: Callback = None,
        on_result: Callback = None,
        on_error: Callback = None,
    ) -> CodeExecution:
        """See :meth:`paddock.Sandbox.run_code`; callbacks are plain functions."""
        body = _code_body(code, language, context, timeout, env)
        if not any((on_stdout, on_stderr, on_result, on_error)):
            return CodeExecution.from_json(await self.client._call("POST", self._path("code"), json_body=body, timeout=_http_timeout(body)))
        resp = await self.client._t.send("POST", self._path("code"), body=json.dumps(body).encode("utf-8"),
                                         content_type="application/json", accept=NDJSON, timeout=_http_timeout(body))
        col = _Collector(on_stdout, on_stderr, on_result, on_error)
        try:
            while True:
                line = await resp.readline()
                if not line or col.line(line):
                    break
        finally:
            resp.close()
        return col.finish()

    async def create_code_context(self, language: str = "python", *, cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None) -> CodeContext:
        body: Dict[str, Any] = {"language": _check.string("language", language)}
        if cwd:
            body["cwd"] = _check.string("cwd", cwd)
        if env:
            body["env"] = {str(k): str(v) for k, v in env.items()}
        return CodeContext.from_json(await self.client._call("POST", self._path("code", "contexts"), json_body=body))

    async def code_contexts(self) -> List[CodeContext]:
        d = await self.client._call("GET", self._path("code", "contexts")) or {}
        return [CodeContext.from_json(c) for c in d.get("contexts") or []]

    async def code_context(self, context: ContextLike) -> CodeContext:
        return CodeContext.from_json(await self.client._call("GET", self._path("code", "contexts", _context_id(context))))

    async def restart_code_context(self, context: ContextLike) -> CodeContext:
        return CodeContext.from_json(await self.client._call("POST", self._path("code", "contexts", _context_id(context), "restart")))

    async def interrupt_code_context(self, context: ContextLike) -> CodeContext:
        return CodeContext.from_json(await self.client._call("POST", self._path("code", "contexts", _context_id(context), "interrupt")))

    async def delete_code_context(self, context: ContextLike) -> None:
        await self.client._call("DELETE", self._path("code", "contexts", _context_id(context)))
