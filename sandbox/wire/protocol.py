"""The worker protocol: length-prefixed frames of plain data over pipes, with one typed schema.

The same frames travel between potrun and a worker process on the host and between potrun and a worker
inside a container, so the worker program is the same in both backends. Nothing is ever pickled.

A request is a `RunRequest`; its frame (potrun -> worker) starts with a fixed binary header
(`REQUEST_HEADER`, big-endian)::

    kind          B   EXIT, RUN_FORK (a fresh fork, whatever the program) or RUN_TIERED (the warm tier
                      where the verifier proves the program pure, a fork otherwise)
    wall_s        d   the program's wall-clock limit (the safety net: the CPU limit is the runner's)
    memory_mb     Q   } which warm runner may run it: a runner is kept only
    max_processes Q   } while these stay the same

followed by the request as JSON (`RunRequest.to_wire`)::

    {"id": 7, "source": "...", "policy": "restricted", "entry": "auto", "isolation": "warm",
     "limits": {"timeout_s": 5, "wall_timeout_s": 25, "memory_mb": 2048, ...}}

and, only where given, the program's standard input and the files written into its scratch directory
before it starts (`"stdin": "...", "files": [["data/in.txt", "<base64>"], ...]`).

The header repeats what the worker needs to schedule a program, so that it can stream a request to its
warm runner untouched, without decoding the JSON. An exit request is the header alone.

Replies (worker -> potrun) are JSON; potrun refuses a worker whose hello names another protocol::

    {"op": "hello", "pid": 123, "protocol": 4, "capabilities": {...what the worker could enforce...}}
    {"op": "result", "id": 7, "status": "ok", "value": 42, "value_type": "int", "isolation": "warm", ...}

A result is an `ExecResult` (`potrun.types`): the type a runner and a worker build, the wire carries
(`result_message`: its fields that differ from their defaults, under the request's id) and potrun
hands back. Its fields are the schema; `_FIELD_CHECKS` holds one check for each.

**Every byte from a sandbox is untrusted input.** A runner's answer is checked by the worker
(`check_result`, with `from_runner=True`: a runner may only claim the statuses a program can earn, and
its id is the worker's, not the runner's), and every result is checked again by potrun
(`result_from_wire`), field by field, with exact types and bounded sizes: a frame that fails is a
protocol violation of whoever sent it, never a value.
"""

from __future__ import annotations

import binascii
import dataclasses
import json
import math
import os
import struct
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from potrun.sandbox.wire.values import VALUE_TYPES
from potrun.types import Entry, ExecResult, Isolation, Limits, Status

PROTOCOL_VERSION = 4  # 4: the header's limit is the wall net; the CPU limit (timeout_s) decides
_HEADER = struct.Struct(">I")
MAX_FRAME = 64 * 1024 * 1024  # a frame larger than this means a broken or hostile peer

REQUEST_HEADER = struct.Struct(">BdQQ")
EXIT, RUN_FORK, RUN_TIERED = 0, 1, 2


def _unencodable(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not plain data")


# One encoder for every frame, made once: json.dumps builds one on each call, through Python code that
# a fresh fork pays for in page faults. The output is json.dumps's, with compact separators.
_MAKE_ENCODER = getattr(json.encoder, "c_make_encoder", None)  # None: a Python without the C accelerator
_ENCODE = (
    _MAKE_ENCODER(None, _unencodable, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True)
    if _MAKE_ENCODER is not None
    else None
)
_ENCODER = json.JSONEncoder(separators=(",", ":"), default=_unencodable)
_DECODER = json.JSONDecoder()


class ProtocolError(Exception):
    """The byte stream is not a sequence of valid frames, or a frame is not a valid message."""


class FrameTooLarge(ProtocolError):
    """A frame announces more bytes than its reader accepts."""


class RequestHeader(NamedTuple):
    kind: int
    wall_s: float
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


def write_all(fd: int, data: bytes) -> None:
    """Write all of `data` to a blocking descriptor (os.write may take less than it is given)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def encode_request(request: RunRequest, request_id: int | None = None) -> bytes:
    """The frame of a run request: its header, then the request as JSON (with `request_id` for its id,
    where given: the pool's index of the job)."""
    limits = request.limits
    kind = RUN_TIERED if request.isolation == _WARM else RUN_FORK
    header = REQUEST_HEADER.pack(kind, limits.wall_limit_s, limits.memory_mb, limits.max_processes)
    message = request.to_wire()
    if request_id is not None:
        message["id"] = request_id
    return frame(header + dumps(message))


def encode_exit() -> bytes:
    return frame(REQUEST_HEADER.pack(EXIT, 0.0, 0, 0))


def request_header(body: bytes) -> RequestHeader:
    try:
        return RequestHeader._make(REQUEST_HEADER.unpack_from(body))
    except struct.error as exc:
        raise ProtocolError(f"invalid request header: {exc}") from None


def request_message(body: bytes) -> RunRequest:
    """The request in a run request's frame body."""
    return RunRequest.from_wire(decode(body[REQUEST_HEADER.size :]))


class FrameReader:
    """Accumulates bytes as they arrive and yields complete frame bodies."""

    __slots__ = ("_buffer", "max_frame")

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self._buffer = bytearray()
        self.max_frame = max_frame

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        buffer = self._buffer
        frames: list[bytes] = []
        start = 0
        while len(buffer) - start >= 4:
            (size,) = _HEADER.unpack_from(buffer, start)
            if size > self.max_frame:
                raise FrameTooLarge(f"frame of {size} bytes exceeds the {self.max_frame} limit")
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
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError, JSONDecodeError, '[' * 10**6
        raise ProtocolError(f"invalid frame: {type(exc).__name__}") from None
    if end != len(text):
        raise ProtocolError("invalid frame: data after the JSON value")
    if not isinstance(message, dict):
        raise ProtocolError("a frame must hold a JSON object")
    return message


# -- the request --------------------------------------------------------------------------------------

ISOLATIONS = tuple(tier.value for tier in Isolation)  # warm: the warm tier where proven pure, a fork otherwise
_WARM = Isolation.WARM.value


# What a request may bring into its sandbox, stdin and files together: well inside the 64 MiB scratch
# tmpfs and a frame, so that staging them cannot fail for want of room.
INPUT_LIMIT = 16 * 1024 * 1024
MAX_FILES = 100


def check_file_name(name: object) -> str:
    """A file name a request may write into its scratch directory: a relative path that stays inside
    it (no absolute path, no `..`, no empty or `.` part, no NUL). Raises ValueError naming the fault."""
    if type(name) is not str or not name or len(name) > 255:
        raise ValueError(f"a file name must be a non-empty string of at most 255 characters: {str(name)[:80]!r}")
    if "\0" in name or name.startswith("/"):
        raise ValueError(f"file name {name[:80]!r} is absolute or holds a NUL")
    if any(part in ("", ".", "..") for part in name.split("/")):
        raise ValueError(f"file name {name[:80]!r} must not hold '..', '.' or an empty part")
    return name


def input_size(stdin: str | None, files: tuple[tuple[str, bytes], ...]) -> int:
    """The bytes a request brings in (checked against INPUT_LIMIT)."""
    return (len(stdin.encode()) if stdin is not None else 0) + sum(len(content) for _, content in files)


@dataclass(frozen=True, slots=True)
class RunRequest:
    """One program to run, as potrun sends it and the worker and its runner read it. `stdin`: what the
    program reads on its standard input (None: nothing, as /dev/null); `files`: (name, content) written
    into its scratch directory before it starts (fork tier: a program the warm tier runs is proven
    unable to read either)."""

    source: str
    policy: str = "restricted"
    entry: str = Entry.AUTO.value
    isolation: str = Isolation.WARM.value
    limits: Limits = field(default_factory=Limits)
    capture: bool = False  # also send back the numbers the program's variables held (checklists)
    id: int = -1  # given by the pool: the job's index in its stream
    stdin: str | None = None
    files: tuple[tuple[str, bytes], ...] = ()
    full_output: bool = False  # send back all of stdout and stderr (up to the output limit), not their tails

    def to_wire(self) -> dict[str, Any]:
        message: dict[str, Any] = {
            "id": self.id,
            "source": self.source,
            "policy": self.policy,
            "entry": self.entry,
            "isolation": self.isolation,
            "limits": self.limits.to_wire(),
        }
        if self.capture:
            message["capture"] = True
        if self.full_output:
            message["full_output"] = True
        if self.stdin is not None:
            message["stdin"] = self.stdin
        if self.files:
            message["files"] = [
                [name, binascii.b2a_base64(content, newline=False).decode()] for name, content in self.files
            ]
        return message

    @classmethod
    def from_wire(cls, message: dict[str, Any]) -> RunRequest:
        try:
            limits = message["limits"]
            request = cls(
                source=_exact(message["source"], str),
                policy=_exact(message["policy"], str),
                entry=_exact(message["entry"], str),
                isolation=_exact(message["isolation"], str),
                limits=Limits(
                    timeout_s=_number(limits["timeout_s"]),
                    wall_timeout_s=_number(limits["wall_timeout_s"]),
                    memory_mb=_exact(limits["memory_mb"], int),
                    output_bytes=_exact(limits["output_bytes"], int),
                    max_processes=_exact(limits["max_processes"], int),
                ),
                capture=message.get("capture", False) is True,
                full_output=message.get("full_output", False) is True,
                id=_exact(message["id"], int),
                stdin=None if message.get("stdin") is None else _exact(message["stdin"], str),
                files=_files_from_wire(message["files"]) if "files" in message else (),
            )
        except (KeyError, TypeError, ValueError) as exc:  # ValueError: a bad file name or base64
            raise ProtocolError(f"invalid request: {exc}") from None
        if request.isolation not in ISOLATIONS:
            raise ProtocolError(f"invalid request: isolation {request.isolation!r}")
        return request

    def key(self) -> str:
        """What makes two requests run the same way (the dedup cache's key): all but the id."""
        return dumps({**self.to_wire(), "id": None}).decode()


def _files_from_wire(files: Any) -> tuple[tuple[str, bytes], ...]:
    if type(files) is not list or len(files) > MAX_FILES:
        raise TypeError(f"files must be a list of at most {MAX_FILES} [name, base64] pairs")
    if any(type(pair) is not list or len(pair) != 2 for pair in files):
        raise TypeError("a file must be a [name, base64] pair")
    return tuple(
        (check_file_name(name), binascii.a2b_base64(_exact(data, str), strict_mode=True)) for name, data in files
    )


# -- the result ---------------------------------------------------------------------------------------

# What a runner may report: what a program can earn. Timeouts and crashes are the worker's observations,
# and sandbox_error is potrun's own failure: a runner that claims one breaks the protocol.
RUNNER_STATUSES = frozenset(
    status.value
    for status in (
        Status.OK,
        Status.NO_ANSWER,
        Status.SYNTAX_ERROR,
        Status.POLICY_VIOLATION,
        Status.ERROR,
        Status.MEMORY_LIMIT,
        Status.OUTPUT_LIMIT,
    )
)
STATUSES = {status.value: status for status in Status}
_STATUS_NAMES = {status: status.value for status in Status}  # (an enum's .value is a property: dear per result)
ENTRIES = frozenset(entry.value for entry in Entry if entry is not Entry.AUTO)  # the conventions that give a value
TIMEOUT_KINDS = frozenset({"wall", "cpu"})
TEXT_LIMIT = 500  # characters of an error message
TYPE_LIMIT = 100  # characters of an error type or a rule name (a class may be named with 30 MB)
STREAM_LIMIT = 1000  # characters of stdout's and stderr's tails
MAX_CAPTURED = 1000
MAX_DEPTH = 10  # of a list value


def check_result(message: dict[str, Any], *, request_id: int, from_runner: bool, output_bytes: int) -> dict[str, Any]:
    """A result message made safe to forward: every field of its exact type and bounded, the id the
    request's, unknown fields dropped. Raises ProtocolError for anything else. (Only the fields present
    are looked at, each by its own check: this runs in potrun for every result.)"""
    status = message.get("status")
    if type(status) is not str or status not in (RUNNER_STATUSES if from_runner else STATUSES):
        raise ProtocolError(
            f"status {str(status)[:TYPE_LIMIT]!r} is not one a {'runner' if from_runner else 'worker'} may report"
        )
    value = message.get("value")
    kind = type(value)
    if kind is str or kind is list:
        _check_value(value, 0, [output_bytes])
    elif value is None:
        if status == "ok":
            raise ProtocolError("an ok result without a value")
    elif kind not in _SCALARS:
        raise ProtocolError(f"a value of type {kind.__name__} is not plain data")
    checked: dict[str, Any] = {"op": "result", "id": request_id, "status": status}
    checked.update(_checked_fields(message, value, kind, max(STREAM_LIMIT, output_bytes)))
    if from_runner:
        for name in _WORKER_FIELDS:
            checked.pop(name, None)
    return checked


def _checked_fields(message: dict[str, Any], value: Any, kind: type, stream_limit: int) -> dict[str, Any]:
    """The fields besides status, by ExecResult's names: the value (already checked) and each other
    field present, by its own check. stdout and stderr are at most `stream_limit` characters: the
    program's output limit (a request with full_output has them whole), or the tails' length."""
    fields: dict[str, Any] = {"value": value, "value_type": VALUE_TYPES.get(kind)}
    for name, field_value in message.items():
        check = _FIELD_CHECKS.get(name)
        if check is not None and field_value is not None:
            try:
                fields[name] = _exact(field_value, str)[:stream_limit] if name in _STREAMS else check(field_value)
            except (TypeError, ProtocolError) as exc:
                raise ProtocolError(f"invalid {name}: {exc}") from None
    return fields


def _text(limit: int) -> Any:
    def check(value: Any) -> str:
        text: str = _exact(value, str)
        return text[:limit]

    return check


def _member(allowed: frozenset[str]) -> Any:
    def check(value: Any) -> str:
        if type(value) is not str or value not in allowed:
            raise ProtocolError(f"unexpected {str(value)[:TYPE_LIMIT]!r}")
        return value

    return check


def _duration(value: Any) -> float:
    seconds = _number(value)
    if not (math.isfinite(seconds) and seconds >= 0):
        raise ProtocolError("a time is not a duration")
    return seconds


def _megabytes(value: Any) -> float:
    size = _number(value)
    if not (math.isfinite(size) and size >= 0):
        raise ProtocolError("a size is not a number of megabytes")
    return float(size)


def _captured(value: Any) -> list[float]:
    if type(value) is not list or len(value) > MAX_CAPTURED or any(type(x) is not float for x in value):
        raise ProtocolError("captured must be a list of floats")
    return value


def _exit_status(value: int) -> int:
    if not 0 <= value <= 255:
        raise ProtocolError("an exit status is 0-255")
    return value


_SCALARS = frozenset({bool, int, float})
_STREAMS = frozenset({"stdout", "stderr"})
_FIELD_CHECKS: dict[str, Any] = {
    "entry": _member(ENTRIES),
    "error_type": _text(TYPE_LIMIT),
    "error": _text(TEXT_LIMIT),
    "stdout": _text(STREAM_LIMIT),
    "stderr": _text(STREAM_LIMIT),
    "line": lambda value: _exact(value, int),
    "timeout_kind": _member(TIMEOUT_KINDS),
    "wall_s": _duration,
    "cpu_s": _duration,
    "isolation": _member(frozenset(ISOLATIONS)),
    "captured": _captured,
    "peak_rss_mb": _megabytes,
    "exit_code": lambda value: _exit_status(_exact(value, int)),
}
# Fields only a worker measures (from outside the runner): a runner's own claim of them is dropped.
_WORKER_FIELDS = frozenset({"peak_rss_mb"})
# Each ExecResult field but status and attempts, with its default: what `result_message` may leave out.
_WIRE_DEFAULTS = tuple(
    (f.name, f.default) for f in dataclasses.fields(ExecResult) if f.name not in ("status", "attempts")
)


def result_from_wire(message: dict[str, Any], *, request_id: int, output_bytes: int, attempts: int = 1) -> ExecResult:
    """The ExecResult in a worker's answer, checked (`check_result`): only plain data arrives here."""
    if message.get("id") != request_id or type(message.get("id")) is not int:
        raise ProtocolError(f"an answer for {str(message.get('id'))[:20]} where {request_id} was due")
    checked = check_result(message, request_id=request_id, from_runner=False, output_bytes=output_bytes)
    return checked_result(checked, attempts)


def checked_result(checked: dict[str, Any], attempts: int = 1) -> ExecResult:
    """The ExecResult of a message that `check_result` returned (the message is taken over: its
    envelope is removed in place, on this hot path, rather than copied)."""
    status = STATUSES[checked.pop("status")]
    del checked["op"], checked["id"]
    captured = checked.get("captured")
    if captured is not None:
        checked["captured"] = tuple(captured)
    return ExecResult(status, attempts=attempts, **checked)


def result_message(request_id: int, result: ExecResult) -> dict[str, Any]:
    """A result as the wire carries it, under the request's id: the fields that differ from their
    defaults (which the reader fills in again). `attempts` stays behind: the pool counts them."""
    message: dict[str, Any] = {"op": "result", "id": request_id, "status": _STATUS_NAMES[result.status]}
    for name, default in _WIRE_DEFAULTS:
        value = getattr(result, name)
        if value is not default and value != default:
            message[name] = value
    return message


def measured_message(
    request_id: int, result: ExecResult, *, isolation: str, wall_s: float, cpu_s: float, stdout: str, stderr: str
) -> dict[str, Any]:
    """`result_message` of a runner's result with what the runner measured once it was made (its tier,
    times and output tails), without making the result again: the warm tier's hot path, where copying
    a frozen dataclass would cost more than the rest of the answer."""
    message = result_message(request_id, result)
    message.update(isolation=isolation, wall_s=wall_s, cpu_s=cpu_s)
    if stdout:
        message["stdout"] = stdout
    if stderr:
        message["stderr"] = stderr
    return message


def encode_result(request_id: int, result: ExecResult) -> bytes:
    return encode(result_message(request_id, result))


def _exact(value: Any, kind: type) -> Any:
    if type(value) is not kind:
        raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
    return value


def _number(value: Any) -> float:
    if type(value) is not float and type(value) is not int:
        raise TypeError(f"expected a number, got {type(value).__name__}")
    return float(value)


def _check_value(value: Any, depth: int, budget: list[int]) -> None:
    """Plain data only (None, bool, int, float, str, lists of these), within `budget` characters."""
    kind = type(value)
    if kind is str:
        budget[0] -= len(value)
    elif kind is list:
        if depth >= MAX_DEPTH:
            raise ProtocolError("a list value nested too deeply")
        budget[0] -= len(value)
        for item in value:
            _check_value(item, depth + 1, budget)
    elif kind is int:
        budget[0] -= 8 if -(1 << 62) < value < (1 << 62) else value.bit_length() // 3
    elif not (value is None or kind is bool or kind is float):
        raise ProtocolError(f"a value of type {kind.__name__} is not plain data")
    else:
        budget[0] -= 8
    if budget[0] < 0:
        raise ProtocolError("a value larger than the output limit")
