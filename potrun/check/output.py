"""Durable output: results are appended to `--out` as they complete, and `--resume` continues a run.

The output file is one JSON line per input record, **in input order**: its n-th line is the result of
the n-th record of the input (a JSON Lines file's n-th line, a JSON array's n-th element). Each line
goes to the file in one `write` call on an unbuffered file as soon as its record is done, so a run that
is killed leaves a file of complete lines, save at most a torn last one.

Each line carries a `digest` of what decided it: the record as read (and its gold from `--gold`), the
options that grade and run it (comparator presets and their options, fields, mode, policy, limits,
entry, hash seed, potrun's version), and the line's own verdict fields (all but its timings).

Resume (`potrun check ... --out OUT --resume`):

1. read OUT line by line beside the input records: each complete line must be the result of the record
   at its position (same `line` and `id`, fields of the right types), else the file belongs to another
   input and nothing is done (exit 2, naming the file, the line and the field);
2. a line whose digest is that of its record under this run's options is kept and added to the summary;
3. the first line whose digest is not (its record, gold or options changed, potrun was upgraded, or
   the line was edited; a line without one, from an older potrun) is not trusted: it and every line
   after it are cut off and their records run again, under the current golds and options;
4. a torn last line (no newline, or not JSON) is cut off, and its record is run again;
5. the remaining records run and their lines are appended.

No record is run twice and none is missing, so the file and the summary equal those of a run that was
never interrupted (except the run statistics elapsed_s, programs_per_s and cache_hits, which describe
the invocation). Resume reads both files once, streaming: memory stays flat whatever their size.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import shlex
import stat
import sys
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from potrun.check.pipeline import CheckOptions, RecordResult
from potrun.check.records import Record, first_field
from potrun.sandbox.api import SandboxConfig
from potrun.types import BadRecord, UsageError

RESULT_KEYS = ("line", "id", "status")  # what a line must have to be a result line
STDOUT = "-"
DIGEST = "digest"  # the field of a line that holds its digest
UNDIGESTED = ("wall_s", "cpu_s", DIGEST)  # timings describe the invocation, not the verdict
# The sandbox options that can change a program's result (not the backend, workers or image).
RESULT_SANDBOX_OPTIONS = ("policy", "entry", "timeout", "wall_timeout", "memory_mb", "output_bytes", "hash_seed")


def run_fingerprint(options: CheckOptions, sandbox: SandboxConfig) -> bytes:
    """What every line of a run depends on beside its record: potrun's version, the check options
    (a benchmark by its name) and the sandbox options that decide results."""
    from potrun import __version__

    checks = {
        field.name: getattr(options, field.name) for field in dataclasses.fields(options) if field.name != "benchmark"
    }
    checks["benchmark"] = getattr(options.benchmark, "name", None)
    described = {
        "potrun": __version__,
        "check": checks,
        "sandbox": {name: getattr(sandbox, name) for name in RESULT_SANDBOX_OPTIONS},
    }
    return json.dumps(described, sort_keys=True, default=repr).encode()


class InputDigests:
    """The digests of the records' inputs, taken as the engine reads them (`track`), handed out in the
    same order as their results come (`line_digest`): each record has exactly one result."""

    def __init__(self, fingerprint: bytes, id_fields: tuple[str, ...], golds: Mapping[Any, Any] | None) -> None:
        self.fingerprint = fingerprint
        self.id_fields = id_fields
        self.golds = golds
        self._due: deque[bytes] = deque()

    def of(self, item: Record | BadRecord) -> bytes:
        """The digest of one record's inputs: the run's fingerprint, the record as read, its gold."""
        digest = hashlib.sha256(self.fingerprint)
        if isinstance(item, BadRecord):
            digest.update(json.dumps([item.line, item.message, item.field_name]).encode())
            return digest.digest()
        digest.update(json.dumps(item.data, separators=(",", ":")).encode())
        if self.golds is not None:
            found = first_field(item.data, self.id_fields)
            key = found[1] if found is not None else item.line
            key = json.dumps(key, sort_keys=True) if isinstance(key, (list, dict)) else key
            digest.update(json.dumps(["gold", key in self.golds, self.golds.get(key)], default=repr).encode())
        return digest.digest()

    def track(self, records: Iterable[Record | BadRecord]) -> Iterator[Record | BadRecord]:
        for item in records:
            self._due.append(self.of(item))
            yield item

    def line_digest(self, verdict_text: str) -> str:
        """The digest of the next result's line (its record's inputs were tracked first)."""
        return line_digest(self._due.popleft(), verdict_text)


def line_digest(inputs: bytes, verdict_text: str) -> str:
    """A line's digest: its record's inputs (`InputDigests.of`) and the JSON text of its verdict fields
    (all but UNDIGESTED, in the line's order: a line read back gives the same text)."""
    return hashlib.sha256(inputs + verdict_text.encode()).hexdigest()[:32]


def verdict_text(line: Mapping[str, Any]) -> str:
    return json.dumps({key: value for key, value in line.items() if key not in UNDIGESTED})


def check_output_path(option: str, path: str | Path, inputs: Sequence[str | Path] = ()) -> None:
    """Raise `UsageError`, naming the option and the path, unless `path` can be written: checked before
    a run starts, so that a run never ends in an unwritable output. `-` (standard output), a device
    and a FIFO need only be writable; a regular file, or a missing one in a writable directory, is
    opened for appending (nothing is truncated; a file created by the check is removed again); a
    directory, or one of `inputs` itself, is refused."""
    if str(path) == STDOUT:
        return
    try:
        status: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        status = None
    except OSError as exc:
        raise UsageError(f"{option} {path}: {exc.strerror}") from None
    if status is not None and stat.S_ISDIR(status.st_mode):
        raise UsageError(f"{option} {path}: it is a directory")
    if status is not None and any(_same_file(path, source) for source in inputs):
        raise UsageError(f"{option} {path} is an input file of this run: writing it would destroy what is read")
    if status is not None and not stat.S_ISREG(status.st_mode):
        if not os.access(path, os.W_OK):
            raise UsageError(f"{option} {path}: cannot write: permission denied")
        return  # a FIFO or a device: opening it here could block, or be its reader's only open
    try:
        with open(path, "ab"):
            pass
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot write: {exc.strerror}") from None
    if status is None:
        Path(path).unlink(missing_ok=True)


def _same_file(path: str | Path, source: str | Path) -> bool:
    try:
        return str(source) != STDOUT and os.path.samefile(path, source)
    except OSError:
        return False


def write_text_output(option: str, path: str | Path, text: str) -> None:
    """Write `text` to `path` (standard output for `-`); a failure is a `UsageError` naming both."""
    try:
        if str(path) == STDOUT:
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot write: {exc.strerror}") from None


def record_identity(item: Record | BadRecord, id_fields: tuple[str, ...]) -> tuple[int, Any]:
    """(line, id) of an input record, as its result line shows them."""
    if isinstance(item, BadRecord):
        return item.line, None
    found = first_field(item.data, id_fields)
    return item.line, found[1] if found is not None else item.line


def resume_output(
    path: str | Path,
    records: Iterable[Record | BadRecord],
    *,
    id_fields: tuple[str, ...],
    presets: tuple[str, ...],
    add: Any,
    digests: InputDigests | None = None,
) -> tuple[Iterator[Record | BadRecord], int]:
    """Take the results already in `path`; return the records still to run and how many were done.

    `add(result)` receives each result kept (the summary's `add`). With `digests`, a line is kept only
    when its digest is that of its record under this run's options; from the first that is not, the
    lines are cut off and their records run again (the module docstring). A missing file is an empty
    one (a first run with --resume starts from the beginning). Resuming needs a regular file: a
    stream cannot be read back, nor cut at a torn line."""
    remaining = iter(records)
    if str(path) == STDOUT or (os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode)):
        raise UsageError(
            f"--resume needs --out to be a regular file, not {'standard output' if str(path) == STDOUT else path}"
        )
    try:
        handle = open(path, "rb")  # noqa: SIM115 (its `with` follows: a missing file is no error, an unreadable one is)
    except FileNotFoundError:
        return remaining, 0
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    keep = done = 0
    torn: str | None = None
    stale: Record | BadRecord | None = None  # the record of the first line not kept
    with handle:
        for raw in handle:
            number = done + 1  # the line's number in the file
            if torn is not None:
                raise UsageError(
                    f"{path}: line {done + 1} is not a result line ({torn}); "
                    "it is not the last line, so the file was not written by an interrupted run"
                )
            data = _parse_line(raw)
            if data is None or not raw.endswith(b"\n"):
                torn = "not a complete JSON result" if data is None else "no end of line"
                continue
            item = next(remaining, None)
            if item is None:
                raise UsageError(
                    f"{path} has more results than the input has records: was it written for another input?"
                )
            line, record_id = record_identity(item, id_fields)
            if data["line"] != line or data.get("id") != record_id:
                field, found = ("line", data["line"]) if data["line"] != line else ("id", data.get("id"))
                raise UsageError(
                    f"{path}: line {number}: field {field!r} is {_shown(found)}, but input record {number} "
                    f"is line {line} (id {_shown(record_id)}): was it written for another input?"
                )
            try:
                result = RecordResult.from_json(data, presets)
            except (TypeError, ValueError) as exc:
                raise UsageError(f"{path}: line {number}: not a potrun --out line ({exc})") from None
            if digests is not None and data.get(DIGEST) != line_digest(digests.of(item), verdict_text(data)):
                stale = item
                break
            add(result)
            keep += len(raw)
            done += 1
    if stale is not None:
        print(
            f"potrun: {path}: line {done + 1} was written under other inputs, golds or options (or edited): "
            f"it and the lines after it run again",
            file=sys.stderr,
        )
        remaining = itertools.chain([stale], remaining)
    if torn is not None or stale is not None:
        os.truncate(path, keep)  # what is not kept goes; its records run again
    return remaining, done


def _shown(value: Any) -> str:
    text = json.dumps(value, default=repr)
    return text if len(text) <= 60 else text[:57] + "..."


def _parse_line(raw: bytes) -> dict[str, Any] | None:
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict) or not all(key in data for key in RESULT_KEYS):
        return None
    return data


class OutputWriter:
    """Appends one JSON line per result, each in one write call as it comes (no buffer to lose).

    `-` is standard output. A pipe, a FIFO or a device (`/dev/stdout`) is written the same way but
    never sought: only a regular file has a torn line to cut at close."""

    def __init__(self, path: str | Path, *, append: bool = False, digests: InputDigests | None = None) -> None:
        # The writer holds its file open across the run (closed by `close`): no context manager here.
        try:
            if str(path) == STDOUT:
                sys.stdout.flush()
                self._file = open(os.dup(sys.stdout.fileno()), "wb", buffering=0)  # noqa: SIM115
            else:
                self._file = open(path, "ab" if append else "wb", buffering=0)  # noqa: SIM115
        except OSError as exc:
            raise UsageError(f"--out {path}: cannot write: {exc.strerror}") from None
        self.path = path
        self.digests = digests  # each line gets its digest (`--resume` trusts no line without one)
        self.regular = stat.S_ISREG(os.fstat(self._file.fileno()).st_mode)
        self.offset = self._file.seek(0, os.SEEK_END) if self.regular else 0  # the end of the last whole line
        self.written = 0

    def write(self, result: RecordResult) -> None:
        line = result.to_json()
        tail = {key: line.pop(key) for key in UNDIGESTED if key in line}  # the timings go last
        text = json.dumps(line)  # serialized once: the digest is of this text
        if self.digests is not None:
            tail[DIGEST] = self.digests.line_digest(text)
        self._write_line((text[:-1] + ", " + json.dumps(tail)[1:] + "\n").encode())

    def write_json(self, data: Mapping[str, Any]) -> None:
        """One line of any JSON object (`potrun validate`'s reports)."""
        self._write_line((json.dumps(data) + "\n").encode())

    def _write_line(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[self._file.write(view) :]
        except OSError as exc:  # a full disk, or the reader of a pipe gone (BrokenPipeError)
            raise UsageError(f"--out {self.path}: cannot write: {exc.strerror}") from None
        self.offset += len(data)
        self.written += 1

    def close(self) -> None:
        if self._file.closed:
            return
        # An interruption inside a write (between two partial writes) would leave a torn line: cut it.
        if self.regular and self._file.seek(0, os.SEEK_END) != self.offset:
            self._file.truncate(self.offset)
        try:
            self._file.close()
        except OSError:  # a pipe whose reader is gone: every whole line was already written
            pass


def resume_command(words: Sequence[str], program: str = "potrun") -> str:
    """The shell command that resumes a run started with the command-line `words` (after the program
    name): the same words, plus --resume."""
    return shlex.join([program, *words, *([] if "--resume" in words else ["--resume"])])


__all__ = [
    "STDOUT",
    "InputDigests",
    "OutputWriter",
    "check_output_path",
    "record_identity",
    "resume_command",
    "resume_output",
    "run_fingerprint",
    "write_text_output",
]
