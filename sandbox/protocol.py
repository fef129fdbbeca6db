"""The worker protocol: length-prefixed JSON frames of plain data over pipes.

The same frames travel between potrun and a worker process on the host and between potrun and a worker
inside a container, so the worker program is the same in both backends. Nothing is ever pickled.

Requests (potrun -> worker)::

    {"op": "run", "id": 7, "source": "...", "policy": "restricted", "entry": "auto",
     "isolation": "warm", "limits": {"timeout_s": 5, "cpu_s": 5, "memory_mb": 2048, ...}}
    {"op": "exit"}

Replies (worker -> potrun)::

    {"op": "hello", "pid": 123, "isolation": {...what the worker could enforce...}}
    {"op": "result", "id": 7, "status": "ok", "value": 42, "value_type": "int", ...}
"""

from __future__ import annotations

import json
import struct
from typing import Any

PROTOCOL_VERSION = 1
_HEADER = struct.Struct(">I")
MAX_FRAME = 64 * 1024 * 1024  # a frame larger than this means a broken or hostile peer


class ProtocolError(Exception):
    """The byte stream is not a sequence of valid frames."""


def encode(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    return _HEADER.pack(len(body)) + body


def frame(body: bytes) -> bytes:
    return _HEADER.pack(len(body)) + body


class FrameReader:
    """Accumulates bytes as they arrive and yields complete frame bodies."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        buffer = self._buffer
        frames: list[bytes] = []
        start = 0
        while len(buffer) - start >= 4:
            (size,) = _HEADER.unpack_from(buffer, start)
            if size > MAX_FRAME:
                raise ProtocolError(f"frame of {size} bytes exceeds the {MAX_FRAME} limit")
            end = start + 4 + size
            if end > len(buffer):
                break
            frames.append(bytes(buffer[start + 4 : end]))
            start = end
        del buffer[:start]
        return frames

    @property
    def pending(self) -> int:
        return len(self._buffer)


def decode(body: bytes) -> dict[str, Any]:
    try:
        message = json.loads(body)
    except ValueError as exc:
        raise ProtocolError(f"invalid frame: {exc}") from None
    if not isinstance(message, dict):
        raise ProtocolError("a frame must hold a JSON object")
    return message
