"""Templates: forks that already hold the heavy libraries a program imports.

A forked program is a copy of the process it is forked from (`forkserver`). Forked from the bare fork
server, a program that imports sympy or pandas pays the import in every fork (~0.15-0.4 s of CPU, 10,000
page faults): the speed of a fresh interpreter per program. So a program forks from a **template**: a
copy of the fork server that imported the modules the program imports, and warmed their caches, before
any program ran. Which template, the worker reads from the program's compiled code before it runs
(`profile`): the IMPORT_NAME instructions of every code object in it, kept where the policy allows the
module and this module's reviewed list (`TEMPLATE_MODULES`) has it. A program that imports none of them
forks from the bare fork server, the smallest.

What a template is and is not:

- made on first need, by the fork server (so, like it, it has never held a program: what one of its
  forks can see of other programs is nothing), outside any program's limits: its import and warm-up run
  before the program's fork and its clocks, under a memory cgroup limit raised for it;
- bounded: at most MAX_TEMPLATES at once, holding at most TEMPLATE_BUDGET_MB together (charged to the
  worker's memory cgroup when made), the least recently used ended first;
- kept as long as it is used, never longer than the worker: it dies with the fork server, which dies
  with the worker (PR_SET_PDEATHSIG both);
- not the program's memory: what it holds is added to the worker's share (`MemoryCgroup.baseline`) of
  the memory cgroup's limit, and a fork's RLIMIT_AS counts from the address space it was forked with
  (`RunnerEntry.enter`), so that a program's memory limit is its own memory, from any template.
  Hence templates only where the worker sets that limit before each fork (`Templates.enabled`): a
  container's limit is fixed when it starts, and room left there for templates would be a program's.

A template that does not come up in time (TEMPLATE_START_S, or half the program's wall-clock net) or
dies is dropped; its programs fork from the bare fork server and import what they need themselves,
as they did before templates (slower, the same verdicts), and it is tried again after TEMPLATE_RETRY_S.
"""

from __future__ import annotations

import importlib
import opcode
import re
import time
import types
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from potrun.policies import PolicySpec, module_allowed

if TYPE_CHECKING:
    from potrun.sandbox.inside.forkserver import ForkServer
    from potrun.sandbox.kernel.memcg import MemoryCgroup

# numpy and the submodules its programs reach: numpy.random among them, so that its global generator is
# the template's, reseeded per program (`seeding.reseed`).
NUMPY_MODULES = ("numpy", "numpy.linalg", "numpy.random", "numpy.fft", "numpy.polynomial")
# The modules a template may import, by the top-level name a program imports: reviewed, since a
# template imports them outside any program's limits (an import runs the module's code): each is a
# library of numbers with no side effect at import but its own caches. A module not listed here is
# imported by the program itself, in its fork, under its limits.
TEMPLATE_MODULES: dict[str, tuple[str, ...]] = {
    "numpy": NUMPY_MODULES,
    "sympy": ("sympy",),
    "pandas": (*NUMPY_MODULES, "pandas"),  # pandas imports numpy: one template holds both
}
MAX_TEMPLATES = 3  # templates alive at once, the bare fork server not counted...
TEMPLATE_TASKS = 2 * MAX_TEMPLATES  # ...the tasks they hold together (pandas's: two, pyarrow's thread)...
TEMPLATE_BUDGET_MB = 640  # ...and the memory they hold together (pandas and sympy: ~150 MB)
TEMPLATE_START_S = 20.0  # the longest a template may take to import and warm up...
TEMPLATE_RETRY_S = 60.0  # ...before its profile is left to the bare fork server for this long

_IMPORT_NAME = opcode.opmap["IMPORT_NAME"]
_EXTENDED_ARG = opcode.EXTENDED_ARG


@dataclass(frozen=True)
class Profile:
    """What a template holds: `modules` imported (sorted; none: the bare fork server), and for
    `restricted` programs only, sympy's escape hatches closed ahead (`close_sympy_escape_hatches`: a
    restricted fork of a template without it closes them itself, ~2,700 page faults and 10 ms of CPU
    each; a trusted program must never fork from one with them closed)."""

    modules: tuple[str, ...] = ()
    restricted: bool = False


BARE = Profile()


def imported_names(code: types.CodeType) -> set[str]:
    """The module names of every IMPORT_NAME in `code` and the code objects nested in it (functions,
    classes, comprehensions), whether or not they run. Only code objects that name a template module
    at all are decoded."""
    found: set[str] = set()
    stack = [code]
    while stack:
        current = stack.pop()
        stack.extend(const for const in current.co_consts if isinstance(const, types.CodeType))
        if any(name.partition(".")[0] in TEMPLATE_MODULES for name in current.co_names):
            found.update(_import_names(current))
    return found


def _import_names(code: types.CodeType) -> Iterable[str]:
    raw, extended = code.co_code, 0
    for at in range(0, len(raw), 2):
        op, arg = raw[at], raw[at + 1] | extended
        extended = arg << 8 if op == _EXTENDED_ARG else 0
        if op == _IMPORT_NAME:
            yield code.co_names[arg]


# `import a.b as c, d` and `from a.b import c` at the start of a line (or after `;`): the module names.
_IMPORT_LINE = re.compile(r"(?:^|;)[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import\b|import[ \t]+([\w., \t]+))", re.M)


def source_imports(source: str) -> set[str]:
    """The module names of a source's import statements, read without compiling it (compiling in the
    worker would intern the program's names in it for good on Python 3.12+). Linear in the source."""
    found: set[str] = set()
    for match in _IMPORT_LINE.finditer(source):
        if match.group(1):
            found.add(match.group(1))
        else:
            found.update(part.split()[0] for part in match.group(2).split(",") if part.split())
    return found


def profile(code: types.CodeType | None, policy: PolicySpec, source: str = "") -> Profile:
    """The template a program forks from: the modules of TEMPLATE_MODULES it imports that its policy
    lets it import (a restricted program's `import pandas` is refused: no template for it). Without its
    code (Python 3.12+ compiles no program in the worker: runner.COMPILE_AHEAD), from its source's
    import statements: a name read wrong only picks another template, whose value is the same."""
    if code is None and not source:
        return BARE
    modules: set[str] = set()
    for name in imported_names(code) if code is not None else source_imports(source):
        top = name.partition(".")[0]
        if top in TEMPLATE_MODULES and (not policy.restricted or module_allowed(name, policy.allowed_modules)):
            modules.update(TEMPLATE_MODULES[top])
    return Profile(tuple(sorted(modules)), policy.restricted and "sympy" in modules)


def warm(modules: Iterable[str]) -> None:
    """In a new template: run each library's common paths once, so that what they make on first use
    (lazy imports, caches, dispatch tables) is the template's, shared by its forks, and not made again
    in each. Fixed computations on fixed numbers: a fork sees these, never another program's."""
    held = set(modules)
    if "numpy" in held:
        _warm_numpy()
    if "sympy" in held:
        _warm_sympy()
    if "pandas" in held:
        _warm_pandas()


def _warm_numpy() -> None:
    import numpy as np

    values = np.sort(np.random.default_rng(0).integers(1, 1000, size=50))
    np.median(values), np.mean(values), np.std(values), np.percentile(values, 50)
    np.linalg.solve(np.eye(2), np.ones(2)), np.round(np.array([1.25]), 1)
    str(np.float64(1.5)), float(np.float64(1.5)), values.tolist()


def _warm_sympy() -> None:
    import sympy

    x = sympy.Symbol("x")
    sympy.solve(3 * x + 2 - sympy.Rational(1, 3), x)
    sympy.simplify((x**2 - 1) / (x - 1)), sympy.expand((x + 1) ** 3), sympy.factor(x**2 - 1)
    float(sympy.sqrt(2)), sympy.N(sympy.pi, 20), sympy.Rational(3, 4) + 1


def _warm_pandas() -> None:
    pd: Any = importlib.import_module("pandas")  # (no stubs: its types are not potrun's to check)

    frame = pd.DataFrame({"a": [1, 2, 3], "b": [4.0, 5.5, 6.0]})
    frame["c"] = (frame["b"] - frame["a"]) / frame["b"]
    float(frame["c"].mean()), frame.groupby("a").sum(), frame.describe(), frame.sort_values("b")
    frame.iloc[0], frame.loc[frame["a"] > 1, "b"].sum(), str(frame)


@dataclass
class Template:
    modules: Profile
    server: ForkServer
    charge: int  # bytes the worker's memory cgroup grew by while it was made...
    anonymous: int  # ...of them anonymous


def templates_allowed(memory: MemoryCgroup | None) -> bool:
    """Whether a worker with this memory cgroup may hold templates (`Templates.__init__` says why):
    only there does its fork server hold the placeholders of their slots (`ForkServer.start`)."""
    return memory is None or memory.owned


class Templates:
    """The worker's templates, least recently used first; the bare fork server makes and ends them."""

    def __init__(self, bare: ForkServer, memory: MemoryCgroup | None) -> None:
        self.bare = bare
        self.memory = memory
        # Only where the worker sets its memory cgroup's limit before each fork (the program's limit above
        # what the worker and its templates hold). A container's limit is fixed when it starts: room
        # left there for templates would be room for a program's memfds and children whenever no
        # template fills it, so in a container every program forks from the bare fork server.
        self.enabled = templates_allowed(memory)
        self._live: OrderedDict[Profile, Template] = OrderedDict()
        self._failed: dict[Profile, float] = {}  # when a profile's template last failed to come up

    def server_for(self, modules: Profile, memory_mb: int, wall_s: float) -> ForkServer:
        """The server a program of this profile forks from: its template (made now, if need be), or the
        bare fork server. Asked with no program alive in the worker (no fork; the warm runner idle)."""
        if not modules.modules or not self.enabled:
            return self.bare
        live = self._live.get(modules)
        if live is not None:
            self._live.move_to_end(modules)
            return live.server
        failed = self._failed.get(modules)
        if failed is not None and time.monotonic() - failed < TEMPLATE_RETRY_S:
            return self.bare
        template = self._make(modules, memory_mb, min(TEMPLATE_START_S, wall_s / 2))
        if template is None:
            self._failed[modules] = time.monotonic()
            return self.bare
        self._live[modules] = template
        self._shrink()
        while self._live and self.bare.settle() > 0:  # too many tasks: the least recently used goes
            self.end(next(iter(self._live.values())))
        return template.server if modules in self._live else self.bare

    def _make(self, modules: Profile, memory_mb: int, timeout_s: float) -> Template | None:
        before = self._usage()
        if self.memory is not None:  # room for the import, outside the last program's limit
            self.memory.set_limit(memory_mb + TEMPLATE_BUDGET_MB)
        server = self.bare.start_template(list(modules.modules), modules.restricted, timeout_s)
        if server is None:
            return None
        after = self._usage()
        template = Template(modules, server, max(0, after[0] - before[0]), max(0, after[1] - before[1]))
        if self.memory is not None:
            self.memory.baseline += template.charge  # the worker's share, not a program's
            self.memory.anonymous_baseline += template.anonymous
        return template

    def _usage(self) -> tuple[int, int]:
        if self.memory is None:
            return 0, 0
        try:
            return self.memory.usage(), self.memory.anonymous()
        except (OSError, ValueError):
            return 0, 0

    def _shrink(self) -> None:
        """End the least recently used templates while there are too many, or they hold too much."""
        while self._live and (
            len(self._live) > MAX_TEMPLATES
            or sum(template.charge for template in self._live.values()) > TEMPLATE_BUDGET_MB << 20
        ):
            self.end(next(iter(self._live.values())))

    def drop(self, server: ForkServer) -> None:
        """A template that failed a fork (it died): end what is left of it; its profile is retried later."""
        for template in list(self._live.values()):
            if template.server is server:
                self._failed[template.modules] = time.monotonic()
                self.end(template)

    def end(self, template: Template) -> None:
        self._live.pop(template.modules, None)
        try:
            self.bare.end_template(template.server)
            self.bare.settle()  # its slots, held again
        except (ConnectionError, OSError):
            pass  # the fork server is gone: the worker is ending, and the template with it
        if self.memory is not None:
            self.memory.baseline = max(0, self.memory.baseline - template.charge)
            self.memory.anonymous_baseline = max(0, self.memory.anonymous_baseline - template.anonymous)

    def pids(self) -> list[int]:
        return [template.server.pid for template in self._live.values()]

    def close(self) -> None:
        for template in list(self._live.values()):
            self.end(template)

    def describe(self) -> list[dict[str, Any]]:
        """The live templates, least recently used first (for `hello` and the tests)."""
        return [
            {
                "modules": list(t.modules.modules),
                "restricted": t.modules.restricted,
                "pid": t.server.pid,
                "charge_mb": round(t.charge / 2**20, 1),
            }
            for t in self._live.values()
        ]
