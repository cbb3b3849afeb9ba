"""A small RFC 6455 WebSocket client codec for the terminal route.

Only what a client needs: the upgrade request and its check, masked frames
out, unmasked frames in (fragments joined, pings answered, close frames
recognised), with every message bounded. The sync (:mod:`socket`) and
asyncio callers supply the byte reads; this module does no I/O itself.
"""

from __future__ import annotations

import base64
import hashlib
import os
import struct
from typing import Awaitable, Callable, Dict, List, Optional, Tuple

from .errors import TransportError, error_from_body

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA

#: Longest message accepted from the daemon (it sends at most 32 KiB of output per message).
MAX_MESSAGE = 1 << 20
#: Longest upgrade answer (status line and headers, or an error body) read.
MAX_HANDSHAKE = 64 << 10
#: Keyboard input is sent in messages of at most this size (the daemon accepts 64 KiB).
INPUT_CHUNK = 32 << 10


def handshake(host: str, target: str, headers: Dict[str, str]) -> Tuple[bytes, str]:
    """The upgrade request for ``target`` and the Sec-WebSocket-Accept it expects."""
    key = base64.b64encode(os.urandom(16)).decode("ascii")
    lines = [
        f"GET {target} HTTP/1.1",
        f"Host: {host}",
        "Connection: Upgrade",
        "Upgrade: websocket",
        "Sec-WebSocket-Version: 13",
        f"Sec-WebSocket-Key: {key}",
    ]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    accept = base64.b64encode(hashlib.sha1(key.encode("ascii") + _GUID).digest()).decode("ascii")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"), accept


def check_answer(head: bytes, body: bytes, accept: str) -> None:
    """Raise the API error of a refused upgrade, or TransportError for a bad one."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    try:
        status = int(parts[1])
    except (IndexError, ValueError):
        raise TransportError(f"terminal: bad answer {lines[0]!r}") from None
    if status != 101:
        raise error_from_body(status, body)
    hdrs = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    if hdrs.get("sec-websocket-accept") != accept:
        raise TransportError("terminal: the daemon's WebSocket answer does not match the key")


def content_length(head: bytes) -> int:
    """The Content-Length of an answer head (0 when absent), bounded."""
    for line in head.decode("latin-1").split("\r\n")[1:]:
        k, _, v = line.partition(":")
        if k.strip().lower() == "content-length" and v.strip().isdigit():
            return min(int(v.strip()), MAX_HANDSHAKE)
    return 0


def frame(opcode: int, payload: bytes) -> bytes:
    """One final, masked frame."""
    n = len(payload)
    head = bytes([0x80 | opcode])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 1 << 16:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    mask = os.urandom(4)
    return head + mask + _xor(payload, mask)


def _xor(data: bytes, mask: bytes) -> bytes:
    if not data:
        return b""
    n = len(data)
    m = int.from_bytes((mask * (n // 4 + 1))[:n], "big")
    return (int.from_bytes(data, "big") ^ m).to_bytes(n, "big")


def close_frame(code: int = 1000, reason: str = "") -> bytes:
    return frame(OP_CLOSE, struct.pack("!H", code) + reason.encode("utf-8")[:120])


class Message:
    """One message: ``opcode`` OP_TEXT, OP_BINARY or OP_CLOSE (then ``code`` is set)."""

    __slots__ = ("opcode", "data", "code")

    def __init__(self, opcode: int, data: bytes, code: Optional[int] = None) -> None:
        self.opcode, self.data, self.code = opcode, data, code


def _header(b0: int, b1: int) -> Tuple[bool, int, int]:
    if b1 & 0x80:
        raise TransportError("terminal: the daemon sent a masked frame")
    if b0 & 0x70:
        raise TransportError("terminal: frame with reserved bits set")
    return bool(b0 & 0x80), b0 & 0x0F, b1 & 0x7F


def _length(n: int, ext: bytes) -> int:
    return struct.unpack("!H", ext)[0] if n == 126 else struct.unpack("!Q", ext)[0]


def _ext_len(n: int) -> int:
    return 2 if n == 126 else 8 if n == 127 else 0


def _control(opcode: int, payload: bytes, send_pong: List[bytes]) -> Optional[Message]:
    if opcode == OP_PING:
        send_pong.append(frame(OP_PONG, payload))
        return None
    if opcode == OP_PONG:
        return None
    code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
    return Message(OP_CLOSE, payload[2:], code)


def _check_len(n: int, so_far: int) -> None:
    if n + so_far > MAX_MESSAGE:
        raise TransportError(f"terminal: message larger than {MAX_MESSAGE} bytes")


def read_message(read: Callable[[int], bytes], send: Callable[[bytes], None]) -> Message:
    """The next data or close message, reading with ``read(n)`` (exactly n bytes)."""
    parts: List[bytes] = []
    first = -1
    while True:
        fin, opcode, n = _header(*read(2))
        if _ext_len(n):
            n = _length(n, read(_ext_len(n)))
        _check_len(n, sum(map(len, parts)))
        payload = read(n) if n else b""
        if opcode >= 0x8:
            pongs: List[bytes] = []
            m = _control(opcode, payload, pongs)
            for p in pongs:
                send(p)
            if m is not None:
                return m
            continue
        if first < 0:
            first = opcode
        parts.append(payload)
        if fin:
            return Message(first, b"".join(parts))


async def aread_message(read: Callable[[int], Awaitable[bytes]], send: Callable[[bytes], Awaitable[None]]) -> Message:
    """:func:`read_message` for asyncio readers."""
    parts: List[bytes] = []
    first = -1
    while True:
        fin, opcode, n = _header(*(await read(2)))
        if _ext_len(n):
            n = _length(n, await read(_ext_len(n)))
        _check_len(n, sum(map(len, parts)))
        payload = await read(n) if n else b""
        if opcode >= 0x8:
            pongs: List[bytes] = []
            m = _control(opcode, payload, pongs)
            for p in pongs:
                await send(p)
            if m is not None:
                return m
            continue
        if first < 0:
            first = opcode
        parts.append(payload)
        if fin:
            return Message(first, b"".join(parts))
