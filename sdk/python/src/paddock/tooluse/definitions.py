"""The canonical tool definitions and their Anthropic and OpenAI shapes."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from .. import _check
from .code import run_code_schema, run_code_tool_text

RUN_PYTHON = "run_python"
RUN_COMMAND = "run_command"
WRITE_FILE = "write_file"
READ_FILE = "read_file"
RUN_CODE = "run_code"
ALL_TOOLS = (RUN_PYTHON, RUN_COMMAND, WRITE_FILE, READ_FILE)
#: Every tool, run_code (the stateful code tool, not offered by default) included.
KNOWN_TOOLS = ALL_TOOLS + (RUN_CODE,)

#: The default command timeout of a tool call, in seconds (the daemon's exec default).
DEFAULT_TIMEOUT = 60.0


@dataclass
class Options:
    """What the tools say and do.

    ``timeout``: seconds per command (default 60); ``output_budget``: the
    characters of stdout+stderr a result keeps (default 20000, head and
    tail); ``max_file_bytes``: the largest file ``read_file`` returns
    (default 100000); ``network_note``: what the descriptions say about the
    network (default "It has no internet access."); ``tools``: which tools
    to offer (default the four of ``ALL_TOOLS``; add ``run_code`` for the
    stateful code tool); ``image_budget``: the base64 bytes of images one
    run_code result carries (default 2 MiB).
    """

    timeout: float = DEFAULT_TIMEOUT
    output_budget: int = 20000
    max_file_bytes: int = 100000
    network_note: str = "It has no internet access."
    tools: Sequence[str] = field(default_factory=lambda: list(ALL_TOOLS))
    image_budget: int = 2 << 20

    def __post_init__(self) -> None:
        self.timeout = _check.number("timeout", self.timeout, minimum=0.001)  # type: ignore[assignment]
        _check.integer("output_budget", self.output_budget, minimum=1)
        _check.integer("max_file_bytes", self.max_file_bytes, minimum=1)
        _check.integer("image_budget", self.image_budget, minimum=1)
        _check.string("network_note", self.network_note, required=False)
        names = _check.str_list("tools", self.tools) or []
        for n in names:
            if n not in KNOWN_TOOLS:
                raise ValueError(f"tools: unknown tool {n!r} (known: {', '.join(KNOWN_TOOLS)})")
        if not names:
            raise ValueError("tools must name at least one tool")
        self.tools = names


@dataclass
class Tool:
    """A tool: its name, description and JSON Schema of the input."""

    name: str
    description: str
    input_schema: Dict[str, Any]


def _object(props: Dict[str, Any], *required: str) -> Dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(required), "additionalProperties": False}


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    out = (f"{h}h" if h else "") + (f"{m}m" if m or h else "") + f"{sec}s"
    return out


def tools(options: Optional[Options] = None) -> List[Tool]:
    """The tools ``options`` offer, in its order (the same text as Go's ``tooluse.Tools``)."""
    o = options or Options()
    env = (
        "The sandbox is a Linux machine (Debian) with python3, node, gcc, bash and git. "
        f"{o.network_note} Files persist between calls in this conversation; the working directory is /workspace. "
        f"Each call may run for at most {_duration(o.timeout)}."
    )
    path = {"type": "string", "description": "File path, absolute or relative to /workspace."}
    every = {
        RUN_PYTHON: Tool(
            RUN_PYTHON,
            "Run Python 3 code in a sandbox and return its exit code, stdout and stderr. "
            "Use it to compute, test ideas and check your work; print what you want to see. " + env,
            _object({"code": {"type": "string", "description": "Python 3 source code to run as a script."}}, "code"),
        ),
        RUN_COMMAND: Tool(
            RUN_COMMAND,
            "Run a bash command in a sandbox and return its exit code, stdout and stderr. "
            "Use it to compile and run programs, install packages, or inspect files. " + env,
            _object({"command": {"type": "string", "description": "A bash command line, run with bash -lc in /workspace."}}, "command"),
        ),
        WRITE_FILE: Tool(
            WRITE_FILE,
            "Write a text file in the sandbox, creating parent directories. Relative paths are relative to /workspace. " + env,
            _object({"path": dict(path), "content": {"type": "string", "description": "The full file content."}}, "path", "content"),
        ),
        RUN_CODE: Tool(RUN_CODE, run_code_tool_text() + env, run_code_schema()),
        READ_FILE: Tool(
            READ_FILE,
            f"Read a text file from the sandbox (at most {o.max_file_bytes} bytes). Relative paths are relative to /workspace.",
            _object({"path": dict(path)}, "path"),
        ),
    }
    return [every[n] for n in o.tools]


def strict(schema: Any) -> bool:
    """Whether ``schema`` meets OpenAI's strict mode: every object closed
    (``additionalProperties: false``) with every property required."""
    if not isinstance(schema, dict):
        return True
    props = schema.get("properties")
    if schema.get("type") != "object" and props is None:
        return True
    if schema.get("additionalProperties") is not False:
        return False
    required = set(schema.get("required") or [])
    return all(k in required and strict(v) for k, v in (props or {}).items())


def _list(ts: Optional[Sequence[Tool]]) -> List[Tool]:
    return list(ts) if ts is not None else tools()


def anthropic_tools(ts: Optional[Sequence[Tool]] = None) -> List[Dict[str, Any]]:
    """The ``tools`` of an Anthropic Messages request."""
    return [{"name": t.name, "description": t.description, "input_schema": copy.deepcopy(t.input_schema)} for t in _list(ts)]


def openai_chat_tools(ts: Optional[Sequence[Tool]] = None) -> List[Dict[str, Any]]:
    """The ``tools`` of an OpenAI Chat Completions request (``strict`` where allowed)."""
    out = []
    for t in _list(ts):
        fn: Dict[str, Any] = {"name": t.name, "description": t.description, "parameters": copy.deepcopy(t.input_schema)}
        if strict(t.input_schema):
            fn["strict"] = True
        out.append({"type": "function", "function": fn})
    return out


def openai_response_tools(ts: Optional[Sequence[Tool]] = None) -> List[Dict[str, Any]]:
    """The ``tools`` of an OpenAI Responses request (function tools, ``strict`` set)."""
    return [
        {"type": "function", "name": t.name, "description": t.description, "parameters": copy.deepcopy(t.input_schema), "strict": strict(t.input_schema)}
        for t in _list(ts)
    ]
