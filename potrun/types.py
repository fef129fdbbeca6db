"""potrun's vocabulary: statuses, limits, results, verdicts and errors.

A leaf module: it imports nothing from the project, so every other module (and the worker that runs
inside a sandbox) can depend on it.

Error hierarchy (the CLI's exit code of each, then the service's HTTP status: `ERROR_EXITS` and
`ERROR_STATUSES` below, the two tables)::

    PotrunError                                                                              [2, 400]
     ├── UsageError            bad options or arguments, an output that cannot be written    [2, 400]
     ├── InputError            input file unreadable or malformed beyond a single record     [2, 400]
     │    └── BadRecord        one record is malformed: carries its line number and field
     ├── SandboxUnavailable    a backend cannot start (Docker engine missing, image not built, ...) [3, 503]
     └── ImageBuildError       the sandbox image could not be built (`potrun image build`)   [1, 500]

Every error a user can see is one of these: a public function given a bad argument raises a
UsageError, never Python's TypeError or ValueError. A program failing is never an exception: it is an
ExecResult with a status.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Any

# A value as it crosses the sandbox boundary: plain data only, converted inside the sandbox.
Value = None | bool | int | float | str | list["Value"]


class Status(StrEnum):
    """Exactly one per executed program (DESIGN.md, "Contracts")."""

    OK = "ok"
    NO_ANSWER = "no_answer"
    SYNTAX_ERROR = "syntax_error"
    POLICY_VIOLATION = "policy_violation"
    ERROR = "error"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    CRASHED = "crashed"
    SANDBOX_ERROR = "sandbox_error"


class Entry(StrEnum):
    """Where the answer is read from, in the order `auto` tries them."""

    AUTO = "auto"
    SOLUTION = "solution"
    SOLVER = "solver"
    ANS = "ans"
    ANSWER = "answer"
    RESULT = "result"
    STDOUT = "stdout"


# The entries potrun calls (functions without arguments) and the ones it reads (global variables), as
# the names a program spells: extraction recognises them, the runner reads them.
ENTRY_FUNCTIONS = (Entry.SOLUTION.value, Entry.SOLVER.value)
ENTRY_VARIABLES = (Entry.ANS.value, Entry.ANSWER.value, Entry.RESULT.value)


class Isolation(StrEnum):
    """Which tiers may run a program (docs/sandbox.md, "Tiers").

    Each result says the tier that ran it (`ExecResult.isolation`: "warm" or "fork")."""

    WARM = "warm"  # the warm tier for programs the verifier proves pure, a fresh fork for every other
    FORK = "fork"  # a fresh fork of the pre-imported worker for every program


# The CPU seconds a program may use, unless told: twice what the slowest real programs need at the
# slowest hour. CPU time on a shared machine is not constant (other tenants, caches, a local hog): the
# same program's CPU time can vary severalfold from hour to hour, so a program within half of the limit
# can flip between ok and timeout. bench/load_independence.py checks that the PoT generations' slowest
# programs (GSM8K lines 856 and 826) get the same verdict idle and under a hog at this limit; the
# figures are in docs/performance.md, their history (why 10 s was not enough) in CHANGELOG.md.
DEFAULT_TIMEOUT_S = 20.0
DEFAULT_MEMORY_MB = 2048  # address space of a program's process
DEFAULT_OUTPUT_BYTES = 1_000_000  # stdout + stderr + the result's encoding

# The wall-clock safety net, when not given: WALL_MULTIPLE times the CPU limit, at least WALL_FLOOR_S.
# CPU time decides a timeout; the wall clock only stops what burns no CPU (a trusted `time.sleep`, a
# blocked read) or what escaped the CPU limits. Under a CPU hog of twice the cores, each of a 2-core
# machine's runners gets about a third of a core (2 cores shared by 4 hogs and 2 runners): a program
# that needs all of its CPU limit then takes about 3x that in wall time, so 5x leaves it room. The floor
# covers a fork's start and the answer's way back, which a small CPU limit leaves no room for.
WALL_MULTIPLE = 5.0
WALL_FLOOR_S = 2.0


def default_wall_timeout(timeout_s: float) -> float:
    """The wall-clock safety net for a CPU limit of `timeout_s` seconds."""
    return max(WALL_MULTIPLE * timeout_s, WALL_FLOOR_S)


# A program the default net stopped while it was computing may have been stopped by the machine's
# load rather than by itself: it got too small a share of a core to use its CPU limit within the net.
# Such a verdict is confirmed before it is reported: the program runs once more under a net
# CONFIRM_MULTIPLE times wider, and that verdict stands (`attempts` 2). "Computing": its CPU time was at
# least CONFIRM_SHARE of its wall time, which no sleeper or blocked read burns (they are reported at
# once, so a `time.sleep(10**6)` costs one net, not three) and which a runner keeps on a busy machine
# (a twentieth of a core; under a hog of twice the cores it gets a third). A net the caller chose is
# never widened.
CONFIRM_MULTIPLE = 2.0
CONFIRM_SHARE = 0.05


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-program limits, all enforced by the OS (a CPU-clock timer and rlimits, SIGKILL of the
    process group).

    `timeout_s` is the CPU time that decides a timeout (`timeout_kind` "cpu"), which does not count
    the time a program waits for a core on a busy machine; `wall_limit_s` is the wall-clock safety net
    (`timeout_kind` "wall"): `wall_timeout_s` where given, else `default_wall_timeout(timeout_s)`."""

    timeout_s: float = DEFAULT_TIMEOUT_S  # CPU seconds
    wall_timeout_s: float | None = None  # wall-clock seconds; None: default_wall_timeout(timeout_s)
    memory_mb: int = DEFAULT_MEMORY_MB
    output_bytes: int = DEFAULT_OUTPUT_BYTES
    max_processes: int = 32  # processes the program may have at once (trusted policy only can fork)

    @property
    def wall_limit_s(self) -> float:
        """The wall-clock limit the worker enforces."""
        return default_wall_timeout(self.timeout_s) if self.wall_timeout_s is None else self.wall_timeout_s

    def to_wire(self) -> dict[str, Any]:
        return {
            "timeout_s": self.timeout_s,
            "wall_timeout_s": self.wall_limit_s,
            "memory_mb": self.memory_mb,
            "output_bytes": self.output_bytes,
            "max_processes": self.max_processes,
        }


@dataclass(frozen=True, slots=True)
class ExecResult:
    """What running one program produced. `value` is plain data (see `Value`)."""

    status: Status
    value: Value = None
    value_type: str | None = None  # int, float, bool, str, list; None when there is no value
    entry: str | None = None  # which entry convention gave the value
    error_type: str | None = None  # exception type name, or the policy rule that was broken
    error: str | None = None  # short message
    line: int | None = None  # program line of the error or violation, when known
    timeout_kind: str | None = None  # "wall" or "cpu" when status is timeout
    stdout: str = ""  # the tail of what the program printed (bounded)
    stderr: str = ""  # the tail of what it wrote to stderr (bounded; never read as the answer)
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_rss_mb: float | None = None  # a fork's peak resident set, from wait4; None in the warm tier (docs/python.md)
    attempts: int = 1
    captured: tuple[float, ...] | None = None  # numbers the program's variables held (requests with capture)
    isolation: str | None = None  # the tier that ran it: "warm" or "fork" (None: it never reached a runner)
    exit_code: int | None = None  # sys.exit(): the process status Python would end with (0-255), as data

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    def __bool__(self) -> bool:
        # `if box.run(code):` could mean "it ran" or "it answered right": neither is written here, so
        # the question is refused rather than answered True for every result (a dataclass's default)
        raise TypeError("an ExecResult has no truth value: test .ok (ran and gave an answer) or .status")

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict: non-finite floats become the strings NaN, Infinity, -Infinity."""
        data = {
            "status": self.status.value,
            "value": json_safe(self.value),
            "value_type": self.value_type,
            "entry": self.entry,
            "error_type": self.error_type,
            "error": self.error,
            "line": self.line,
            "timeout_kind": self.timeout_kind,
            "wall_s": round(self.wall_s, 6),
            "cpu_s": round(self.cpu_s, 6),
            "peak_rss_mb": self.peak_rss_mb,
            "attempts": self.attempts,
            "isolation": self.isolation,
        }
        if self.captured is not None:
            data["captured"] = list(self.captured)
        if self.exit_code is not None:
            data["exit_code"] = self.exit_code
        return data


def confirming_limits(limits: Limits, result: ExecResult) -> Limits | None:
    """The limits of the run that confirms `result`, a verdict under `limits`; None when it stands."""
    stopped_by_net = result.status is Status.TIMEOUT and result.timeout_kind == "wall"
    if not stopped_by_net or limits.wall_timeout_s is not None:
        return None
    computing = result.cpu_s >= CONFIRM_SHARE * result.wall_s and result.cpu_s < limits.timeout_s
    if not computing:
        return None
    return replace(limits, wall_timeout_s=CONFIRM_MULTIPLE * limits.wall_limit_s)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of comparing a value with a gold answer; true exactly when it is correct, so that
    `if compare(value, gold):` and `sum(map(bool, verdicts))` count the right answers (a dataclass is
    otherwise always true: every answer would count)."""

    correct: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return bool(self.correct)


def json_safe(value: Value) -> Any:
    """Replace non-finite floats by strings, so that the output is standard JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value


class PotrunError(Exception):
    """Base of every error potrun raises on purpose."""


class UsageError(PotrunError):
    """Bad options or arguments."""


class InputError(PotrunError):
    """An input file cannot be read."""


@dataclass
class BadRecord(InputError):
    """One input record is malformed."""

    line: int
    message: str
    field_name: str | None = None

    def __str__(self) -> str:
        where = f"line {self.line}" + (f", field {self.field_name!r}" if self.field_name else "")
        return f"{where}: {self.message}"


class SandboxUnavailable(PotrunError):
    """A sandbox backend cannot start here; the message says what is missing and how to fix it."""


class ImageBuildError(PotrunError):
    """A step of building the sandbox image failed; the message names the step."""


def potrun_version() -> str:
    """The installed distribution's version: pyproject.toml's `version` is its only home. A source
    tree that is not installed (a sandbox image runs the worker from one) reports "0+unknown"."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("potrun")
    except PackageNotFoundError:
        return "0+unknown"


# What each error means at potrun's two edges, by class: an error takes the entry of its nearest class
# listed (BadRecord is an InputError). The command line's exit codes (docs/usage.md, "Exit codes")...
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SANDBOX_ERROR = 0, 1, 2, 3
ERROR_EXITS: Mapping[type[PotrunError], int] = MappingProxyType(
    {
        UsageError: EXIT_USAGE,
        InputError: EXIT_USAGE,
        SandboxUnavailable: EXIT_SANDBOX_ERROR,  # potrun's machinery, not the input: as a sandbox_error
        ImageBuildError: EXIT_FAILED,
        PotrunError: EXIT_USAGE,
    }
)
# ...and the service's HTTP statuses (docs/service.md): the client's fault is a 400, potrun's a 5xx.
ERROR_STATUSES: Mapping[type[PotrunError], int] = MappingProxyType(
    {
        UsageError: 400,
        InputError: 400,
        SandboxUnavailable: 503,  # no sandbox can run here now: the client may try again, or elsewhere
        ImageBuildError: 500,
        PotrunError: 400,
    }
)


def error_code(error: PotrunError, table: Mapping[type[PotrunError], int]) -> int:
    """The code `table` (ERROR_EXITS, ERROR_STATUSES) gives `error`: its nearest class's."""
    return next(table[kind] for kind in type(error).__mro__ if kind in table)


__all__ = [
    "CONFIRM_MULTIPLE",
    "CONFIRM_SHARE",
    "DEFAULT_MEMORY_MB",
    "DEFAULT_OUTPUT_BYTES",
    "DEFAULT_TIMEOUT_S",
    "ENTRY_FUNCTIONS",
    "ENTRY_VARIABLES",
    "ERROR_EXITS",
    "ERROR_STATUSES",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_SANDBOX_ERROR",
    "EXIT_USAGE",
    "WALL_FLOOR_S",
    "WALL_MULTIPLE",
    "BadRecord",
    "Entry",
    "ExecResult",
    "ImageBuildError",
    "InputError",
    "Isolation",
    "Limits",
    "PotrunError",
    "SandboxUnavailable",
    "Status",
    "UsageError",
    "Value",
    "Verdict",
    "default_wall_timeout",
    "error_code",
    "json_safe",
    "potrun_version",
]
