"""Ready agent loops over the official model SDK clients, duck-typed.

Each takes your own client object (``anthropic.Anthropic()``,
``openai.OpenAI()``) and calls only ``client.messages.create``,
``client.chat.completions.create`` or ``client.responses.create`` with the
keyword arguments you give plus the tools; answers may be the SDK's model
objects or plain dicts. Tool calls run in ``session`` (a :class:`Session`
or anything with ``tools()``, ``call(name, input)`` and ``close()``),
closed at the end unless ``keep_session=True``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from .code import image_note
from .definitions import anthropic_tools, openai_chat_tools, openai_response_tools
from .session import Result

__all__ = ["MaxTurnsExceeded", "run_anthropic", "run_openai_chat", "run_openai_responses", "DEFAULT_MAX_TURNS"]

DEFAULT_MAX_TURNS = 20

OnToolCall = Optional[Callable[[str, Any, Result], None]]


class MaxTurnsExceeded(RuntimeError):
    """The model still called tools after ``max_turns``; ``last`` is its last answer."""

    def __init__(self, message: str, last: Any, conversation: Any = None) -> None:
        super().__init__(message)
        self.last = last
        self.conversation = conversation


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _plain(obj: Any) -> Any:
    """An SDK model object as the dict the next request can carry."""
    if isinstance(obj, dict):
        return obj
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(exclude_none=True)
    if isinstance(obj, list):
        return [_plain(x) for x in obj]
    if hasattr(obj, "__dict__"):
        return {k: _plain(v) for k, v in vars(obj).items() if v is not None and not k.startswith("_")}
    return obj


def _check_turns(max_turns: Any) -> int:
    if max_turns is None:
        return DEFAULT_MAX_TURNS
    if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
        raise ValueError(f"max_turns must be an int of at least 1, got {max_turns!r}")
    return max_turns


def _call(session: Any, name: str, args: Any, hook: OnToolCall) -> Result:
    res = session.call(name, args)
    if hook is not None:
        hook(name, args, res)
    return res


def run_anthropic(
    client: Any, session: Any, *, max_turns: Optional[int] = None, keep_session: bool = False,
    on_tool_call: OnToolCall = None, **params: Any,
) -> Tuple[Any, List[Dict[str, Any]]]:
    """The Messages API loop: ``client.messages.create(**params)`` until the
    model stops asking for tools. Returns the last message and the
    conversation (``params["messages"]`` plus every turn)."""
    turns = _check_turns(max_turns)
    if not isinstance(params.get("messages"), list):
        raise TypeError("messages must be a list of message dicts")
    params.setdefault("tools", anthropic_tools(session.tools()))
    conv = list(params.pop("messages"))
    last = None
    try:
        for _ in range(turns):
            msg = client.messages.create(messages=conv, **params)
            last = msg
            content = _get(msg, "content") or []
            conv.append({"role": "assistant", "content": [_plain(b) for b in content]})
            if _get(msg, "stop_reason") != "tool_use":
                return msg, conv
            blocks = []
            for b in content:
                if _get(b, "type") != "tool_use":
                    continue
                res = _call(session, _get(b, "name"), _plain(_get(b, "input")), on_tool_call)
                block: Dict[str, Any] = {"type": "tool_result", "tool_use_id": _get(b, "id"), "is_error": res.is_error}
                if res.images:  # run_code figures: image blocks in the tool_result
                    block["content"] = [{"type": "text", "text": res.text}] + [
                        {"type": "image", "source": {"type": "base64", "media_type": i.media_type, "data": i.data}} for i in res.images
                    ]
                elif res.text:
                    block["content"] = res.text
                blocks.append(block)
            conv.append({"role": "user", "content": blocks})
        raise MaxTurnsExceeded(f"the model still called tools after {turns} turns", last, conv)
    finally:
        if not keep_session:
            session.close()


def run_openai_chat(
    client: Any, session: Any, *, max_turns: Optional[int] = None, keep_session: bool = False,
    on_tool_call: OnToolCall = None, **params: Any,
) -> Tuple[Any, List[Dict[str, Any]]]:
    """The Chat Completions loop: ``client.chat.completions.create(**params)``
    until a message has no tool calls. Returns the last completion and the
    conversation."""
    turns = _check_turns(max_turns)
    if not isinstance(params.get("messages"), list):
        raise TypeError("messages must be a list of message dicts")
    params.setdefault("tools", openai_chat_tools(session.tools()))
    conv = list(params.pop("messages"))
    last = None
    try:
        for _ in range(turns):
            cc = client.chat.completions.create(messages=conv, **params)
            last = cc
            choices = _get(cc, "choices") or []
            if not choices:
                raise RuntimeError("the completion has no choices")
            msg = _get(choices[0], "message")
            conv.append(_plain(msg))
            calls = _get(msg, "tool_calls") or []
            if not calls:
                return cc, conv
            for tc in calls:
                fn = _get(tc, "function")
                if _get(tc, "type", "function") != "function" or fn is None:
                    text = "error: not a function tool call"
                else:
                    r = _call(session, _get(fn, "name"), _get(fn, "arguments") or "{}", on_tool_call)
                    text = image_note(r.text, r.images)  # chat tool messages are text only
                conv.append({"role": "tool", "tool_call_id": _get(tc, "id"), "content": text})
        raise MaxTurnsExceeded(f"the model still called tools after {turns} turns", last, conv)
    finally:
        if not keep_session:
            session.close()


def run_openai_responses(
    client: Any, session: Any, *, max_turns: Optional[int] = None, keep_session: bool = False,
    on_tool_call: OnToolCall = None, **params: Any,
) -> Any:
    """The Responses API loop: ``client.responses.create(**params)``, then
    each turn sends only the ``function_call_output`` items with
    ``previous_response_id`` (so responses must be stored: ``store=False``
    is refused). Returns the last response."""
    turns = _check_turns(max_turns)
    if params.get("store") is False:
        raise ValueError("run_openai_responses continues with previous_response_id, which needs stored responses (store must not be False)")
    params.setdefault("tools", openai_response_tools(session.tools()))
    last = None
    try:
        for turn in range(1, turns + 1):
            resp = client.responses.create(**params)
            last = resp
            calls = [it for it in (_get(resp, "output") or []) if _get(it, "type") == "function_call"]
            if not calls:
                return resp
            if turn == turns:
                break
            params["previous_response_id"] = _get(resp, "id")
            params["input"] = [
                {"type": "function_call_output", "call_id": _get(c, "call_id"),
                 "output": _output(_call(session, _get(c, "name"), _get(c, "arguments") or "{}", on_tool_call))}
                for c in calls
            ]
        raise MaxTurnsExceeded(f"the model still called functions after {turns} turns", last)
    finally:
        if not keep_session:
            session.close()




def _output(res: Any) -> Any:
    """A function_call_output's output: the text, or with images (run_code
    figures) input_text and input_image items."""
    if not getattr(res, "images", None):
        return res.text
    return [{"type": "input_text", "text": res.text}] + [
        {"type": "input_image", "image_url": f"data:{i.media_type};base64,{i.data}"} for i in res.images
    ]
