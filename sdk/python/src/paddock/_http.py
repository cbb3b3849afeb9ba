"""The HTTP transport: http.client from the standard library, one connection per call."""

from __future__ import annotations

import http.client
import json
import select
import socket
import urllib.parse
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from .errors import MAX_ERROR_BODY, PaddockError, RequestTimeout, TransportError, error_from_body

Query = Optional[Sequence[Tuple[str, str]]]
Body = Union[bytes, bytearray, memoryview, None]

NDJSON = "application/x-ndjson"


def path_of(*segments: str) -> str:
    """``/a/b/c`` with every segment percent-escaped (ids are opaque)."""
    return "".join("/" + urllib.parse.quote(str(s), safe="") for s in segments)


def _is_timeout(exc: BaseException) -> bool:
    # socket.timeout is TimeoutError from Python 3.10 on, an OSError before.
    return isinstance(exc, (socket.timeout, TimeoutError))


class Response:
    """A 2xx answer whose body has not been read yet."""

    def __init__(self, raw: Any, method: str, url: str) -> None:
        self._raw = raw
        self.status: int = raw.status
        self.content_type: str = (raw.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        self._what = f"{method} {url}"

    def read(self) -> bytes:
        try:
            return self._raw.read()
        except Exception as e:  # noqa: BLE001 - every read failure is a transport failure
            raise _transport_error(e, f"reading the answer of {self._what}") from e
        finally:
            self.close()

    def readline(self) -> bytes:
        try:
            return self._raw.readline()
        except Exception as e:  # noqa: BLE001
            self.close()
            raise _transport_error(e, f"reading the stream of {self._what}") from e

    def json(self) -> Any:
        body = self.read()
        if not body.strip():
            return None
        try:
            return json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise TransportError(f"decoding the answer of {self._what}: {e}") from e

    def close(self) -> None:
        try:
            self._raw.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass


def _transport_error(exc: BaseException, what: str) -> TransportError:
    if isinstance(exc, PaddockError):
        return exc  # type: ignore[return-value]
    reason = getattr(exc, "reason", None)
    if _is_timeout(exc) or (reason is not None and _is_timeout(reason)):
        return RequestTimeout(f"{what}: timed out")
    detail = reason if reason is not None else exc
    return TransportError(f"{what}: {detail}")


class Transport:
    """Sends requests to ``<base_url>/v1`` with the bearer key.

    It speaks HTTP/1.1 through :mod:`http.client`, one connection per call,
    and sends bodies in chunks while watching for an early answer: a daemon
    that refuses an upload (413) answers before reading it and then resets
    the connection, and that answer must not be lost. Proxy environment
    variables are not used; the daemon is reached directly.
    """

    def __init__(self, base_url: str, api_key: str, user_agent: str) -> None:
        self.base_url = base_url
        self.api_key = api_key
        self.user_agent = user_agent
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"paddock: bad daemon URL {base_url!r}")
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = u.port
        self._prefix = u.path.rstrip("/")

    def url(self, path: str, query: Query = None) -> str:
        u = self.base_url + "/v1" + path
        if query:
            u += "?" + urllib.parse.urlencode(list(query))
        return u

    def _connection(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        if self._https:
            import ssl

            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=ssl.create_default_context())
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def send(
        self,
        method: str,
        path: str,
        *,
        query: Query = None,
        body: Body = None,
        content_type: Optional[str] = None,
        accept: str = "application/json",
        timeout: Optional[float] = None,
        root: bool = False,
        headers: Optional[Mapping[str, str]] = None,
    ) -> Response:
        """Send a request; a non-2xx answer raises the matching PaddockError.

        ``timeout`` bounds connecting and every single read or write (None:
        no bound); ``root`` sends ``path`` outside ``/v1`` (``/metrics``).
        """
        api = "" if root else "/v1"
        url = self.base_url + api + path + ("?" + urllib.parse.urlencode(list(query)) if query else "")
        target = self._prefix + api + path
        if query:
            target += "?" + urllib.parse.urlencode(list(query))
        data = bytes(body) if body is not None else b""
        conn = self._connection(timeout)
        write_error: Optional[BaseException] = None
        try:
            conn.putrequest(method, target, skip_accept_encoding=True)
            conn.putheader("Accept", accept)
            conn.putheader("User-Agent", self.user_agent)
            conn.putheader("Connection", "close")
            if self.api_key:
                conn.putheader("Authorization", "Bearer " + self.api_key)
            if content_type:
                conn.putheader("Content-Type", content_type)
            for k, v in (headers or {}).items():
                conn.putheader(k, v)
            if data or method in ("POST", "PUT", "PATCH"):
                conn.putheader("Content-Length", str(len(data)))
            conn.endheaders()
            if data:
                write_error = _send_body(conn, data)
            raw = conn.getresponse()
        except Exception as e:  # noqa: BLE001 - socket, ssl and http.client errors
            conn.close()
            if write_error is not None:
                raise TransportError(
                    f"{method} {url}: the connection broke while sending the body ({write_error}); "
                    "the daemon may have refused it"
                ) from e
            raise _transport_error(e, f"{method} {url}") from e
        if not 200 <= raw.status <= 299:
            try:
                err_body = raw.read(MAX_ERROR_BODY)
            except Exception:  # noqa: BLE001
                err_body = b""
            finally:
                raw.close()
                conn.close()
            raise error_from_body(raw.status, err_body)
        # With "Connection: close" the response owns the socket from here on.
        return Response(raw, method, url)

    def call(
        self,
        method: str,
        path: str,
        *,
        query: Query = None,
        json_body: Any = None,
        timeout: Optional[float] = None,
        headers: Optional[Mapping[str, str]] = None,
    ) -> Any:
        """Send ``json_body`` (when not None) as JSON and return the decoded answer (None when empty)."""
        body = None
        ctype = None
        if json_body is not None:
            body = json.dumps(json_body).encode("utf-8")
            ctype = "application/json"
        return self.send(method, path, query=query, body=body, content_type=ctype, timeout=timeout, headers=headers).json()


# Bodies are sent in chunks of this size, checking for an early answer in between.
_CHUNK = 64 << 10


def _send_body(conn: http.client.HTTPConnection, data: bytes) -> Optional[BaseException]:
    """Send ``data``, stopping early if the server has already answered.

    Returns the write error when the connection broke (the server's answer,
    if any, may still be readable), or None.
    """
    sock = conn.sock
    view = memoryview(data)
    for off in range(0, len(view), _CHUNK):
        if off and _readable(sock):
            return None  # an answer before the whole body: let getresponse read it
        try:
            sock.sendall(view[off : off + _CHUNK])
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError) as e:
            return e
    return None


def _readable(sock: Any) -> bool:
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return False


def query_pairs(items: Iterable[Tuple[str, Any]]) -> List[Tuple[str, str]]:
    """Drop the None values and stringify the others (booleans as true/false)."""
    out = []
    for k, v in items:
        if v is None:
            continue
        if isinstance(v, bool):
            v = "true" if v else "false"
        out.append((k, str(v)))
    return out
