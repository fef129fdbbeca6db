"""Reading input records: JSON Lines or a JSON array, streamed, never loaded whole.

Each record comes with its line number (for a JSON array, the line where the element starts), so
every message about a bad record can say where it is. A line that is not valid JSON, or not an object,
is yielded as a `BadRecord` in its place: the caller decides whether that is fatal (`--strict`).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from potrun.types import BadRecord, InputError

CHUNK = 1 << 16
_decoder = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class Record:
    line: int
    data: dict[str, Any]


def read_records(path: str | Path) -> Iterator[Record | BadRecord]:
    """Records of a .jsonl file (or a .json array, detected by its first character)."""
    try:
        raw = open(path, "rb")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    with raw:
        # Peek, not read: the input may be a pipe, which cannot seek back.
        is_array = raw.peek(256)[:256].lstrip()[:1] == b"["
        handle = io.TextIOWrapper(raw, encoding="utf-8")
        yield from (_read_array(handle) if is_array else _read_lines(handle))


def count_records(path: str | Path) -> int | None:
    """Lines of a JSON Lines file (for the progress bar); None for a JSON array."""
    try:
        with open(path, "rb") as handle:
            if handle.read(64).lstrip()[:1] == b"[":
                return None
            handle.seek(0)
            count, last = 0, b"\n"
            while chunk := handle.read(1 << 20):
                count += chunk.count(b"\n")
                last = chunk[-1:]
            return count + (last != b"\n")
    except OSError:
        return None


def _read_lines(handle: TextIO) -> Iterator[Record | BadRecord]:
    for number, line in enumerate(handle, start=1):
        if not line.strip():
            yield BadRecord(number, "empty line")
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            yield BadRecord(number, f"invalid JSON: {exc.msg} (column {exc.colno})")
            continue
        if not isinstance(data, dict):
            yield BadRecord(number, f"a record must be a JSON object, not {type(data).__name__}")
            continue
        yield Record(number, data)


def _read_array(handle: TextIO) -> Iterator[Record | BadRecord]:
    """Elements of a top-level JSON array, decoded one at a time from a sliding buffer."""
    buffer = handle.read(CHUNK)
    line = 1
    pos = buffer.index("[") + 1
    line += buffer.count("\n", 0, pos)
    eof = False
    while True:
        pos, line = _skip(buffer, pos, line, ",")
        if pos >= len(buffer) - 1 and not eof:
            more = handle.read(CHUNK)
            eof = not more
            buffer, pos = buffer[pos:] + more, 0
            continue
        if pos < len(buffer) and buffer[pos] == "]":
            return
        if pos >= len(buffer):
            raise InputError(f"line {line}: the JSON array is not closed")
        try:
            data, end = _decoder.raw_decode(buffer, pos)
        except ValueError as exc:
            if not eof:
                more = handle.read(CHUNK)
                eof = not more
                buffer, pos = buffer[pos:] + more, 0
                continue
            raise InputError(f"line {line}: invalid JSON in the array: {exc.msg}") from None
        if isinstance(data, dict):
            yield Record(line, data)
        else:
            yield BadRecord(line, f"a record must be a JSON object, not {type(data).__name__}")
        line += buffer.count("\n", pos, end)
        pos = end


def _skip(buffer: str, pos: int, line: int, separators: str) -> tuple[int, int]:
    while pos < len(buffer) and (buffer[pos].isspace() or buffer[pos] in separators):
        if buffer[pos] == "\n":
            line += 1
        pos += 1
    return pos, line


def first_present(data: dict[str, Any], names: Sequence[str]) -> str | None:
    """The first of `names` that the record has (and is not null)."""
    for name in names:
        if data.get(name) is not None:
            return name
    return None
