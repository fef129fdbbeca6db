"""The worker protocol: length-prefixed frames of plain data over pipes.

The same frames travel between potrun and a worker process on the host and between potrun and a worker
inside a container, so the worker program is the same in both backends. Nothing is ever pickled.

Requests (potrun -> worker) start with a fixed binary header (`REQUEST_HEADER`, big-endian)::

    kind          B   EXIT, RUN_FORK or RUN_WARM (warm: restricted policy in warm isolation)
    timeout_s     d   the program's wall-clock limit
    memory_mb     Q   } which warm runner may run it: a runner is kept only
    max_processes Q   } while these stay the same

A run request's header is followed by the whole request as JSON::

    {"op": "run", "id": 7, "source": "...", "policy": "restricted", "entry": "auto",
     "isolation": "warm", "limits": {"timeout_s": 5, "cpu_s": 5, "memory_mb": 2048, ...}}

The header repeats what the worker needs to schedule a program, so that it can stream a warm request to
its runner untouched, without decoding the JSON: only the runner (and the worker, for a fork or a
verdict of its own) reads it. `encode_request` builds both from the one message, so they agree. An exit
request is the header alone.

Replies (worker -> potrun) are JSON; potrun refuses a worker whose hello names another protocol::

    {"op": "hello", "pid": 123, "protocol": 2, "capabilities": {...what the worker could enforce...}}
    {"op": "result", "id": 7, "status": "ok", "value": 42, "value_type": "int", ...}

Inside the worker, a warm runner gets the request bodies as they came, and answers the worker with the
result's JSON behind a small binary prefix of its own (`worker.AnswerPipe`).
"""

from __future__ import annotations

import json
import struct
from typing import Any, NamedTuple

PROTOCOL_VERSION = 2
_HEADER = struct.Struct(">I")
MAX_FRAME = 64 * 1024 * 1024  # a frame larger than this means a broken or hostile peer

REQUEST_HEADER = struct.Struct(">BdQQ")
EXIT, RUN_FORK, RUN_WARM = 0, 1, 2


def _unencodable(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not plain data")


# One encoder for every frame, made once: json.dumps builds one on each call, through Python code that
# a fresh fork pays for in page faults. The output is json.dumps's, with compact separators.
_ENCODE = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
    None, _unencodable, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True
) if json.encoder.c_make_encoder is not None else None  # type: ignore[attr-defined]
_ENCODER = json.JSONEncoder(separators=(",", ":"), default=_unencodable)
_DECODER = json.JSONDecoder()


class ProtocolError(Exception):
    """The byte stream is not a sequence of valid frames."""


class RequestHeader(NamedTuple):
    kind: int
    timeout_s: float
    memory_mb: int
    max_processes: int


def dumps(message: dict[str, Any]) -> bytes:
    """A message as compact JSON."""
    if _ENCODE is None:  # a Python without the C accelerator
        return _ENCODER.encode(message).encode()
    return "".join(_ENCODE(message, 0)).encode()


def encode(message: dict[str, Any]) -> bytes:
    return frame(dumps(message))


def frame(body: bytes) -> bytes:
    return _HEADER.pack(len(body)) + body


def encode_request(message: dict[str, Any]) -> bytes:
    """The frame of a run request: its header, then the message as JSON."""
    limits = message["limits"]
    warm = message.get("policy") == "restricted" and message.get("isolation", "warm") == "warm"
    header = REQUEST_HEADER.pack(RUN_WARM if warm else RUN_FORK, limits["timeout_s"], limits["memory_mb"],
                                 limits["max_processes"])  # fmt: skip
    return frame(header + dumps(message))


def encode_exit() -> bytes:
    return frame(REQUEST_HEADER.pack(EXIT, 0.0, 0, 0))


def request_header(body: bytes) -> RequestHeader:
    try:
        return RequestHeader._make(REQUEST_HEADER.unpack_from(body))
    except struct.error as exc:
        raise ProtocolError(f"invalid request header: {exc}") from None


def request_message(body: bytes) -> dict[str, Any]:
    """The JSON part of a run request's frame body."""
    return decode(body[REQUEST_HEADER.size :])


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
    # The decoder itself, not json.loads: a frame is UTF-8 JSON with no surrounding whitespace, so the
    # encoding detection and whitespace matching of json.loads would only cost time.
    try:
        text = body.decode()
        message, end = _DECODER.raw_decode(text)
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError included
        raise ProtocolError(f"invalid frame: {exc}") from None
    if end != len(text):
        raise ProtocolError("invalid frame: data after the JSON value")
    if not isinstance(message, dict):
        raise ProtocolError("a frame must hold a JSON object")
    return message
