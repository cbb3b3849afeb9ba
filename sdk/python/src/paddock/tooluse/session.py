"""The executor: tool calls run in a sandbox, results formatted for the model."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from ..client import Client
from ..errors import PaddockError
from ..types import ExecResult
from .code import RUN_CODE, Image, format_code
from .definitions import READ_FILE, RUN_COMMAND, RUN_PYTHON, WRITE_FILE, Options, Tool, tools

__all__ = ["Result", "Session", "format_exec", "truncate_middle"]


@dataclass
class Result:
    """What goes back to the model: ``text`` and whether the call failed."""

    text: str
    is_error: bool = False
    #: Images the call produced (run_code figures), for APIs that show them.
    images: List[Image] = field(default_factory=list)


def _err(msg: str) -> Result:
    return Result("error: " + msg, True)


def truncate_middle(s: str, budget: int) -> Tuple[str, bool]:
    """``s`` within ``budget`` characters: its head and tail around a marker
    saying how much was cut; and whether anything was."""
    if len(s) <= budget:
        return s, False
    cut = len(s) - budget
    head = budget // 2
    tail = budget - head
    return s[:head] + f"\n[... {cut} characters cut ...]\n" + (s[len(s) - tail :] if tail else ""), True


def format_exec(res: ExecResult, budget: int = 20000) -> Result:
    """The JSON the model reads (``exit_code``, ``timed_out``, ``stdout``,
    ``stderr``, truncation flags), stdout and stderr sharing ``budget``
    characters (unused share goes to the other), and ``is_error`` when the
    command failed, timed out or was killed. Same output as Go's ``tooluse.FormatExec``."""
    if budget <= 0:
        budget = 20000
    so, se = res.stdout, res.stderr
    bs = budget // 2
    if len(se) < bs:
        bs = budget - len(se)
    be = budget - min(len(so), bs)
    out_s, cut_s = truncate_middle(so, bs)
    out_e, cut_e = truncate_middle(se, be)
    if res.signal and not out_e:
        out_e = "killed by " + res.signal
    out = {
        "exit_code": res.exit_code,
        "timed_out": res.timed_out,
        "stdout": out_s,
        "stderr": out_e,
        "stdout_truncated": res.stdout_truncated or cut_s,
        "stderr_truncated": res.stderr_truncated or cut_e,
    }
    failed = res.timed_out or res.exit_code is None or res.exit_code != 0
    return Result(json.dumps(out, ensure_ascii=False, separators=(",", ":")), failed)


class Session:
    """Runs tool calls in a sandbox.

    By default one sandbox serves the whole conversation: created at the
    first call with ``create`` (the keyword arguments of
    :meth:`paddock.Client.create`, e.g. ``network``, ``timeout``,
    ``on_timeout``, ``max_cost_micros``) and deleted by :meth:`close` (or at
    the end of a ``with`` block). With ``per_call=True`` each call gets a
    fresh sandbox, deleted after it. ``client`` defaults to ``Client()``.
    """

    def __init__(
        self,
        client: Optional[Client] = None,
        options: Optional[Options] = None,
        *,
        per_call: bool = False,
        create: Optional[Mapping[str, Any]] = None,
        tools: Optional[List[str]] = None,
        timeout: Optional[float] = None,
        output_budget: Optional[int] = None,
    ) -> None:
        if client is not None and not isinstance(client, Client):
            raise TypeError(f"client must be a paddock.Client, not {type(client).__name__}")
        if options is not None and not isinstance(options, Options):
            raise TypeError(f"options must be a paddock.tooluse.Options, not {type(options).__name__}")
        if create is not None and not isinstance(create, Mapping):
            raise TypeError(f"create must be a dict of Client.create arguments, not {type(create).__name__}")
        o = options or Options()
        if tools is not None or timeout is not None or output_budget is not None:
            o = Options(
                timeout=o.timeout if timeout is None else timeout,
                output_budget=o.output_budget if output_budget is None else output_budget,
                max_file_bytes=o.max_file_bytes,
                network_note=o.network_note,
                tools=o.tools if tools is None else tools,
                image_budget=o.image_budget,
            )
        self.client = client or Client()
        self.options = o
        self.per_call = bool(per_call)
        self.create = dict(create or {})
        self._sbx: Any = None
        self._lock = threading.Lock()
        self._closed = False
        self._n = 0

    def tools(self) -> List[Tool]:
        return tools(self.options)

    def sandbox(self) -> Any:
        """The conversation's sandbox, created on first use."""
        with self._lock:
            if self._closed:
                raise RuntimeError("tool session is closed")
            if self._sbx is None:
                self._sbx = self.client.create(**self.create)
            return self._sbx

    def close(self) -> None:
        """Delete the conversation's sandbox (idempotent)."""
        with self._lock:
            self._closed = True
            sbx, self._sbx = self._sbx, None
        if sbx is not None:
            sbx.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def call(self, name: str, tool_input: Union[str, bytes, Mapping[str, Any], None]) -> Result:
        """Run one tool call; ``tool_input`` is a dict or its JSON text. Every
        failure, the sandbox's included, is a :class:`Result` with ``is_error``."""
        if isinstance(tool_input, (str, bytes)):
            try:
                tool_input = json.loads(tool_input or "{}")
            except ValueError as e:
                return _err(f"invalid tool input: {e}")
        if tool_input is None:
            tool_input = {}
        if not isinstance(tool_input, Mapping):
            return _err("invalid tool input: not a JSON object")
        if name not in self.options.tools:
            return _err(f"unknown tool {name!r}")
        need = {RUN_PYTHON: ("code",), RUN_CODE: ("code",), RUN_COMMAND: ("command",), WRITE_FILE: ("path", "content"), READ_FILE: ("path",)}[name]
        args: Dict[str, str] = {}
        for f in need:
            v = tool_input.get(f)
            if not isinstance(v, str):
                return _err(f"{name}: missing required field {f!r}" if v is None else f"{name}: field {f!r} must be a string")
            args[f] = v
        if name == RUN_CODE and tool_input.get("language") is not None:
            if not isinstance(tool_input.get("language"), str):
                return _err(f"{name}: field 'language' must be a string")
            args["language"] = tool_input["language"]
        try:
            if self.per_call:
                with self.client.create(**self.create) as sbx:
                    return self._run(sbx, name, args)
            return self._run(self.sandbox(), name, args)
        except PaddockError as e:
            return _err(f"sandbox unavailable: {e}")

    def _run(self, sbx: Any, name: str, a: Dict[str, str]) -> Result:
        o = self.options
        try:
            if name == RUN_PYTHON:
                with self._lock:
                    self._n += 1
                    path = f"/tmp/run_python_{self._n}.py"
                sbx.files.write(path, a["code"])
                return self._exec(sbx, ["python3", path])
            if name == RUN_COMMAND:
                return self._exec(sbx, a["command"])
            if name == RUN_CODE:
                res = sbx.run_code(a["code"], language=a.get("language"), timeout=o.timeout)
                text, failed, images = format_code(res, o.output_budget, o.image_budget)
                return Result(text, failed, images)
            if name == WRITE_FILE:
                e = sbx.files.write(a["path"], a["content"])
                return Result(f"wrote {len(a['content'].encode('utf-8'))} bytes to {e.path}")
            st = sbx.files.stat(a["path"])
            if st.size > o.max_file_bytes:
                return _err(f"{st.path} is {st.size} bytes, more than the {o.max_file_bytes} this tool returns; use run_command with head, tail or grep")
            data = sbx.files.read(a["path"])
        except PaddockError as e:
            return _err(f"{name} failed: {e}")
        try:
            return Result(data.decode("utf-8"))
        except UnicodeDecodeError:
            return _err(f"{st.path} is not UTF-8 text ({len(data)} bytes); inspect it with run_command (for example xxd | head)")

    def _exec(self, sbx: Any, cmd: Any) -> Result:
        o = self.options
        try:
            res = sbx.exec(cmd, timeout=o.timeout, max_output_bytes=max(o.output_budget, 1024))
        except PaddockError as e:
            return _err(f"the sandbox could not run the command: {e}")
        return format_exec(res, o.output_budget)
