"""Test support: the SDK on sys.path and a real paddockd per test module.

The daemon is ``$PADDOCK_BIN/paddockd`` (default: the repository's ``bin/``),
started with a temporary ``--state-dir``, a free port and two API keys made
with ``paddockd keys create``. It needs root; without root the modules that
use it are skipped. ``stop`` deletes every sandbox left, sends SIGTERM and
removes the state directory.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request
from typing import List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
SDK_DIR = os.path.dirname(HERE)
SRC_DIR = os.path.join(SDK_DIR, "src")
REPO_DIR = os.path.dirname(os.path.dirname(SDK_DIR))
EXAMPLES_DIR = os.path.join(REPO_DIR, "examples", "python")

if SRC_DIR not in sys.path:
    sys.path.insert(0, SRC_DIR)

import paddock  # noqa: E402


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bin_dir() -> str:
    return os.environ.get("PADDOCK_BIN") or os.path.join(REPO_DIR, "bin")


def _mounts_under(path: str) -> List[str]:
    real = os.path.realpath(path)
    out = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                mnt = line.split()[4]
                if mnt == real or mnt.startswith(real + "/"):
                    out.append(mnt)
    except OSError:
        pass
    return out


class Daemon:
    """One paddockd for the tests."""

    def __init__(self, extra_args: Sequence[str] = (), key_names: Sequence[str] = ("alice", "bob")) -> None:
        self.extra_args = list(extra_args)
        self.key_names = list(key_names)
        self.keys: List[str] = []
        self.url = ""
        self.state_dir = ""
        self.proc: Optional[subprocess.Popen] = None
        self.log_path = ""

    def start(self) -> "Daemon":
        paddockd = os.path.join(bin_dir(), "paddockd")
        if not os.path.isfile(paddockd):
            raise RuntimeError(f"{paddockd} not found: run `make build` or set PADDOCK_BIN")
        if os.geteuid() != 0:
            raise unittest.SkipTest("paddockd needs root")
        self.state_dir = tempfile.mkdtemp(prefix="paddock-py-")
        for name in self.key_names:
            out = subprocess.run(
                [paddockd, "keys", "create", "--state-dir", self.state_dir, "--name", name],
                check=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            self.keys.append(out.stdout.decode().strip())
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        fd, self.log_path = tempfile.mkstemp(prefix="paddockd-", suffix=".log")
        with os.fdopen(fd, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    paddockd,
                    "serve",
                    "--state-dir",
                    self.state_dir,
                    "--listen",
                    f"127.0.0.1:{port}",
                    "--runtime",
                    os.environ.get("PADDOCK_TEST_RUNTIME", "runc"),
                    "--log-level",
                    "debug",
                    *self.extra_args,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(self.url + "/v1/health", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.05)
        tail = self.log_tail()
        self.stop()
        raise RuntimeError(f"paddockd did not become healthy:\n{tail}")

    def client(self, i: int = 0, **kwargs) -> paddock.Client:
        return paddock.Client(self.url, self.keys[i], **kwargs)

    def log_tail(self, n: int = 4000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                data = f.read()
        except OSError:
            return ""
        return data[-n:].decode("utf-8", "replace")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            for key in self.keys:
                try:
                    for sbx in paddock.Client(self.url, key).list():
                        sbx.kill()
                except paddock.PaddockError as e:
                    print(f"cleanup: {e}", file=sys.stderr)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.state_dir:
            left = _mounts_under(self.state_dir)
            if left:
                print(f"not removing {self.state_dir}: still mounted: {left}", file=sys.stderr)
            else:
                shutil.rmtree(self.state_dir, ignore_errors=True)
        if self.log_path:
            try:
                os.remove(self.log_path)
            except OSError:
                pass
