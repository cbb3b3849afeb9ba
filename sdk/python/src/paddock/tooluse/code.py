"""The run_code tool: cells in the sandbox's stateful interpreters, with
figures returned as images (matching Go's ``tooluse.FormatCode``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List

from .._models_gen import CodeExecution
from ..types import ExecResult

__all__ = ["RUN_CODE", "DEFAULT_IMAGE_BUDGET", "Image", "format_code", "image_note", "run_code_tool_text"]

RUN_CODE = "run_code"
#: The base64 bytes of images one run_code result may carry by default.
DEFAULT_IMAGE_BUDGET = 2 << 20
_MAX_IMAGES = 4


@dataclass
class Image:
    """An image a tool call produced: ``media_type`` and base64 ``data``."""

    media_type: str
    data: str


def run_code_tool_text() -> str:
    """The first sentences of run_code's description (the environment note follows)."""
    return (
        "Run a cell of code in a stateful interpreter in a sandbox, like a notebook: variables, imports "
        "and loaded data stay for later calls. Returns stdout, stderr, the value of the last expression and "
        "any error; matplotlib figures (no plt.show() needed) come back as images. numpy, pandas and "
        "matplotlib are installed. "
    )


def run_code_schema() -> Dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": "The code to run."},
            "language": {"type": "string", "enum": ["python", "javascript", "bash"],
                         "description": "The interpreter: python, javascript (Node) or bash; each language keeps its own state."},
        },
        "required": ["code", "language"],
        "additionalProperties": False,
    }


def format_code(res: CodeExecution, budget: int = 20000, image_budget: int = DEFAULT_IMAGE_BUDGET) -> "tuple[str, bool, List[Image]]":
    """The JSON text the model reads, whether the cell failed, and up to four
    PNG/JPEG images within ``image_budget`` base64 bytes (others are named in
    the text)."""
    from .session import format_exec, truncate_middle

    if budget <= 0:
        budget = 20000
    if image_budget <= 0:
        image_budget = DEFAULT_IMAGE_BUDGET
    ex = json.loads(format_exec(ExecResult(exit_code=0, signal=None, timed_out=False, stdout=res.stdout, stderr=res.stderr,
                                           stdout_truncated=res.stdout_truncated, stderr_truncated=res.stderr_truncated),
                                budget * 3 // 4).text)
    out: Dict[str, Any] = {"execution_count": res.execution_count, "stdout": ex["stdout"], "stderr": ex["stderr"]}
    if ex["stdout_truncated"]:
        out["stdout_truncated"] = True
    if ex["stderr_truncated"]:
        out["stderr_truncated"] = True
    images: List[Image] = []
    notes: List[str] = []
    outputs: List[str] = []
    left = budget // 4
    for r in res.results:
        text, _ = truncate_middle(r.data.get("text/plain", ""), max(left, 200))
        left -= len(text)
        if r.is_main_result:
            out["result"] = text
        for mt in ("image/png", "image/jpeg"):
            data = r.data.get(mt)
            if data is None:
                continue
            if len(images) >= _MAX_IMAGES:
                notes.append(f"{mt} of {len(data)} bytes not shown: at most {_MAX_IMAGES} images per call")
            elif len(data) > image_budget:
                notes.append(f"{mt} of {len(data)} bytes not shown: over the {image_budget}-byte image budget; save it to a file or make it smaller")
            else:
                image_budget -= len(data)
                images.append(Image(mt, data))
                notes.append(f"{mt} shown as image {len(images)}")
            break
        for mt, n in (r.omitted or {}).items():
            notes.append(f"{mt} of {n} bytes left out by the sandbox: too large")
        if not r.is_main_result and text:
            outputs.append(text)
    if outputs:
        out["outputs"] = outputs
    if res.error is not None:
        tb, _ = truncate_middle(res.error.traceback, budget // 4)
        out["error"] = {"name": res.error.name, "value": res.error.value, "traceback": tb}
    if res.timed_out:
        out["timed_out"] = True
    if res.restarted:
        out["restarted"] = True
    if notes:
        out["images"] = notes
    return json.dumps(out, ensure_ascii=False, separators=(",", ":")), res.error is not None, images


def image_note(text: str, images: List[Image]) -> str:
    """``text`` with a note about its images, for APIs whose tool results
    cannot carry images (OpenAI Chat tool messages)."""
    if not images:
        return text
    return f"{text}\n[{len(images)} image(s) produced; this API cannot show images in tool results, describe the data in text instead]"
