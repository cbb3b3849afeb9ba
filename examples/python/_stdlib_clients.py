"""Stand-ins for the official ``anthropic`` and ``openai`` clients, in the
standard library, for machines without those packages (this repository's
tests run offline against a fake model API).

They speak the real wire formats and have the shape the examples use:
``Anthropic().messages.create(**params)``,
``OpenAI().chat.completions.create(**params)`` and
``OpenAI().responses.create(**params)``, answers with attribute access and
``model_dump()``. With the official packages installed the examples use
those instead; nothing else changes.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from typing import Any, Dict, Optional


class Obj:
    """A JSON object with attribute access, like the SDKs' models."""

    def __init__(self, d: Dict[str, Any]) -> None:
        self._d = d

    def __getattr__(self, k: str) -> Any:
        try:
            return wrap(self._d[k])
        except KeyError:
            return None

    def model_dump(self, exclude_none: bool = False) -> Dict[str, Any]:
        return {k: v for k, v in self._d.items() if not (exclude_none and v is None)}


def wrap(v: Any) -> Any:
    if isinstance(v, dict):
        return Obj(v)
    if isinstance(v, list):
        return [wrap(x) for x in v]
    return v


class APIError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"model API error {status}: {body}")
        self.status = status


def _post(url: str, headers: Dict[str, str], body: Dict[str, Any]) -> Obj:
    data = json.dumps(body).encode()
    for attempt in range(4):
        req = urllib.request.Request(url, data=data, headers=dict(headers, **{"content-type": "application/json"}), method="POST")
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                return Obj(json.load(r))
        except urllib.error.HTTPError as e:
            detail = e.read().decode("utf-8", "replace")
            if e.code in (429, 500, 502, 503, 529) and attempt < 3:
                time.sleep(2**attempt)
                continue
            raise APIError(e.code, detail) from None
    raise AssertionError("unreachable")


def _plain(v: Any) -> Any:
    if isinstance(v, Obj):
        return v.model_dump()
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


class _Messages:
    def __init__(self, c: "Anthropic") -> None:
        self._c = c

    def create(self, **params: Any) -> Obj:
        return _post(self._c.base_url + "/v1/messages", {"x-api-key": self._c.api_key, "anthropic-version": "2023-06-01"}, _plain(params))


class Anthropic:
    """``anthropic.Anthropic()``: reads ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL."""

    def __init__(self, api_key: Optional[str] = None, base_url: Optional[str] = None) -> None:
        self.api_key = api_key or os.environ.get("ANTHROPIC_API_KEY", "")
        self.base_url = (base_url or os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com").rstrip("/")
        self.messages = _Messages(self)


class _Completions:
    def __init__(self, c: "OpenAI") -> None:
        self._c = c

    def create(self, **params: Any) -> Obj:
        return _post(self._c.base_url + "/chat/completions", self._c.headers(), _plain(params))


class _Chat:
    def __init__(self, c: "OpenAI") -> None:
        self.completions = _Completions(c)


class _Responses:
    def __init__(self, c: "OpenAI") -> None:
        self._c = c

    def create(self, **params: Any) -> Obj:
        return _post(self._c.base_url + "/responses", self._c.headers(), _plain(params))


class OpenAI:
    """``openai.OpenAI()``: reads OPENAI_API_KEY and OPENAI_BASE_URL."""

    def __init__(self, api_key: Optional[str] = None, base_url: Optional[str] = None) -> None:
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY", "")
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
        self.chat = _Chat(self)
        self.responses = _Responses(self)

    def headers(self) -> Dict[str, str]:
        return {"authorization": "Bearer " + self.api_key}
