"""Templates (issue 41): a forked program forks from a copy of the fork server that holds what it imports.

The invariants, on generated programs (seeded) of each class: a program's status and value are the same
from every template (its own, larger ones, the bare fork server) and from a fresh interpreter; a
template never outlives the worker; a template's memory is not the program's (a program's memory limit
holds the same from the pandas template as from the bare fork server); a template never holds a
program's state (a program that changes a library's module state: the next program of the same
template sees the library as it was).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from potrun import ExecResult, Limits, Sandbox, Status
from potrun.policies import get_policy
from potrun.sandbox.inside.templates import (
    MAX_TEMPLATES,
    TEMPLATE_MODULES,
    TEMPLATE_TASKS,
    Profile,
    imported_names,
    profile,
)
from tests.conftest import Proc, describe, process_table, same_value, worker_host_pid

# ------------------------------------------------------------------------------------ generated programs


def plain_program(rng: random.Random) -> str:
    a, b, c = rng.randint(1, 900), rng.randint(0, 40), rng.randint(2, 30)
    divisor = rng.choice([c, c, c, 0])  # now and then a ZeroDivisionError: the status must match too
    return (
        f"total = 0\nfor i in range({b}):\n    total += i * {a} % {c}\nans = round(total / {divisor} + {a} ** 0.5, 6)\n"
    )


def class_program(rng: random.Random) -> str:
    a, rate, years = rng.randint(100, 5000), rng.randint(1, 25), rng.randint(1, 12)
    day, month = rng.randint(1, 28), rng.randint(1, 12)
    return (
        "from decimal import Decimal, getcontext\n"
        "from datetime import date\n"
        "getcontext().prec = 30\n"
        "class Account:\n"
        "    def __init__(self, balance):\n"
        "        self.balance = Decimal(balance)\n"
        "    def grow(self, rate, years):\n"
        "        for _ in range(years):\n"
        "            self.balance = self.balance * (1 + Decimal(rate) / 100)\n"
        "        return self.balance\n"
        f"days = (date(2024, {month}, {day}) - date(2023, 1, 1)).days\n"
        f"ans = [float(round(Account({a}).grow({rate}, {years}), 4)), days]\n"
    )


def numpy_program(rng: random.Random) -> str:
    seed, size, n = rng.randint(0, 10**6), rng.randint(5, 200), rng.randint(2, 4)
    singular = rng.random() < 0.2  # numpy.linalg.LinAlgError now and then
    matrix = "np.ones((n, n))" if singular else "np.eye(n) * 3 + generator.random((n, n))"
    return (
        "import numpy as np\n"
        f"generator = np.random.default_rng({seed})\n"
        f"values = np.sort(generator.integers(1, 1000, size={size}))\n"
        f"n = {n}\n"
        f"solution = np.linalg.solve({matrix}, np.arange(n, dtype=float))\n"
        "ans = [float(np.median(values) + values[-1]), round(float(solution.sum()), 9)]\n"
    )


def sympy_program(rng: random.Random) -> str:
    a, b, c = rng.randint(1, 50), rng.randint(-200, 200), rng.randint(2, 40)
    index = rng.choice([0, 0, 0, 3])  # an IndexError now and then
    return (
        "from sympy import Rational, expand, solve, symbols\n"
        "x = symbols('x')\n"
        f"roots = solve(x**2 - {a} * x + {b} - Rational({b}, {c}), x)\n"
        f"ans = [str(expand((x + {c}) ** 3)), float(sorted(roots, key=lambda r: float(r.evalf()))[{index}].evalf())]\n"
    )


def pandas_program(rng: random.Random) -> str:
    rows = rng.randint(3, 12)
    revenue = [rng.randint(100, 9000) for _ in range(rows)]
    cost = [rng.randint(50, 5000) for _ in range(rows)]
    column = rng.choice(["cost", "cost", "cost", "costs"])  # a KeyError now and then
    return (
        "import pandas as pd\n"
        f"df = pd.DataFrame({{'revenue': {revenue}, 'cost': {cost}}})\n"
        f"df['margin'] = (df['revenue'] - df['{column}']) / df['revenue']\n"
        "ans = [round(float(df['margin'].mean() * 100), 6), int(df.sort_values('cost').index[0])]\n"
    )


# class name -> (its programs' maker, the policies it runs under)
CLASSES: dict[str, tuple[Callable[[random.Random], str], tuple[str, ...]]] = {
    "plain": (plain_program, ("restricted", "trusted")),
    "class": (class_program, ("restricted", "trusted")),
    "numpy": (numpy_program, ("restricted", "trusted")),
    "sympy": (sympy_program, ("restricted", "trusted")),
    "pandas": (pandas_program, ("trusted",)),
}
PROGRAMS_PER_CLASS = 6


def with_dead_import(source: str, modules: tuple[str, ...]) -> str:
    """The program, and a function it never calls that imports `modules`: it forks from their template,
    and computes what it did before."""
    if not modules:
        return source
    return source + "\n\ndef never_called():\n" + "".join(f"    import {name}\n" for name in modules)


# Profiles each program is also run from (by its dead imports): the bare fork server and the templates.
EXTRA_PROFILES = {
    "restricted": [(), ("numpy",), ("sympy",), ("numpy", "sympy")],
    "trusted": [(), ("numpy",), ("sympy",), ("pandas",), ("pandas", "sympy")],
}

FRESH_RUNNER = """
import json, sys
from potrun.sandbox.wire import values
namespace = {"__name__": "__main__"}
try:
    exec(compile(sys.stdin.read(), "<program>", "exec"), namespace)
    print(json.dumps({"status": "ok", "value": values.to_plain(namespace["ans"])}))
except Exception as exc:
    print(json.dumps({"status": "error", "error_type": type(exc).__name__}))
"""


def fresh_interpreter(source: str) -> dict[str, object]:
    """The program run by a fresh `python`, the sandbox's hash seed, nothing else loaded ahead."""
    done = subprocess.run(
        [sys.executable, "-c", FRESH_RUNNER],
        input=source,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"},
        timeout=120,
        check=True,
    )
    outcome: dict[str, object] = json.loads(done.stdout)
    return outcome


def agrees(result: ExecResult, fresh: dict[str, object]) -> bool:
    if fresh["status"] == "ok":
        return result.status is Status.OK and same_value(result.value, fresh["value"])
    return result.status is Status.ERROR and result.error_type == fresh["error_type"]


def generated(name: str, seed: int = 41) -> list[str]:
    make = CLASSES[name][0]
    rng = random.Random(f"{name}:{seed}")
    return [make(rng) for _ in range(PROGRAMS_PER_CLASS)]


@pytest.fixture(scope="session")
def fresh_outcomes(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], dict[str, object]]:
    """`fresh_interpreter`, each program's outcome kept for the run: the backends' tests share it (a fresh
    `python` that imports sympy or pandas costs ~1 s a program). On disk, where xdist's workers of one
    run all look (their base temp's parent, under the run's id); one file per program, renamed into place."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent / f"fresh-{run}") if run else (base / "fresh")
    folder.mkdir(parents=True, exist_ok=True)

    def outcome(source: str) -> dict[str, object]:
        path = folder / f"{hashlib.sha256(source.encode()).hexdigest()}.json"
        if path.exists():
            kept: dict[str, object] = json.loads(path.read_text())
            return kept
        made = fresh_interpreter(source)
        partial = path.with_suffix(f".{os.getpid()}.part")
        partial.write_text(json.dumps(made))
        partial.replace(path)
        return made

    return outcome


@pytest.mark.parametrize("policy", ["restricted", "trusted"])
def test_a_program_gives_the_same_from_every_template_and_from_a_fresh_interpreter(
    policy: str, backend: str, fresh_outcomes: Callable[[str], dict[str, object]]
) -> None:
    programs = [source for name, (_, policies) in CLASSES.items() if policy in policies for source in generated(name)]
    fresh = [fresh_outcomes(source) for source in programs]
    assert {outcome["status"] for outcome in fresh} == {"ok", "error"}, "the programs should include failures"
    with Sandbox(backend, policy=policy, isolation="fork", workers=1, timeout=30, memory_mb=1024) as box:
        # None: the program as it is, from its own template. A container holds no templates (every program
        # forks bare there): the other profiles would run the same forks again.
        profiles = [None, *EXTRA_PROFILES[policy]] if backend == "process" else [None]
        for modules in profiles:
            sources = programs if modules is None else [with_dead_import(p, modules) for p in programs]
            results = list(box.run_many(sources))
            for source, result, expected in zip(sources, results, fresh, strict=True):
                assert agrees(result, expected), f"{modules}: {describe(result)} != {expected}\n{source}"


# ------------------------------------------------------------------------------------ reading the profile


def code_of(source: str) -> object:
    return compile(source, "<program>", "exec")


RESTRICTED, TRUSTED = get_policy("restricted"), get_policy("trusted")
NUMPY = tuple(sorted(TEMPLATE_MODULES["numpy"]))


@pytest.mark.parametrize(
    ("source", "policy", "expected"),
    [
        ("ans = 1 + 1", RESTRICTED, ()),
        ("import math\nans = math.pi", TRUSTED, ()),
        ("class numpy:\n    pass\nans = numpy", TRUSTED, ()),  # a name, not an import
        ("import numpy.linalg as la\nans = 1", RESTRICTED, NUMPY),
        ("from sympy.abc import x\nans = 1", RESTRICTED, ("sympy",)),
        ("def f():\n    import sympy\nans = 1", RESTRICTED, ("sympy",)),  # never called: still read
        ("class A:\n    def f(self):\n        return [__import__ for _ in ()]\n", TRUSTED, ()),
        ("ans = [x for x in (lambda: __import__('numpy'))()]", TRUSTED, ()),  # dynamic: the fork imports it
        ("import pandas\nans = 1", RESTRICTED, ()),  # refused by the policy: no template for it
        ("import pandas\nans = 1", TRUSTED, tuple(sorted((*NUMPY, "pandas")))),
        ("import pandas, sympy, numpy\nans = 1", TRUSTED, tuple(sorted((*NUMPY, "pandas", "sympy")))),
        ("def g():\n    def h():\n        from numpy import fft\n    return h\n", RESTRICTED, NUMPY),
    ],
)
def test_the_profile_is_read_from_the_compiled_code(source: str, policy: object, expected: tuple[str, ...]) -> None:
    restricted = policy is RESTRICTED and "sympy" in expected  # sympy's hatches closed: restricted programs only
    assert profile(code_of(source), policy) == Profile(expected, restricted)  # type: ignore[arg-type]


def test_an_import_past_256_names_is_read_too() -> None:
    """IMPORT_NAME's argument past 255 takes an EXTENDED_ARG prefix."""
    rng = random.Random(7)
    names = "".join(f"v{i}_{rng.randint(0, 9)} = {i}\n" for i in range(300))
    code = code_of(names + "import sympy\nans = 1")
    assert "sympy" in imported_names(code)  # type: ignore[arg-type]
    assert profile(code, RESTRICTED) == Profile(("sympy",), restricted=True)  # type: ignore[arg-type]
    assert profile(code, TRUSTED) == Profile(("sympy",))  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------ the process tree


def descendants(root: int, table: dict[int, Proc]) -> dict[int, int]:
    """pid -> depth below `root`, for every live process below it."""
    children: dict[int, list[int]] = {}
    for proc in table.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    found, stack = {}, [(root, 0)]
    while stack:
        pid, depth = stack.pop()
        for child in children.get(pid, ()):
            if table[child].alive:
                found[child] = depth + 1
                stack.append((child, depth + 1))
    return found


HEAVY_PROGRAMS = [
    "import numpy as np\nans = int(np.arange(4).sum())",
    "import sympy\nans = int(sympy.Integer(6))",
    "import pandas as pd\nans = int(pd.Series([1, 2, 3]).sum())",
]


def address_space(pid: int) -> int:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[0])


def templates_of(root: int) -> tuple[set[int], int]:
    """The templates below a worker root, and their parent, the fork server. The fork server's children
    are the deepest processes below the root (no program runs now): its templates, and the placeholders
    that hold the template slots no template's task holds (TEMPLATE_TASKS tasks in all), copies of the
    fork server of its size, where a template maps more (its modules)."""
    below = descendants(root, process_table())
    deepest = max(below.values())
    children = {pid for pid, depth in below.items() if depth == deepest}
    table = process_table()
    parents = {table[pid].ppid for pid in children if pid in table}
    assert len(parents) == 1, f"templates with several parents: {parents}"
    tasks = sum(len(os.listdir(f"/proc/{pid}/task")) for pid in children)
    assert tasks == TEMPLATE_TASKS, f"the template slots: {children} hold {tasks} tasks"
    fork_server = parents.pop()
    return {pid for pid in children if address_space(pid) > address_space(fork_server)}, fork_server


def wait_gone(pids: set[int], seconds: float = 10.0) -> set[int]:
    deadline = time.monotonic() + seconds
    while True:
        table = process_table()
        alive = {pid for pid in pids if pid in table and table[pid].alive}
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


@pytest.mark.parametrize("victim", ["worker", "fork_server"])
def test_templates_never_outlive_the_worker(victim: str, backend: str) -> None:
    """Templates are made (one per profile), then the worker's root (or the fork server, their parent)
    is SIGKILLed: no template process remains."""
    if backend != "process" and victim == "fork_server":
        pytest.skip("the fork server's pid inside a container is not the host's to signal here")
    box = Sandbox(backend, policy="trusted", isolation="fork", workers=1, timeout=30, memory_mb=1024)
    try:
        results = list(box.run_many(HEAVY_PROGRAMS))
        assert [r.value for r in results] == [6, 6, 6], [describe(r) for r in results]
        assert box._pool is not None
        root = worker_host_pid(box._pool.slots[0].conn)
        if backend == "process":
            templates, fork_server = templates_of(root)
            assert len(templates) == len(HEAVY_PROGRAMS) <= MAX_TEMPLATES, templates
        else:  # a container holds no template, nor placeholders of their slots: only its fork server below
            below = descendants(root, process_table())
            assert list(below.values()) == [1], f"below the container's worker: {below}"
            templates, fork_server = set(), -1
        everything = set(descendants(root, process_table()))
        os.kill(root if victim == "worker" else fork_server, signal.SIGKILL)
        left = wait_gone(templates if victim == "fork_server" else everything)
        assert not left, f"alive after the {victim} was killed: {left}"
    finally:
        box.close()


def test_templates_are_bounded_and_the_least_recently_used_goes_first() -> None:
    """More profiles than MAX_TEMPLATES: never more templates than that; the profile used last keeps its."""
    profiles = ["numpy", "sympy", "pandas", "pandas, sympy", "numpy"]
    programs = [f"import {modules}\nans = 1" for modules in profiles]
    with Sandbox(policy="trusted", isolation="fork", workers=1, timeout=30, memory_mb=1024) as box:
        assert box._pool is not None
        root = worker_host_pid(box._pool.slots[0].conn)
        counts = []
        for program in programs:
            assert box.run(program).status is Status.OK
            counts.append(len(templates_of(root)[0]))
        numpy_parent = box.run("import os, numpy\nans = os.getppid()").value
        again = box.run("import os, numpy\nans = os.getppid()").value
    assert max(counts) <= MAX_TEMPLATES, counts
    assert counts == [1, 2, 3, 3, 3], counts
    assert numpy_parent == again  # the numpy template, kept: it was used last


# ------------------------------------------------------------------------------------ memory


MEMORY_MB = 400
ALLOCATE = "{imports}block = b'x' * {size}\nans = len(block)"


@pytest.mark.parametrize(
    ("imports", "policy"),
    [
        ("", "restricted"),
        ("import sympy\n", "restricted"),
        ("import numpy\n", "trusted"),
        ("import pandas\n", "trusted"),
    ],
)
def test_a_programs_memory_limit_is_its_own_memory_from_any_template(imports: str, policy: str, backend: str) -> None:
    """Just under the limit succeeds, just over is memory_limit, whatever the template holds (pandas
    maps ~370 MB of address space and ~100 MB resident that are not the program's)."""
    if backend != "process":
        pytest.skip("no templates in a container (Templates.enabled): a program's imports are its own memory there")
    under, over = int(0.85 * MEMORY_MB) << 20, int(1.15 * MEMORY_MB) << 20
    programs = [ALLOCATE.format(imports=imports, size=size) for size in (under, over, under)]
    with Sandbox(backend, policy=policy, isolation="fork", workers=1, timeout=30, memory_mb=MEMORY_MB) as box:
        first, second, third = box.run_many(programs)
    assert first.status is Status.OK and first.value == under, describe(first)
    assert second.status is Status.MEMORY_LIMIT, describe(second)
    assert third.status is Status.OK and third.value == under, describe(third)


# ------------------------------------------------------------------------------------ state


# module -> (a program that changes the library's module state, one that reads it back)
MUTATIONS = {
    "numpy": (
        "import numpy as np\nnp.set_printoptions(precision=2)\nnp.potrun_mark = 1\nnp.pi = 3.0\nans = 1",
        "import os, numpy as np\nans = [np.get_printoptions()['precision'], hasattr(np, 'potrun_mark'), np.pi > 3.1, os.getppid()]",
        [8, False, True],
    ),
    "sympy": (
        "import sympy\nfrom sympy.core.parameters import global_parameters\nglobal_parameters.evaluate = False\n"
        "sympy.potrun_mark = 1\nsympy.S.potrun_mark = 2\nans = 1",
        "import os, sympy\nfrom sympy.core.parameters import global_parameters\n"
        "ans = [global_parameters.evaluate, hasattr(sympy, 'potrun_mark'), str(sympy.Integer(2) + 3), os.getppid()]",
        [True, False, "5"],
    ),
    "pandas": (
        "import pandas as pd\npd.set_option('display.max_rows', 7)\npd.potrun_mark = 1\n"
        "pd.DataFrame.potrun_mark = 2\nans = 1",
        "import os, pandas as pd\n"
        "ans = [pd.get_option('display.max_rows'), hasattr(pd, 'potrun_mark'), hasattr(pd.DataFrame, 'potrun_mark'), os.getppid()]",
        [60, False, False],
    ),
}


@pytest.mark.parametrize("module", sorted(MUTATIONS))
def test_a_template_never_holds_a_programs_state(module: str, backend: str) -> None:
    """A program that changes a library's module state, then the next program of the same template
    (the same parent): it sees the library as the template made it."""
    change, read, expected = MUTATIONS[module]
    with Sandbox(backend, policy="trusted", isolation="fork", workers=1, timeout=30, memory_mb=1024) as box:
        results = list(box.run_many([read, change, read, change, read]))
        fork_server = box._pool.slots[0].hello.fork_server_pid if box._pool is not None else None
    for result in results:
        assert result.status is Status.OK, describe(result)
    reads = [results[0], results[2], results[4]]
    for result in reads:
        assert result.value[:3] == expected, describe(result)
    parents = {result.value[3] for result in reads}
    if backend == "process":
        assert len(parents) == 1 and fork_server not in parents, (parents, fork_server)  # one template, not bare
    else:  # a container makes no templates (Templates.enabled): each program forks bare, and imports afresh
        assert parents == {fork_server}, (parents, fork_server)


PARSES = "from sympy.parsing.sympy_parser import parse_expr\nans = int(parse_expr('1 + 2'))"


def test_a_trusted_program_never_forks_from_a_template_prepared_for_restricted_ones() -> None:
    """A template for restricted sympy programs closes sympy's escape hatches once, for all its forks:
    a trusted sympy program in the same worker forks from a template of its own, hatches open."""
    with Sandbox(policy="restricted", isolation="fork", workers=1, timeout=30, memory_mb=1024) as box:
        restricted = [box.request("import sympy\nans = int(sympy.Integer(4))"), box.request(PARSES)]
        trusted = dataclasses.replace(box.request(PARSES), policy="trusted")
        first, parsed, refused, parsed_again = box.run_requests([restricted[0], trusted, restricted[1], trusted])
    assert first is not None and first.value == 4, first
    assert parsed is not None and parsed.status is Status.OK and parsed.value == 3, describe(parsed)
    assert refused is not None and refused.status is Status.POLICY_VIOLATION, describe(refused)
    assert parsed_again is not None and parsed_again.value == 3, describe(parsed_again)


FORK_BOMB = (
    "import os\npids = []\ntry:\n    for i in range(500):\n        pid = os.fork()\n        if pid == 0:\n"
    "            import time; time.sleep(2); os._exit(0)\n        pids.append(pid)\n    ans = 'unbounded'\n"
    "except OSError:\n    ans = len(pids)"
)


def test_a_programs_process_limit_does_not_depend_on_the_templates_alive(backend: str) -> None:
    """Each template slot is held by a template or a placeholder: a program gets as many processes with
    no template alive as with MAX_TEMPLATES, and no more than its limit."""
    with Sandbox(backend, policy="trusted", isolation="fork", workers=1, timeout=30, memory_mb=1024) as box:
        before = box.run(FORK_BOMB)
        assert [r.value for r in box.run_many(HEAVY_PROGRAMS)] == [6, 6, 6]
        after = box.run(FORK_BOMB)
    assert isinstance(before.value, int) and before.value == after.value, (describe(before), describe(after))
    assert before.value <= Limits().max_processes, describe(before)
