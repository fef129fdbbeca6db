"""Reading input records, streamed, never loaded whole, whatever the bytes.

Formats, detected by their first bytes (so a pipe is detected too), and by suffix for parquet:

- JSON Lines, or a JSON array (its first non-blank character is `[`);
- either of them compressed with gzip (`.jsonl.gz`, `.json.gz`) or zstd (`.zst`, the `zstd` extra);
- Parquet (`.parquet`, the `parquet` extra): read in batches, each row a record, its row number (from
  1) as its line. A Parquet file needs seeking (its index is at the end): a path, not a pipe.
- Arrow (pyarrow, the `parquet` extra): an `.arrow` file (IPC stream or file format), or the folder HF
  datasets' `save_to_disk` writes (its state.json lists its data-*.arrow files), rows as for Parquet.

`-` is standard input. Each record comes with its line number (for a JSON array, the line where the
element starts), so every message about a bad record can say where it is.

**Every line is accounted for.** A line is yielded as a `Record` or as a `BadRecord` in its place, with
its line and reason: invalid UTF-8, not JSON (NUL bytes, a truncated last line...), not an object,
nested deeper than `MAX_DEPTH`, longer than `max_line_bytes` (read past in chunks, never held whole).
A break that ends what can be read (a JSON array broken midway, a corrupt gzip or zstd stream, an
unreadable parquet row group) is one last `BadRecord` at the line where it happened (for parquet, one
per row that could not be read): the records before it are all yielded. The caller decides whether a
bad record is fatal (`--strict`). Only what stops the reading before any record (a missing file, a
missing extra, a file that is not Parquet inside) raises `InputError`.
"""

from __future__ import annotations

import codecs
import io
import json
import os
import stat
import sys
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from potrun.types import BadRecord, InputError

# The fields looked for when none is named, the first present one used (each option takes its own
# list): the names benchmarks give them. `check` reads a model output, its gold and its id; `validate`
# a gold program, its recorded answer and its id.
CODE_FIELDS = ("code", "output", "generated", "prediction")
GOLD_FIELDS = ("answer", "ground_truth", "gold")
ID_FIELDS = ("id", "qid", "uid", "question_id", "idx")
PROGRAM_FIELDS = ("python_solution",)
ANSWER_FIELDS = ("ground_truth", "answer")

STDIN = "-"
CHUNK = 1 << 16
MAX_LINE_BYTES = 16 << 20  # a line (or a JSON array element) longer than this is a bad record
MAX_DEPTH = 64  # JSON nesting deeper than this is a bad record: later code recurses over values
PARQUET_BATCH = 1024
_MISSING = object()
WILDCARD = "*"  # a field path's step for every element of a list: `choices.*.message.content`
_decoder = json.JSONDecoder()

GZIP_MAGIC, ZSTD_MAGIC, PARQUET_MAGIC = b"\x1f\x8b", b"\x28\xb5\x2f\xfd", b"PAR1"
# Arrow IPC: the file format (Feather v2) opens with "ARROW1"; the stream format, which HF datasets'
# save_to_disk writes (data-00000-of-00001.arrow), with a message's continuation marker
ARROW_FILE_MAGIC, ARROW_STREAM_MAGIC = b"ARROW1", b"\xff\xff\xff\xff"
ARROW_MAGICS = (ARROW_FILE_MAGIC, ARROW_STREAM_MAGIC)
MAX_STATE_BYTES = 1 << 20  # an HF folder's state.json: a list of file names
EXTRAS = {"zstd": ("zstandard", "zstd"), "parquet": ("pyarrow", "parquet")}  # format: (module, extra)


@dataclass(frozen=True, slots=True)
class Record:
    line: int
    data: dict[str, Any]


def read_records(path: str | Path, *, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[Record | BadRecord]:
    """Records of a file (or of standard input for `-`), in order, one item per line or row.

    The file is opened now, and a regular file's format detected now, so a missing file or extra
    raises `InputError` here, before the caller starts anything. A stream's first bytes are awaited
    only when the first record is asked for (its writer may be waiting for our output to open)."""
    if str(path) != STDIN and str(path).endswith(".parquet"):
        return _read_parquet(path)
    if str(path) != STDIN and os.path.isdir(path):
        return _read_arrow(_dataset_files(Path(path)))
    if str(path) != STDIN and str(path).endswith(".arrow"):
        return _read_arrow([Path(path)])
    raw = _open(path)
    if is_stream(path):
        return _read_detected(raw, path, max_line_bytes)
    try:
        return _from_detected(*_detect(raw, path), path, max_line_bytes)
    except BaseException:
        raw.close()
        raise


def _read_detected(raw: IO[bytes], path: str | Path, max_line_bytes: int) -> Iterator[Record | BadRecord]:
    with raw:
        yield from _from_detected(*_detect(raw, path), path, max_line_bytes)


def _from_detected(
    kind: str, stream: io.BufferedReader, path: str | Path, max_line_bytes: int
) -> Iterator[Record | BadRecord]:
    if kind == "parquet":
        stream.close()
        if is_stream(path):
            raise InputError(f"{_name(path)} is Parquet: give its path (Parquet cannot be read from a pipe)")
        return _read_parquet(path)
    return _read_text(stream, max_line_bytes)


def count_records(path: str | Path) -> int | None:
    """How many records a file holds, when that is cheap to know without draining it (for the progress
    bar): the lines of an uncompressed JSON Lines file, the rows of a Parquet file; None for a JSON
    array, a compressed file, a pipe, a FIFO or standard input (a stream is counted as it comes)."""
    if str(path) == STDIN or not _is_regular(path):
        return None
    try:
        with open(path, "rb") as handle:
            head = handle.read(CHUNK)
            if head.startswith(PARQUET_MAGIC) or str(path).endswith(".parquet"):
                return _parquet_rows(path)
            if head.startswith(ARROW_MAGICS) or str(path).endswith(".arrow"):
                return None
            if head.startswith((GZIP_MAGIC, ZSTD_MAGIC)) or head.lstrip()[:1] == b"[":
                return None
            count, last = head.count(b"\n"), head[-1:] or b"\n"
            while chunk := handle.read(1 << 20):
                count += chunk.count(b"\n")
                last = chunk[-1:]
            return count + (last != b"\n")
    except (OSError, InputError):
        return None


def is_stream(path: str | Path) -> bool:
    """True for standard input, a pipe, a FIFO or a device: what can be read once only."""
    return str(path) == STDIN or not _is_regular(path)


# -- fields --------------------------------------------------------------------------------------------


def first_present(data: dict[str, Any], names: Sequence[str]) -> str | None:
    """The first of `names` that the record has as a top-level key (and is not null)."""
    for name in names:
        if data.get(name) is not None:
            return name
    return None


def first_field(data: Any, names: Sequence[str]) -> tuple[str, Any] | None:
    """(name, value) of the first of `names` whose value in the record is present and not null, each
    name read as a field path (`field_value`); None when none is."""
    for name in names:
        value = field_value(data, name)
        if value is not _MISSING and value is not None:
            return name, value
    return None


def field_value(data: Any, path: str, default: Any = _MISSING) -> Any:
    """The value at a dotted field path: `resps.0.0`, `response.body.choices.0.message.content`.

    Each step is a key of an object or an integer index of a list (negative counts from the end). At
    each object the longest run of remaining steps that is itself a key is tried first, so a literal
    key with dots in it (`"doc.answer"`) wins over the path through `doc`; when that branch does not
    resolve, shorter keys are tried. A step `*` takes every element of a list (every value of an
    object without a key "*"): the value is the list of what the rest of the path gives under each,
    several samples (`choices.*.message.content`, lm-eval's `resps.*.0`). `default` (a private marker
    unless given) when nothing resolves."""
    found = _resolve(data, path.split(".")) if path else _MISSING
    return default if found is _MISSING and default is not _MISSING else found


def is_missing(value: Any) -> bool:
    """True for the marker `field_value` returns when a path does not resolve."""
    return value is _MISSING


class FirstRecord:
    """Passes records through and keeps the first `Record`'s data (to say what fields a run that
    scored nothing had)."""

    def __init__(self, items: Iterator[Record | BadRecord]) -> None:
        self._items = items
        self.data: dict[str, Any] | None = None

    def __iter__(self) -> Iterator[Record | BadRecord]:
        return self

    def __next__(self) -> Record | BadRecord:
        item = next(self._items)
        if self.data is None and isinstance(item, Record):
            self.data = item.data
        return item


OUTPUT_HINTS = ("resps", "content", "completion", "response", "output", "generated", "prediction", "text")


def likely_output_path(data: Any, limit: int = MAX_DEPTH) -> str | None:
    """The field path of the string in a record most likely to be the model output (to suggest a
    `--code-field`): one under a step named like an output (`OUTPUT_HINTS`, in that order of
    preference), else the longest string; None when the record has no string."""
    best: tuple[int, int, str] | None = None
    stack: list[tuple[Any, tuple[str, ...]]] = [(data, ())]
    while stack:
        node, steps = stack.pop()
        if isinstance(node, str) and steps:
            rank = min((OUTPUT_HINTS.index(s) for s in steps if s in OUTPUT_HINTS), default=len(OUTPUT_HINTS))
            candidate = (-rank, len(node), ".".join(steps))
            best = candidate if best is None or candidate[:2] > best[:2] else best
        elif len(steps) < limit and isinstance(node, (dict, list)):
            pairs = node.items() if isinstance(node, dict) else enumerate(node)
            stack.extend((child, (*steps, str(key))) for key, child in pairs)
    return best[2] if best is not None else None


def _resolve(node: Any, steps: list[str]) -> Any:
    if not steps:
        return node
    if steps[0] == WILDCARD and (isinstance(node, list) or (isinstance(node, dict) and WILDCARD not in node)):
        return _resolve_each(node, steps[1:])
    if isinstance(node, dict):
        for cut in range(len(steps), 0, -1):
            key = ".".join(steps[:cut])
            if key in node:
                found = _resolve(node[key], steps[cut:])
                if found is not _MISSING:
                    return found
        return _MISSING
    if isinstance(node, list) and _is_index(steps[0]):
        index = int(steps[0])
        if -len(node) <= index < len(node):
            return _resolve(node[index], steps[1:])
    return _MISSING


def _resolve_each(node: list[Any] | dict[str, Any], steps: list[str]) -> Any:
    """`*`: the rest of the path under each element (or value), as a list of those that resolve (a
    field of several samples: `choices.*.message.content`); missing when none does."""
    children = node if isinstance(node, list) else list(node.values())
    found = [_resolve(child, steps) for child in children]
    kept = [value for value in found if value is not _MISSING]
    return kept if kept else _MISSING


def _is_index(step: str) -> bool:
    digits = step[1:] if step.startswith("-") else step
    return digits.isdigit() and digits.isascii() and len(digits) < 10


# -- opening and detecting -----------------------------------------------------------------------------


def _name(path: str | Path) -> str:
    return "standard input" if str(path) == STDIN else str(path)


def _is_regular(path: str | Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _open(path: str | Path) -> IO[bytes]:
    if str(path) == STDIN:
        # A duplicate of fd 0: closing this reader leaves the process's own stdin alone.
        return open(os.dup(sys.stdin.fileno()), "rb")
    try:
        if os.path.isdir(path):
            raise InputError(f"cannot read {path}: it is a directory")
        return open(path, "rb")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None


def _replay(head: bytes, rest: IO[bytes]) -> io.BufferedReader:
    """A reader that yields `head` and then the rest of `rest`: peeking a pipe without losing bytes."""
    return io.BufferedReader(_Chain(head, rest), CHUNK)


def _put_back(consumed: bytes, stream: Any) -> Any:
    """`stream` as if `consumed` (its last bytes read) had not been read: sought back where it can be
    (a regular file, then read with no wrapper in between), else replayed (a pipe, a decompressor)."""
    if isinstance(stream, io.BufferedReader) and stream.seekable():
        stream.seek(-len(consumed), os.SEEK_CUR)
        return stream
    return _replay(consumed, stream)


class _Chain(io.RawIOBase):
    def __init__(self, head: bytes, rest: IO[bytes] | io.BufferedIOBase, also_close: IO[bytes] | None = None) -> None:
        self._head, self._rest, self._also_close = memoryview(head), rest, also_close

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            size = min(len(buffer), len(self._head))
            buffer[:size] = self._head[:size]
            self._head = self._head[size:]
            return size
        # read1: what is there (a pipe's next write), without waiting for a whole buffer of it.
        read = getattr(self._rest, "read1", self._rest.read)
        data = read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._rest.close()
        if self._also_close is not None:  # a decompressor leaves the file it reads open
            self._also_close.close()
        super().close()


def _detect(raw: IO[bytes], path: str | Path) -> tuple[str, io.BufferedReader]:
    """("text" | "parquet", the decompressed stream, positioned at its start). Whether a text is
    JSON Lines or an array is decided by the reader, which reports a stream broken from the start."""
    head = _read_until(raw, lambda got: len(got) >= 4 or not any(m.startswith(got) for m in _MAGICS))
    stream = _put_back(head, raw)
    if head.startswith(PARQUET_MAGIC):
        return "parquet", stream
    if head.startswith(GZIP_MAGIC):
        import gzip

        return "text", io.BufferedReader(_Chain(b"", gzip.GzipFile(fileobj=stream, mode="rb"), stream), CHUNK)
    if head.startswith(ZSTD_MAGIC):
        zstandard = _extra("zstd", path)
        reader = zstandard.ZstdDecompressor().stream_reader(stream, read_across_frames=True)
        return "text", io.BufferedReader(_Chain(b"", reader, stream), CHUNK)
    return "text", stream


_MAGICS = (GZIP_MAGIC, ZSTD_MAGIC, PARQUET_MAGIC)


def _read_until(stream: Any, enough: Any) -> bytes:
    """Bytes read as they come (read1: a pipe's writes, not a full buffer) until `enough(bytes so
    far)` or the end: a FIFO's first record is seen before its writer sends the next."""
    got = b""
    while not enough(got) and (part := stream.read1(CHUNK)):
        got += part
    return got


def _read_at_least(stream: Any, size: int) -> bytes:
    return _read_until(stream, lambda got: len(got) >= size)


def _extra(kind: str, path: str | Path) -> Any:
    module, extra = EXTRAS[kind]
    try:
        return __import__(module)
    except ImportError:
        what = "Parquet" if kind == "parquet" else f"{kind}-compressed"
        raise InputError(
            f"{_name(path)} is {what}: reading it needs the {module} package (pip install 'potrun[{extra}]')"
        ) from None


def _stream_errors() -> tuple[type[BaseException], ...]:
    """What a broken compressed stream raises while it is read (gzip, zlib, zstandard)."""
    errors: list[type[BaseException]] = [OSError, EOFError, zlib.error]
    zstandard = sys.modules.get("zstandard")
    if zstandard is not None:
        errors.append(zstandard.ZstdError)
    return tuple(errors)


# -- JSON Lines and JSON arrays --------------------------------------------------------------------------


def _read_text(stream: io.BufferedReader, max_line_bytes: int) -> Iterator[Record | BadRecord]:
    with stream:
        try:  # up to the first non-blank byte, which says JSON Lines or array
            start = _read_until(stream, lambda got: bool(got.lstrip(_BLANK)) or len(got) >= CHUNK)
        except _stream_errors() as exc:
            yield BadRecord(1, f"the input stream is broken from the start: {_reason(exc)}")
            return
        stream = _put_back(start, stream)
        if start.lstrip(_BLANK)[:1] == b"[":
            try:
                is_array, stream = _is_array(stream, max_line_bytes)
            except _stream_errors() as exc:
                yield BadRecord(1, f"the input stream is broken from the start: {_reason(exc)}")
                return
            if is_array:
                yield from _read_array(stream, max_line_bytes)
                return
        yield from _read_lines(stream, max_line_bytes)


def _is_array(stream: io.BufferedReader, max_line_bytes: int) -> tuple[bool, io.BufferedReader]:
    """Whether a text that starts with `[` is one JSON array, or JSON Lines whose first line is an
    array (a bad record of its own, then the other lines): JSON Lines when the first line is a
    whole JSON value and more follows it (blank lines before it aside). Returns the stream with what
    was read put back."""
    blank = b""
    while (first := stream.readline(max_line_bytes + 1)) and not first.strip(_BLANK) and len(blank) < CHUNK:
        blank += first  # blank lines before the first line that says
    first = blank + first
    if not first.endswith(b"\n") or not _is_whole_json(first):
        # A broken first line: an array's start only if a JSON value (or the end) follows its "[";
        # else it is a bad line of a JSON Lines file, whose other lines are still read.
        after_bracket = first.lstrip(_BLANK)[1:].lstrip(_BLANK)[:1]
        return (not after_bracket or after_bracket in b'{["]-0123456789tfn'), _put_back(first, stream)
    after = _read_until(stream, lambda got: bool(got.lstrip(_BLANK)) or len(got) >= CHUNK)
    return not after.lstrip(_BLANK), _put_back(first + after, stream)


def _is_whole_json(raw: bytes) -> bool:
    try:
        json.loads(raw)
    except (ValueError, RecursionError):  # not UTF-8, not JSON, or too deep: not a JSON Lines record
        return False
    return True


_BLANK = b" \t\r\n\xef\xbb\xbf"  # whitespace, and a byte-order mark


def _read_lines(stream: io.BufferedReader, max_line_bytes: int) -> Iterator[Record | BadRecord]:
    number, readline, limit = 0, stream.readline, max_line_bytes + 1
    while True:
        number += 1
        try:
            raw = readline(limit)
            if not raw:
                return
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                _skip_line(stream)
                yield BadRecord(number, f"line longer than {max_line_bytes} bytes (not read)")
                continue
        except _stream_errors() as exc:
            yield BadRecord(number, f"the input stream is broken here, nothing after it can be read: {_reason(exc)}")
            return
        yield parse_line(raw, number, last=not raw.endswith(b"\n"))


def _skip_line(stream: io.BufferedReader) -> None:
    while (part := stream.readline(CHUNK)) and not part.endswith(b"\n"):
        pass


def parse_line(raw: bytes, number: int, *, last: bool = False) -> Record | BadRecord:
    """One JSON Lines line (bytes, with or without its end of line) as a Record or a BadRecord."""
    try:  # the common case first, in as few steps as it takes; any doubt goes the careful way
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return _parse_line_carefully(raw, number, last)
    if type(data) is dict and raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return Record(number, data)
    return as_record(data, number)


def _parse_line_carefully(raw: bytes, number: int, last: bool) -> Record | BadRecord:
    """A line that did not decode at once: a byte-order mark, or a bad line and its reason."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return BadRecord(number, f"invalid UTF-8 at byte {exc.start + 1} of the line")
    if number == 1:
        text = text.removeprefix("\ufeff")  # a byte-order mark some editors write
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if not text.strip():
            return BadRecord(number, "empty line")
        hint = " (the last line, without an end of line: truncated?)" if last else ""
        return BadRecord(number, f"invalid JSON: {exc.msg} (column {exc.colno}){hint}")
    except RecursionError:
        return BadRecord(number, f"JSON nested deeper than {MAX_DEPTH} levels")
    except ValueError as exc:  # e.g. an integer of more digits than int() converts
        return BadRecord(number, f"invalid JSON: {_reason(exc)}")
    # Nesting deeper than MAX_DEPTH needs more brackets than that: most lines are not walked at all.
    return as_record(data, number, maybe_deep=raw.count(b"[") + raw.count(b"{") > MAX_DEPTH)


def as_record(data: Any, number: int, *, maybe_deep: bool = True) -> Record | BadRecord:
    """A decoded JSON value as a Record, or a BadRecord when it is not an object or too deep
    (`maybe_deep=False`: the caller knows it cannot be)."""
    if not isinstance(data, dict):
        return BadRecord(number, f"a record must be a JSON object, not {_json_type(data)}")
    if maybe_deep and too_deep(data, MAX_DEPTH):
        return BadRecord(number, f"JSON nested deeper than {MAX_DEPTH} levels")
    return Record(number, data)


def too_deep(value: Any, limit: int) -> bool:
    """True when lists and objects nest more than `limit` levels (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(node, dict):
            stack.extend((child, depth + 1) for child in node.values() if isinstance(child, (dict, list)))
        elif isinstance(node, list):
            stack.extend((child, depth + 1) for child in node if isinstance(child, (dict, list)))
    return False


def _json_type(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return names.get(type(value), "null")


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:200] + "..."


def _read_array(stream: io.BufferedReader, max_bytes: int) -> Iterator[Record | BadRecord]:
    """Elements of a top-level JSON array, decoded one at a time from a sliding buffer.

    A break (invalid JSON, an element over `max_bytes`, the array not closed, bytes that are not
    UTF-8, a broken stream) ends the reading with one BadRecord at the line where it is."""
    reader = _ArrayBuffer(stream)
    try:
        yield from _array_elements(reader, max_bytes)
    except _ArrayBreak as exc:
        yield BadRecord(reader.line, f"{exc}; the rest of the array is not read")
    except _stream_errors() as exc:
        yield BadRecord(
            reader.line, f"the input stream is broken here; the rest of the array is not read: {_reason(exc)}"
        )


class _ArrayBreak(Exception):
    pass


class _ArrayBuffer:
    """The undecoded rest of an array's text, read on demand; `line` is the line at `pos`."""

    def __init__(self, stream: io.BufferedReader) -> None:
        self.stream = stream
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.text, self.pos, self.line, self.eof = "", 0, 1, False

    def more(self, at_least: int = 1) -> bool:
        """Read what is there, and at least `at_least` bytes (fewer at the end); False at the end.
        (`at_least` is large only for a large element, so that it is decoded a logarithmic number of
        times; a stream then waits for that many bytes, or its end, before the element is yielded.)"""
        if self.eof:
            return False
        data = _read_at_least(self.stream, at_least)
        self.eof = not data
        try:
            decoded = self.decoder.decode(data, final=self.eof)
        except UnicodeDecodeError:
            raise _ArrayBreak("invalid UTF-8") from None
        self.text, self.pos = self.text[self.pos :] + decoded, 0
        return not self.eof or bool(decoded)

    def skip_blank(self, separators: str = "\ufeff") -> None:
        while True:
            while self.pos < len(self.text) and (self.text[self.pos].isspace() or self.text[self.pos] in separators):
                self.line += self.text[self.pos] == "\n"
                self.pos += 1
            if self.pos < len(self.text) or not self.more():
                return


def _array_elements(reader: _ArrayBuffer, max_bytes: int) -> Iterator[Record | BadRecord]:
    reader.skip_blank()
    reader.pos += 1  # the "[" that _detect saw
    reader.skip_blank()
    if reader.pos < len(reader.text) and reader.text[reader.pos] == "]":
        reader.pos += 1
        yield from _after_array(reader)
        return
    while True:
        reader.skip_blank()
        if reader.pos >= len(reader.text):
            raise _ArrayBreak("the JSON array is not closed")
        start_line = reader.line
        data, end = _decode_element(reader, max_bytes)
        text = reader.text
        brackets = text.count("[", reader.pos, end) + text.count("{", reader.pos, end)
        yield as_record(data, start_line, maybe_deep=brackets > MAX_DEPTH)
        reader.line += reader.text.count("\n", reader.pos, end)
        reader.pos = end
        reader.skip_blank()
        if reader.pos >= len(reader.text):
            raise _ArrayBreak("the JSON array is not closed")
        separator = reader.text[reader.pos]
        reader.pos += 1
        if separator == "]":
            yield from _after_array(reader)
            return
        if separator != ",":
            raise _ArrayBreak(f"invalid JSON in the array: expected ',' or ']', found {separator!r}")


def _after_array(reader: _ArrayBuffer) -> Iterator[BadRecord]:
    """Nothing but blanks may follow the array's `]`: anything else is reported, not dropped."""
    reader.skip_blank()
    if reader.pos < len(reader.text):
        yield BadRecord(reader.line, "text after the end of the JSON array (not read)")


def _decode_element(reader: _ArrayBuffer, max_bytes: int) -> tuple[Any, int]:
    """Decode the element at `reader.pos`, reading more while it may just be incomplete (doubling the
    read each time, so a large element is decoded a logarithmic number of times)."""
    while True:
        try:
            data, end = _decoder.raw_decode(reader.text, reader.pos)
            if end < len(reader.text) or reader.eof:
                return data, end
            reader.more()  # a number at the end of the buffer may go on in the next bytes: decode again
        except json.JSONDecodeError as exc:
            pending = len(reader.text) - reader.pos
            if pending > max_bytes:
                raise _ArrayBreak(f"an element longer than {max_bytes} bytes, or invalid JSON: {exc.msg}") from None
            if not reader.more(pending if pending > CHUNK else 1):
                raise _ArrayBreak(f"invalid JSON in the array: {exc.msg}") from None
        except RecursionError:
            raise _ArrayBreak(f"JSON nested deeper than {MAX_DEPTH} levels") from None
        except ValueError as exc:
            raise _ArrayBreak(f"invalid JSON in the array: {_reason(exc)}") from None


# -- Parquet ---------------------------------------------------------------------------------------------


def _parquet_file(path: str | Path) -> Any:
    _extra("parquet", path)
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    except Exception as exc:  # pyarrow's ArrowInvalid and kin: not a Parquet file, or a broken footer
        raise InputError(f"cannot read {path} as Parquet: {_reason(exc)}") from None


def _parquet_rows(path: str | Path) -> int | None:
    try:
        return int(_parquet_file(path).metadata.num_rows)
    except InputError:
        return None


# -- Arrow: HF datasets' save_to_disk folders and .arrow files ---------------------------------------------


def _dataset_files(folder: Path) -> list[Path]:
    """The .arrow files of an HF `save_to_disk` folder, in its order (state.json's `_data_files`);
    a folder that is not one is an InputError that says what it is."""
    state = folder / "state.json"
    if not state.is_file():
        if (folder / "dataset_dict.json").is_file():
            splits = sorted(entry.name for entry in folder.iterdir() if (entry / "state.json").is_file())
            raise InputError(
                f"cannot read {folder}: an HF DatasetDict saved with save_to_disk; give one split's folder "
                f"({', '.join(str(folder / split) for split in splits[:10]) or 'none found'})"
            )
        raise InputError(
            f"cannot read {folder}: it is a directory (an HF save_to_disk folder has a state.json; "
            "give a file, or such a folder)"
        )
    try:
        with state.open("rb") as handle:
            listed = json.loads(handle.read(MAX_STATE_BYTES).decode("utf-8"))["_data_files"]
        names = [entry["filename"] for entry in listed]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"cannot read {state}: not an HF datasets state.json ({_reason(exc)})") from None
    files = []
    for name in names:  # names from the file: each must be a plain .arrow file of this folder
        if not isinstance(name, str) or Path(name).name != name or not name.endswith(".arrow"):
            raise InputError(f"{state} lists {str(name)[:80]!r}, not an .arrow file of {folder}")
        files.append(folder / name)
    if not files:
        raise InputError(f"{state} lists no data file")
    return files


def _arrow_reader(path: Path) -> tuple[Any, Any]:
    """(the memory map, an iterator of its record batches) of an Arrow IPC file or stream."""
    _extra("parquet", path)  # pyarrow
    import pyarrow as pa
    import pyarrow.ipc

    try:
        source = pa.memory_map(str(path), "r")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        if source.read(len(ARROW_FILE_MAGIC)) == ARROW_FILE_MAGIC:
            source.seek(0)
            reader = pyarrow.ipc.open_file(source)
            return source, (reader.get_batch(i) for i in range(reader.num_record_batches))
        source.seek(0)
        return source, iter(pyarrow.ipc.open_stream(source))
    except Exception as exc:  # pyarrow's ArrowInvalid: not Arrow IPC
        source.close()
        raise InputError(f"cannot read {path} as Arrow (IPC file or stream): {_reason(exc)}") from None


def _read_arrow(paths: list[Path]) -> Iterator[Record | BadRecord]:
    first = _arrow_reader(paths[0])  # now: a missing file or extra is an InputError before any record
    return _arrow_records(paths, first)


def _arrow_records(paths: list[Path], first: tuple[Any, Any]) -> Iterator[Record | BadRecord]:
    """Each row of each file in order, numbered from 1 across the files; a file that breaks midway is
    one last bad record where it broke."""
    number = 0
    for index, path in enumerate(paths):
        source, batches = first if index == 0 else _arrow_reader(path)
        with source:
            try:
                for batch in batches:
                    for row in batch.to_pylist():
                        number += 1
                        yield as_record(plain(row), number)
            except Exception as exc:  # a truncated or corrupt batch
                yield BadRecord(number + 1, f"{path.name} cannot be read past row {number}: {_reason(exc)}")
                return


def _read_parquet(path: str | Path) -> Iterator[Record | BadRecord]:
    parquet = _parquet_file(path)  # now: a missing file or extra is an InputError before any record
    return _parquet_records(parquet)


def _parquet_records(parquet: Any) -> Iterator[Record | BadRecord]:
    """Rows of each row group, in batches; a row group that cannot be read is a bad record per row."""
    number = 0
    for group in range(parquet.metadata.num_row_groups):
        rows = parquet.metadata.row_group(group).num_rows
        read = 0
        try:
            for batch in parquet.iter_batches(batch_size=PARQUET_BATCH, row_groups=[group]):
                for row in batch.to_pylist():
                    read += 1
                    yield as_record(plain(row), number + read)
        except Exception as exc:  # pyarrow raises its own error types for a corrupt page
            for missing in range(read + 1, rows + 1):
                yield BadRecord(number + missing, f"row group {group} cannot be read: {_reason(exc)}")
            read = rows
        number += rows


def plain(value: Any) -> Any:
    """A Parquet value as JSON data: tuples and maps as lists, bytes as text (undecodable bytes
    replaced), dates, decimals and the like as their text. Plain data stays as it is."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


__all__ = [
    "ANSWER_FIELDS",
    "CODE_FIELDS",
    "GOLD_FIELDS",
    "ID_FIELDS",
    "MAX_DEPTH",
    "MAX_LINE_BYTES",
    "PROGRAM_FIELDS",
    "STDIN",
    "FirstRecord",
    "Record",
    "count_records",
    "field_value",
    "first_field",
    "first_present",
    "is_missing",
    "is_stream",
    "likely_output_path",
    "read_records",
]
