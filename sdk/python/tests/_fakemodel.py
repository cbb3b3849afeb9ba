"""The fake model API for the tests: the Go ``paddock-fakemodel`` binary.

One fake serves the Go, Python and TypeScript suites (internal/fakemodel):
it speaks the Anthropic Messages, OpenAI Chat Completions and Responses wire
formats, validates requests like the real APIs, and plays the scripted model
of the examples (fakemodel.Examples): buggy code first, the fix once the
failure comes back, then an answer made of what the sandbox printed.

The binary is ``$PADDOCK_FAKEMODEL_BIN`` (default: the repository's
``bin/paddock-fakemodel``, built by ``make build``).
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from typing import Any, Dict, List, Optional

from _support import REPO_DIR

API_KEY = "test-model-key"


def fakemodel_bin() -> str:
    return os.environ.get("PADDOCK_FAKEMODEL_BIN") or os.path.join(REPO_DIR, "bin", "paddock-fakemodel")


class FakeModel:
    """A running ``paddock-fakemodel`` that accepts only ``API_KEY``."""

    def __init__(self) -> None:
        self.proc: Optional[subprocess.Popen] = None
        self.url = ""

    @property
    def anthropic_url(self) -> str:
        return self.url

    @property
    def openai_url(self) -> str:
        return self.url + "/v1"

    def start(self) -> "FakeModel":
        path = fakemodel_bin()
        if not os.path.isfile(path):
            raise RuntimeError(f"{path} not found: run `make build` or set PADDOCK_FAKEMODEL_BIN")
        self.proc = subprocess.Popen([path, "-api-key", API_KEY], stdout=subprocess.PIPE)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode().strip()
        if not line.startswith("http://"):
            self.stop()
            raise RuntimeError(f"paddock-fakemodel printed {line!r}, not its URL")
        self.url = line
        return self

    def requests(self) -> List[Dict[str, Any]]:
        """Every request so far: api, path, status, error, stream and body."""
        with urllib.request.urlopen(self.url + "/fake/requests", timeout=10) as r:
            return json.load(r)

    def errors(self) -> List[str]:
        """The requests the fake refused, as "path: message"."""
        return [f"{r['path']}: {r.get('error', '')}" for r in self.requests() if r["status"] != 200]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
