"""The runner: the process that executes programs, one at a time, under the worker's watch.

A runner is forked from the worker (which has numpy and the allowlist already imported) and enters its
limits (`isolation.RunnerEntry`). It runs in one of two tiers:

- **warm**: a long-lived runner that runs many programs, one after another, with nothing reset between
  them. It runs a program only if the verifier (`potrun.policies.pure`) proves, from its compiled code,
  that it cannot reach anything shared (module state, library objects, the runner's own code) or leave
  anything behind; it answers any other program with "needs a fork", and the worker forks it. What is
  not proven safe is not reused: there is no list of state to reset.
- **fork**: a fresh fork of the worker's fork server that runs one program and is killed; under the restricted policy
  the program is compiled by RestrictedPython and runs with its guards, under the trusted one as it is.

It makes an `ExecResult` of plain data, and answers with its wire message: the value is converted
here, under the program's own limits, with exact types and bounded as a whole, and never leaves as an
object.
"""

from __future__ import annotations

import builtins
import contextvars
import dataclasses
import itertools
import marshal
import math
import os
import re
import sys
import threading
import time
import types
import warnings
from collections import OrderedDict
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

from potrun.policies import PolicySpec
from potrun.policies.pure import end_program, pure_globals, unproven, why_not_pure_program
from potrun.policies.restricted import (
    FILENAME,
    PROGRAM_MODULE,
    Guards,
    PolicyViolation,
    compile_restricted_program,
)
from potrun.sandbox.inside import seeding
from potrun.sandbox.inside.cputimer import CpuTimer
from potrun.sandbox.kernel import isolation
from potrun.sandbox.wire import values

# The wire's bounds: an error message, an error type's name, the tail of stdout and of stderr, numbers
# captured. The runner keeps within them; the worker and potrun check them.
from potrun.sandbox.wire.protocol import (
    MAX_CAPTURED,
    STREAM_LIMIT,
    TEXT_LIMIT,
    TYPE_LIMIT,
    RunRequest,
    measured_message,
    result_message,
)
from potrun.types import ENTRY_FUNCTIONS, ENTRY_VARIABLES, Entry, ExecResult, Isolation, Status

_AUTO, _STDOUT = Entry.AUTO.value, Entry.STDOUT.value  # (an enum's .value is a property: dear per program)
NO_ENTRY = (
    f"no answer: no {'/'.join(f'{name}()' for name in ENTRY_FUNCTIONS)}, {'/'.join(ENTRY_VARIABLES)} or printed line"
)
COMPILE_CACHE_SIZE = 4096
# ...and the characters of source it keeps: the cache lives outside any program's limits, in the memory
# cgroup the worker's forks share (4,000 programs of 48 KB held ~400 MB there and starved them).
COMPILE_CACHE_CHARS = 4 << 20
PREPARE_LIMIT = 64 * 1024  # characters of a program that the worker compiles ahead of its fork
RECURSION_DEPTH = 980  # frames a program may nest (Python's default limit, less what a runner used to take)
# A warm runner's RLIMIT_CPU, in CPU limits: only a backstop behind the exact CPU timer (a pure program
# cannot dodge the timer), so it is set wide and renewed rarely rather than for every program.
CPU_BACKSTOP = 10


class OutputLimitExceeded(BaseException):
    """Raised inside the program when it prints past its output limit (BaseException: not an error)."""


class OutputSink:
    """Where the program's stdout and stderr go: counted together against the output limit, kept apart.

    stdout's last non-blank line is kept whole (it may be the answer: `print(10**1000)` is 1,001
    digits), and a tail of each stream is sent with the result; stderr is never read as the answer."""

    __slots__ = ("exceeded", "limit", "on_overflow", "size", "stderr", "stdout")

    def __init__(self, limit: int, on_overflow: Callable[[], None], *, keep_all: bool = False) -> None:
        self.limit = limit
        self.size = 0
        self.exceeded = False
        self.on_overflow = on_overflow
        self.stdout = Stream(self, keep_last_line=True, keep_all=keep_all)
        self.stderr = Stream(self, keep_last_line=False, keep_all=keep_all)

    def count(self, size: int) -> None:
        self.size += size
        if self.size > self.limit:
            self.exceeded = True
            self.on_overflow()
            raise OutputLimitExceeded()

    def last_line(self) -> str | None:
        return self.stdout.last_line()


class Stream:
    """One of the program's two output streams (a file-like object with write and flush)."""

    __slots__ = ("_all", "_keep_last", "_last", "_line", "_tail", "sink")

    def __init__(self, sink: OutputSink, keep_last_line: bool, keep_all: bool = False) -> None:
        self.sink = sink
        self._tail = ""
        self._all: list[str] | None = [] if keep_all else None  # every write (the sink bounds their size)
        self._line: list[str] = []  # the line being written, in pieces
        self._last = ""  # the last complete non-blank line
        self._keep_last = keep_last_line

    @property
    def tail(self) -> str:
        """What is sent back: the last STREAM_LIMIT characters, or all of it for a full_output request."""
        return self._tail if self._all is None else "".join(self._all)

    def write(self, text: Any) -> int:
        text = text if type(text) is str else str.__str__(text) if isinstance(text, str) else str(text)
        self.sink.count(len(text))
        if self._all is not None:
            self._all.append(text)
        elif len(text) < STREAM_LIMIT:
            self._tail = (self._tail + text)[-STREAM_LIMIT:]
        else:
            self._tail = text[-STREAM_LIMIT:]
        if self._keep_last:
            self._track_lines(text)
        return len(text)

    def _track_lines(self, text: str) -> None:
        if "\n" not in text:
            self._line.append(text)
            return
        head, _, rest = text.partition("\n")
        self._line.append(head)
        lines = ["".join(self._line), *rest.split("\n")]
        self._line = [lines.pop()]
        for line in reversed(lines):
            if line.strip():
                self._last = line
                break

    def flush(self) -> None:
        pass

    def last_line(self) -> str | None:
        current = "".join(self._line)
        line = current if current.strip() else self._last
        return line.strip() if line.strip() else None


class _Printer:
    """RestrictedPython's print target: `print(...)` becomes `_print._call_print(...)`."""

    __slots__ = ("sink",)

    def __init__(self, sink: OutputSink) -> None:  # the whole sink: `print` writes to its stdout
        self.sink = sink

    def _call_print(self, *objects: Any, sep: str | None = " ", end: str | None = "\n", **_: Any) -> None:
        sep = " " if sep is None else sep
        end = "\n" if end is None else end
        self.sink.stdout.write(sep.join(map(str, objects)) + end)

    def __call__(self) -> str:  # the `printed` name
        return self.sink.stdout.tail


# How a runner answers: (its result as the wire carries it, whether the runner must be replaced).
Send = Callable[[dict[str, Any], bool], None]


class Runner:
    """Executes programs in the runner process's directory and limits.

    A warm runner (`policy` None) is made in its runner process and runs the programs that the verifier
    proves pure, whatever the policy they were sent under (a pure program does nothing the restricted
    policy forbids), arming the CPU timer for each and checking after each that nothing outlives it
    (defence in depth: a pure program cannot start a thread or a process). A fork runner is made once
    per policy, in the worker, and each fork runs one program on its own copy of it (its limits entered
    at the fork); the fork is killed afterwards, so there is nothing to check. `send` belongs to the
    process that runs the programs: a fork sets it to its own answer pipe."""

    def __init__(self, policy: PolicySpec | None, *, send: Send | None = None) -> None:
        self.warm = policy is None
        self.tier = Isolation.WARM.value if self.warm else Isolation.FORK.value
        self.send = send
        self.guards = Guards(policy) if policy is not None and policy.restricted else None
        # source -> (code, transformed by RestrictedPython, why the warm tier refuses it or None)
        self._compiled: OrderedDict[str, tuple[types.CodeType, bool, str | None]] = OrderedDict()
        self._compiled_chars = 0
        # A fork's copy holds the one program compiled for it (`adopt`); the worker's, none.
        self._cache_size = COMPILE_CACHE_SIZE if self.warm else 1
        self._threads = threading.active_count()
        self._current: RunRequest | None = None
        self._sink: OutputSink | None = None
        self._cpu_backstop: float | None = None  # CPU time before which a warm runner's rlimit cannot strike
        self._timer = CpuTimer()  # each process that runs programs arms its own (a fork: on its copy)
        self.cpu_used = 0.0  # this process's CPU time when its last program ended (time.process_time)
        self._base_depth: int | None = None  # frames below the program's, measured at its first run
        self.last_wall_s = 0.0  # the wall time of the last program that answered

    def compiled(self, source: str) -> bytes:
        """A program compiled ahead, in the worker, for the fork that will run it (`adopt`), marshalled:
        compiling in a fresh fork pays a page fault for nearly every object the compiler touches (a
        quarter of a fork's cost), loading the code far fewer. Small sources only, so that compiling
        outside the program's limits stays cheap; b"" where it fails: the fork compiles it and
        reports the error as the program's."""
        if len(source) > PREPARE_LIMIT:
            return b""
        try:
            code = self._compile(source)[0]
        except Exception:
            return b""
        self._compiled.clear()  # the worker keeps none
        self._compiled_chars = 0
        return marshal.dumps(code)

    def adopt(self, source: str, compiled: bytes) -> None:
        """In a fork: take the code the worker compiled for `source` (`compiled`), if any."""
        if compiled:
            self._compiled[source] = marshal.loads(compiled), self.guards is not None, None
            self._compiled_chars = len(source)

    # -- one program ---------------------------------------------------------------------------------

    def run(self, request: RunRequest) -> tuple[dict[str, Any] | None, bool]:
        """Run one program; return its result, as the wire carries it (`protocol.measured_message`),
        and whether this runner must be replaced. A warm runner returns no result (None) for a
        program it may not run, and the worker forks it: one the
        verifier does not prove pure, one that reached at run time what its proof had not covered
        (`unproven`), and one that ran out of memory (the warm runner's heap has a history a fork's has
        not: the verdict must be a fresh process's)."""
        if self.warm:
            try:
                if self._compile(request.source)[2] is not None:
                    return None, False
            except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError):
                pass  # reported by _execute, as in a fork
        self._current = request
        limits = request.limits
        if self.warm:
            self._renew_backstop(limits.timeout_s)
            # Warnings are shown once per program, as in a fork: the registries in which the interpreter
            # notes a warning shown (for the program, in the library's module) are emptied on next use.
            warnings._filters_mutated()  # type: ignore[attr-defined]
        else:
            seeding.reseed()
        sink = self._sink = OutputSink(limits.output_bytes, self._overflow, keep_all=request.full_output)
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = sink.stdout, sink.stderr
        timer = self._timer
        wall0, cpu0 = time.perf_counter(), time.process_time()
        # From here the kernel ends this process once the program has used its CPU time: the value's
        # conversion and the freeing of what it made count as the program's; the answer does not.
        timer.arm(limits.timeout_s)
        try:
            # In a copy of the runner's context: numpy's error state and print options and decimal's
            # context are context variables, and a library call that fails to restore one leaves it
            # there, to die with the program (a fork dies anyway; it takes the same path, so that the
            # program's stack is the same in either tier).
            result, recycle = contextvars.copy_context().run(self._execute, request, sink)
        finally:
            timer.disarm()
            sys.stdout, sys.stderr = saved
        out_of_memory = result.status is Status.MEMORY_LIMIT
        if self.warm and (unproven() is not None or out_of_memory):
            return None, out_of_memory
        wall_s = self.last_wall_s = time.perf_counter() - wall0
        self.cpu_used = time.process_time()
        message = measured_message(
            request.id,
            result,
            isolation=self.tier,
            wall_s=wall_s,
            cpu_s=self.cpu_used - cpu0,
            stdout=sink.stdout.tail,
            stderr=sink.stderr.tail,
        )
        if self.warm and _shows_an_address(message):
            return None, False  # text the same program in a fork would show otherwise: the fork decides
        return message, recycle or (self.warm and not self._pristine())

    def _renew_backstop(self, cpu_s: float) -> None:
        """A warm runner's RLIMIT_CPU, behind its CPU timer: CPU_BACKSTOP programs' worth of CPU time,
        set again only when less than one program's (and the margin) is left, instead of three system
        calls for every program."""
        used = time.process_time()
        if self._cpu_backstop is None or self._cpu_backstop - used < cpu_s + isolation.BACKSTOP_MARGIN_S:
            isolation.set_cpu_limit(CPU_BACKSTOP * cpu_s)
            self._cpu_backstop = used + CPU_BACKSTOP * cpu_s

    def _execute(self, request: RunRequest, sink: OutputSink) -> tuple[ExecResult, bool]:
        self._limit_recursion()
        guards = self.guards
        if guards is not None:
            guards.begin()
        namespace: dict[str, Any] = {}
        # The answer and the captured locals are the program's objects too: dropped before end_program,
        # or a cycle among them (`ans = [...]; ans.append(ans)`) outlives its collection and gc.freeze()
        # keeps it for good, memory a later program runs out of.
        value: Any = None
        capture: Capture | None = None
        try:
            code, transformed, _ = self._compile(request.source)
            namespace = self._namespace(sink, transformed)
            exec(code, namespace)
            capture = Capture() if request.capture else None
            value, entry = _read_entry(namespace, request.entry, sink, capture)
            result = _value_result(value, entry, request.limits.output_bytes)
            if capture is not None and result.status in (Status.OK, Status.NO_ANSWER):
                result = dataclasses.replace(result, captured=tuple(capture.numbers(namespace, value)))
        except SyntaxError as exc:
            return ExecResult(
                Status.SYNTAX_ERROR, error_type=_type_name(exc), error=_bounded(exc.msg), line=exc.lineno
            ), False
        except PolicyViolation as exc:  # a compile-time refusal; a run-time one is among the guards'
            result, recycle = _violation_result(exc), False
        except OutputLimitExceeded:
            result, recycle = _output_limit_result(sink), True
        except MemoryError:
            result = ExecResult(
                Status.MEMORY_LIMIT, error_type="MemoryError", error="the program ran out of its memory limit"
            )
            recycle = True
        except SystemExit as exc:  # sys.exit(): its status as data, as Python would end the process
            result, recycle = _exit_result(exc), False
        except BaseException as exc:  # the program's own failure, whatever it raised
            result, recycle = _error_result(exc), False
        else:
            recycle = False
        finally:
            if self.warm:  # all it made is freed now, inside its own time: nothing of it is left
                value = capture = None
                end_program(namespace)
        # A refusal recorded by the guards decides, whatever the program did next (caught it, ran out of
        # memory or output): only the guards' record is trusted, never an exception the program raised.
        if guards is not None and guards.violations:
            return _violation_result(guards.violations[0]), recycle
        if sink.exceeded:
            return _output_limit_result(sink), True
        return result, recycle

    def _limit_recursion(self) -> None:
        """The same recursion depth for the program in either tier: RECURSION_DEPTH frames above
        `_execute`, however deep the runner's own stack is (a warm runner's and a fork's differ)."""
        if self._base_depth is None:
            frame: types.FrameType | None = sys._getframe()
            depth = 0
            while frame is not None:
                frame, depth = frame.f_back, depth + 1
            self._base_depth = depth
        if sys.getrecursionlimit() != self._base_depth + RECURSION_DEPTH:
            sys.setrecursionlimit(self._base_depth + RECURSION_DEPTH)

    def _compile(self, source: str) -> tuple[types.CodeType, bool, str | None]:
        """The code object, whether it went through RestrictedPython's transform, and why the warm tier
        may not run it (None: proven pure). A warm runner compiles plainly and asks the verifier; a
        fork compiles under its policy."""
        cached = self._compiled.get(source)
        if cached is None:
            if self.warm:
                code = compile(source, FILENAME, "exec")
                cached = code, False, why_not_pure_program(source, code)
            elif self.guards is None:
                cached = compile(source, FILENAME, "exec"), False, None
            else:
                cached = compile_restricted_program(source), True, None
            self._compiled[source] = cached
            self._compiled_chars += len(source)
            while len(self._compiled) > 1 and (
                len(self._compiled) > self._cache_size or self._compiled_chars > COMPILE_CACHE_CHARS
            ):
                self._compiled_chars -= len(self._compiled.popitem(last=False)[0])
        return cached

    def _namespace(self, sink: OutputSink, transformed: bool) -> dict[str, Any]:
        if self.warm:
            return pure_globals()
        if self.guards is None:
            return {"__name__": "__main__", "__builtins__": builtins}
        printer = _Printer(sink)
        return self.guards.new_globals(lambda _getattr=None: printer)

    def stop_for_fork(self) -> None:
        """A warm program is void (it reached what its proof did not cover): its time stops here, and the
        worker forks it (the caller answers NEEDS_FORK and leaves, whatever the program would do next)."""
        self._timer.disarm()

    def _overflow(self) -> None:
        """Past the output limit: answer now and leave, so a program that catches it cannot go on."""
        if self._sink is not None and self._current is not None:
            self._timer.disarm()  # the verdict is made: the answer's way out is not the program's time
            result = dataclasses.replace(_output_limit_result(self._sink), isolation=self.tier)
            self.send(result_message(self._current.id, result), True)  # type: ignore[misc]
            os._exit(0)

    def _pristine(self) -> bool:
        """Nothing a program started may outlive it: no thread. (A pure program can start neither a
        thread nor a process, and `end_program` freed all it made, cycles included: this is the one
        cheap check kept as a second line.)"""
        return threading.active_count() == self._threads


# -- answers ---------------------------------------------------------------------------------------


# What an address looks like in an object's text (`<function f at 0x7f...>`, `<map object at 0x55...>`):
# a warm program's answer, output or error that shows one (made by an f-string, `%`, an exception's
# message: ways `str` and `print` of PURE_BUILTINS do not see) is decided in a fork instead.
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")


def _shows_an_address(message: dict[str, Any]) -> bool:
    for key in ("value", "stdout", "stderr", "error"):
        text = message.get(key)
        if not text or type(text) in (int, float, bool):
            continue
        if _ADDRESS.search(text if type(text) is str else repr(text)):
            return True
    return False


def _read_entry(
    namespace: dict[str, Any], entry: str, sink: OutputSink, capture: Capture | None = None
) -> tuple[Any, str | None]:
    """Find the answer the way the program was asked to give it; say which convention gave it."""
    call = capture.call if capture is not None else _call
    if entry == _AUTO:
        for name in ENTRY_FUNCTIONS:
            if callable(namespace.get(name)):
                return call(namespace[name]), name
        for name in ENTRY_VARIABLES:
            if name in namespace:
                return namespace[name], name
        return _read_printed(sink)
    if entry in ENTRY_FUNCTIONS:
        function = namespace.get(entry)
        return (call(function), entry) if callable(function) else (None, None)
    if entry == _STDOUT:
        return _read_printed(sink)
    return namespace.get(entry), entry if entry in namespace else None


def _read_printed(sink: OutputSink) -> tuple[Any, str | None]:
    line = sink.last_line()
    return (_parse_printed(line), _STDOUT) if line is not None else (None, None)


def _call(function: Callable[[], Any]) -> Any:
    return function()


# -- captured values (process checklists) ---------------------------------------------------------------

MAX_VISITED = 20_000  # values looked at, inside lists, tuples, dicts and arrays included


class Capture:
    """The numbers a program's variables held, for process checklists; only when a request asks
    (`"capture": true`), so that a normal run pays nothing.

    The entry function's locals are read by a trace hook (`sys.settrace`: called on Python calls only,
    not on C calls as a profile hook is; no line events) that the runner, not the program, installs
    for the call and removes afterwards: it keeps the locals of the entry function's outermost frame
    when that frame returns (normally or by an exception), and touches nothing else. Module globals
    are read after the run (the `ans = ...` style). Only values whose type is exactly a known number
    type (int, float, Fraction, Decimal, numpy numbers), or an exact list, tuple, dict or numeric array
    of them, are looked at, so no method of the program's own classes runs; each is converted here to
    a finite float with `values.to_plain`, and only those floats leave the runner. Bools are not
    numbers here."""

    __slots__ = ("_frame", "locals")

    def __init__(self) -> None:
        self.locals: dict[str, Any] | None = None
        self._frame: types.FrameType | None = None

    def call(self, function: Callable[[], Any]) -> Any:
        if type(function) is not types.FunctionType:
            return function()
        code = function.__code__
        previous = sys.gettrace()  # None in a runner

        def on_call(frame: types.FrameType, event: str, arg: Any) -> Any:
            if frame.f_code is code and self._frame is None:  # the outermost call only
                self._frame = frame
                frame.f_trace_lines = False  # no per-line events: only its return
                return on_return
            return None

        def on_return(frame: types.FrameType, event: str, arg: Any) -> Any:
            if event == "return" and frame is self._frame:
                self.locals = dict(frame.f_locals)
                sys.settrace(previous)
            return on_return

        sys.settrace(on_call)
        try:
            return function()
        finally:
            sys.settrace(previous)
            self._frame = None

    def numbers(self, namespace: dict[str, Any], answer: Any) -> list[float]:
        """Distinct finite numbers, in the order found: the entry function's locals, the answer,
        then the module's globals; at most MAX_CAPTURED."""
        found: dict[float, None] = {}
        budget = [MAX_VISITED]
        roots = list(self.locals.values()) if self.locals is not None else []
        self.locals = None
        roots.append(answer)
        roots.extend(value for name, value in list(namespace.items()) if not name.startswith("__"))
        for value in roots:
            _gather(value, found, budget, 0)
            if len(found) >= MAX_CAPTURED or budget[0] <= 0:
                break
        return list(found)[:MAX_CAPTURED]


_EXACT_NUMBERS = (int, float, Fraction, Decimal)


def _gather(value: Any, found: dict[float, None], budget: list[int], depth: int) -> None:
    budget[0] -= 1
    if budget[0] < 0 or len(found) >= MAX_CAPTURED:
        return
    kind = type(value)
    if kind in _EXACT_NUMBERS:
        _keep(value, found)
    elif kind is list or kind is tuple or kind is dict:
        if depth < 3:
            items = value.values() if kind is dict else value
            for item in itertools.islice(items, max(budget[0], 0)):
                _gather(item, found, budget, depth + 1)
    else:
        numpy = sys.modules.get("numpy")
        if numpy is None:
            return
        if kind is numpy.ndarray and value.dtype.kind in "iuf":
            flat = value.flat[: max(budget[0], 0)]  # a copy of these items only, never of the whole array
            budget[0] -= len(flat)
            for item in flat.tolist():
                _keep(item, found)
        elif isinstance(value, numpy.generic) and kind.__module__ == "numpy" and value.dtype.kind in "iuf":
            _keep(value, found)


def _keep(value: Any, found: dict[float, None]) -> None:
    try:
        plain = values.to_plain(value)
        number = float(plain) if type(plain) in (int, float) else None
    except (ArithmeticError, ValueError, values.Unconvertible, values.TooLarge):
        return
    if number is not None and math.isfinite(number) and len(found) < MAX_CAPTURED:
        found[number] = None


def _parse_printed(line: str) -> Any:
    """A printed number becomes a number; anything else stays text for the comparator (an integer
    too long for Python to read stays text too, rather than become a float's inf)."""
    text = line.strip()
    try:
        return int(text)
    except ValueError:
        if text.lstrip("+-").isdigit():
            return text
    try:
        return float(text)
    except ValueError:
        return text


def _value_result(value: Any, entry: str | None, output_limit: int) -> ExecResult:
    if value is None:
        message = NO_ENTRY if entry is None else f"{entry} gave None"
        return ExecResult(Status.NO_ANSWER, entry=entry, error=message)
    try:
        plain = values.to_plain(value, values.Budget(output_limit))
    except values.IntegerTooLong as exc:
        return ExecResult(Status.ERROR, entry=entry, error_type="ValueError", error=str(exc))
    except values.TooLarge as exc:
        return ExecResult(Status.OUTPUT_LIMIT, entry=entry, error_type="TooLarge", error=str(exc))
    except values.Unconvertible as exc:
        return ExecResult(Status.NO_ANSWER, entry=entry, error_type="Unconvertible", error=str(exc))
    return ExecResult(Status.OK, entry=entry, value=plain, value_type=values.value_type(plain))


def _error_result(exc: BaseException) -> ExecResult:
    try:
        message = str(exc)
        if type(message) is not str:
            message = "<unprintable message>"
    except BaseException:
        message = "<unprintable message>"
    return ExecResult(Status.ERROR, error_type=_type_name(exc), error=_bounded(message), line=_program_line(exc))


def _exit_result(exc: SystemExit) -> ExecResult:
    """sys.exit(code) as CPython ends the process with it (`_Py_HandleSystemExit`): None is 0; an int
    is its own value (not its __int__), one past a C long is -1, and the OS keeps its low 8 bits (256 is
    0, -1 is 255); anything else is printed to stderr (the message here) and the status is 1."""
    result = _error_result(exc)
    try:
        code = exc.code
        if code is None:
            status = 0
        elif isinstance(code, int):
            value = int.__int__(code)
            status = (value if -(2**63) <= value < 2**63 else -1) & 0xFF
        else:
            status = 1
    except BaseException:  # a program's `code` property that raised: Python prints it, and ends with 1
        status = 1
    return dataclasses.replace(result, exit_code=status)


def _type_name(exc: BaseException) -> str:
    return values.bounded_name(type(exc), TYPE_LIMIT)


def _violation_result(exc: PolicyViolation) -> ExecResult:
    return ExecResult(
        Status.POLICY_VIOLATION,
        error_type=_bounded(str(exc.rule))[:TYPE_LIMIT],
        error=_bounded(str(exc.message)),
        line=exc.line,
    )


def _output_limit_result(sink: OutputSink) -> ExecResult:
    return ExecResult(Status.OUTPUT_LIMIT, error_type="OutputLimit", error=f"printed more than {sink.limit} characters")


def _program_line(exc: BaseException) -> int | None:
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _bounded(text: str) -> str:
    text = text if type(text) is str else str.__str__(text)
    return text if len(text) <= TEXT_LIMIT else text[: TEXT_LIMIT - 3] + "..."


# -- trusted runners: guard the machinery, not the program --------------------------------------------


AuditHook = Callable[[str, tuple[Any, ...]], None]


def trusted_audit_hook(network_isolated: bool) -> AuditHook:
    """The audit hook for trusted programs: no signals outside the program's group, no dlopen, and no
    sockets when there is no network namespace. Extra to the OS limits, never instead of them. Made
    once by the worker; each trusted runner adds it (`sys.addaudithook`) before running anything."""

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event in ("os.kill", "os.killpg"):
            target = args[0]
            group = target if event == "os.killpg" else _group_of(target)
            if group != os.getpgid(0):
                raise PermissionError(f"signals outside the program's process group are refused ({event})")
        elif event == "ctypes.dlopen":
            raise PermissionError("loading native libraries is refused")
        elif not network_isolated and event in ("socket.connect", "socket.bind", "socket.sendto"):
            raise PermissionError("network access is refused")

    return hook


def _group_of(pid: int) -> int | None:
    if pid == 0:
        return os.getpgid(0)
    if pid < 0:
        return -pid if pid != -1 else None
    try:
        return os.getpgid(pid)
    except OSError:
        return None


__all__ = ["PROGRAM_MODULE", "AuditHook", "Runner", "trusted_audit_hook"]
