"""The file system of a sandbox (``sbx.files``)."""

from __future__ import annotations

import os
from typing import IO, TYPE_CHECKING, List, Optional, Union

from . import _check
from ._exec import _mode
from ._http import path_of, query_pairs
from .errors import NotFound
from .types import FileEntry

if TYPE_CHECKING:  # pragma: no cover
    from .sandbox import Sandbox
    from .terminal import FileWatch

__all__ = ["Files"]


class Files:
    """The file system of a sandbox: ``sbx.files``.

    Paths are absolute or relative to ``/workspace``; every operation runs
    inside the sandbox's own mount namespace.
    """

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sbx = sandbox

    def _path(self, *segments: str) -> str:
        return path_of("sandboxes", self._sbx.id, "files", *segments)

    def watch(self, path: str, recursive: bool = False) -> "FileWatch":
        """Watch directory ``path`` for changes: iterate over the returned :class:`FileWatch` (see ``terminal``)."""
        from .terminal import watch_files

        return watch_files(self._sbx.client, self._sbx.id, path, recursive)

    def write(self, path: str, data: Union[bytes, bytearray, memoryview, str, IO[bytes]], mode: Union[int, str, None] = None) -> FileEntry:
        """Create or replace the file at ``path`` (parents are created).

        ``data`` is bytes, text (encoded as UTF-8) or a binary file object;
        ``mode`` is the permission bits (``0o755`` or ``"0755"``, default 0644).
        """
        if isinstance(data, str):
            body = data.encode("utf-8")
        elif isinstance(data, (bytes, bytearray, memoryview)):
            body = bytes(data)
        elif hasattr(data, "read"):
            body = data.read()
            if isinstance(body, str):
                body = body.encode("utf-8")
        else:
            raise TypeError(f"data must be bytes, str or a binary file, not {type(data).__name__}")
        c = self._sbx.client
        q = query_pairs([("path", _check.string("path", path)), ("mode", _mode(mode))])
        resp = c._t.send("PUT", self._path(), query=q, body=body, content_type="application/octet-stream", timeout=c.timeout)
        return FileEntry.from_json(resp.json())

    def read(self, path: str) -> bytes:
        """The content of the file at ``path``."""
        c = self._sbx.client
        q = [("path", _check.string("path", path))]
        return c._t.send("GET", self._path(), query=q, accept="application/octet-stream", timeout=c.timeout).read()

    def read_text(self, path: str, encoding: str = "utf-8", errors: str = "strict") -> str:
        """The content of the file at ``path``, decoded."""
        return self.read(path).decode(encoding, errors)

    def list(self, path: Optional[str] = None, depth: Optional[int] = None) -> List[FileEntry]:
        """The entries under the directory ``path`` (default ``/workspace``),
        ``depth`` levels down (default 1). Symlinks are listed, not followed."""
        # Sent explicitly: the daemon documents /workspace as the default but
        # answers 400 "path is required" without it.
        q = query_pairs([("path", _check.string("path", path) if path else "/workspace"), ("depth", _check.integer("depth", depth, minimum=1, maximum=20))])
        d = self._sbx.client._call("GET", self._path("list"), query=q) or {}
        return [FileEntry.from_json(e) for e in d.get("entries") or []]

    def stat(self, path: str) -> FileEntry:
        """Describe ``path``; raises :class:`NotFound` if it does not exist."""
        d = self._sbx.client._call("GET", self._path("stat"), query=[("path", _check.string("path", path))])
        return FileEntry.from_json(d)

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists (a dangling symlink counts)."""
        try:
            self.stat(path)
        except NotFound:
            return False
        return True

    def remove(self, path: str, recursive: bool = False) -> None:
        """Delete a file or an empty directory; ``recursive`` deletes a directory's contents too."""
        q = query_pairs([("path", _check.string("path", path)), ("recursive", True if recursive else None)])
        self._sbx.client._call("DELETE", self._path(), query=q)

    def mkdir(self, path: str, mode: Union[int, str, None] = None) -> FileEntry:
        """Create the directory ``path`` and any missing parents (default mode 0755)."""
        q = query_pairs([("path", _check.string("path", path)), ("mode", _mode(mode))])
        return FileEntry.from_json(self._sbx.client._call("POST", self._path("mkdir"), query=q))


    def upload_dir(self, local_dir: str, remote_dir: str) -> List[FileEntry]:
        """Copy the local directory tree ``local_dir`` to ``remote_dir`` in the
        sandbox, file by file, keeping permission bits; returns what was written.
        Symlinks are skipped."""
        src = _check.string("local_dir", local_dir)
        dst = _check.string("remote_dir", remote_dir).rstrip("/") or "/"
        if not os.path.isdir(src):
            raise ValueError(f"local_dir {src!r} is not a directory")
        out = [self.mkdir(dst)]
        for root, dirs, names in os.walk(src):
            rel = os.path.relpath(root, src)
            base = dst if rel == "." else dst + "/" + rel.replace(os.sep, "/")
            for d in sorted(dirs):
                if not os.path.islink(os.path.join(root, d)):
                    out.append(self.mkdir(base + "/" + d))
            for n in sorted(names):
                full = os.path.join(root, n)
                if os.path.islink(full) or not os.path.isfile(full):
                    continue
                with open(full, "rb") as f:
                    out.append(self.write(base + "/" + n, f, mode=os.stat(full).st_mode & 0o777))
        return out

    def download_dir(self, remote_dir: str, local_dir: str) -> List[str]:
        """Copy the directory tree ``remote_dir`` of the sandbox into
        ``local_dir`` (created if missing); returns the local paths of the
        files written. Symlinks and special files are skipped, and no entry
        may leave ``local_dir``."""
        src = _check.string("remote_dir", remote_dir).rstrip("/") or "/"
        dst = os.path.abspath(_check.string("local_dir", local_dir))
        os.makedirs(dst, exist_ok=True)
        written = []
        for e in self.list(src, depth=20):
            rel = e.path[len(src):].lstrip("/") if e.path.startswith(src + "/") or src == "/" else ""
            if not rel:
                continue
            target = os.path.abspath(os.path.join(dst, *rel.split("/")))
            if not target.startswith(dst + os.sep):
                raise ValueError(f"sandbox path {e.path!r} leaves {dst!r}")
            if e.is_dir:
                os.makedirs(target, exist_ok=True)
            elif e.is_file:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "wb") as f:
                    f.write(self.read(e.path))
                try:
                    os.chmod(target, int(e.mode or "644", 8) & 0o777)
                except ValueError:
                    pass
                written.append(target)
        return written
