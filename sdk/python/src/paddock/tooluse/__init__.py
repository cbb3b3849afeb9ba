"""Tool helpers for model APIs, matching Go's ``tooluse`` package.

    from paddock.tooluse import Session, run_anthropic

    client = anthropic.Anthropic()
    with Session(tools=["run_python"]) as tools:     # one sandbox per conversation
        msg, messages = run_anthropic(client, tools, model="claude-sonnet-5-5", max_tokens=4096,
                                      messages=[{"role": "user", "content": "What is 2**100?"}])

* :func:`tools` / :func:`anthropic_tools` / :func:`openai_chat_tools` /
  :func:`openai_response_tools`: the canonical definitions (``run_python``,
  ``run_command``, ``write_file``, ``read_file``) in each API's shape, with
  ``strict: true`` where the schema allows it.
* :class:`Session`: the executor; one sandbox per conversation (created on
  the first call) or, with ``per_call=True``, a fresh one per call.
* ``run_code`` (opt in with ``tools=[..., "run_code"]``): cells in the
  sandbox's stateful interpreters; figures go back as images (Anthropic
  image blocks, Responses ``input_image``; a note on Chat), see
  :func:`format_code`.
* :func:`format_exec`: an :class:`~paddock.ExecResult` as the JSON the model
  reads, head and tail kept within a budget, and ``is_error``.
* :func:`run_anthropic`, :func:`run_openai_chat`, :func:`run_openai_responses`:
  ready loops taking your own official client object (duck-typed: this
  package imports no model SDK).
"""

from __future__ import annotations

from .code import DEFAULT_IMAGE_BUDGET, RUN_CODE, Image, format_code, image_note
from .definitions import (
    KNOWN_TOOLS,
    READ_FILE,
    RUN_COMMAND,
    RUN_PYTHON,
    WRITE_FILE,
    Options,
    Tool,
    anthropic_tools,
    openai_chat_tools,
    openai_response_tools,
    strict,
    tools,
)
from .loops import MaxTurnsExceeded, run_anthropic, run_openai_chat, run_openai_responses
from .session import Result, Session, format_exec, truncate_middle

__all__ = [
    "RUN_CODE",
    "KNOWN_TOOLS",
    "DEFAULT_IMAGE_BUDGET",
    "Image",
    "format_code",
    "image_note",
    "RUN_PYTHON",
    "RUN_COMMAND",
    "WRITE_FILE",
    "READ_FILE",
    "Options",
    "Tool",
    "tools",
    "anthropic_tools",
    "openai_chat_tools",
    "openai_response_tools",
    "strict",
    "Result",
    "Session",
    "format_exec",
    "truncate_middle",
    "MaxTurnsExceeded",
    "run_anthropic",
    "run_openai_chat",
    "run_openai_responses",
]
