"""Speed by program class (issue 41): potrun against plain exec and the class's fork floor, in one run.

    python bench/fork_classes.py [--programs 300] [--rounds 3] [--classes class,numpy,sympy,pandas]

For each class of program (generated, seeded, varied: no two programs alike, so no cache helps):

- `class`: a program-defined class, nothing heavy (the fork tier: the verifier admits no class);
- `numpy`: numpy that the verifier does not prove pure (a seeded `np.random` Generator);
- `sympy`: `solve` and `Rational`;
- `pandas`: a DataFrame, under the trusted policy (DocMath-Eval's default; restricted refuses pandas),

it measures, rounds alternating, the median of the rounds:

- **potrun**: `Sandbox(workers=2)` (the class's policy, 10 s / 1 GB limits), `run_many` over the class's
  programs, after a warm-up batch (the pool started, its templates made); the tiers the results name;
- **exec**: plain `exec(compile(...))` of the same programs in this process, one core, modules imported;
- **fork floor**: two processes that already hold the class's modules run the programs fork-per-program
  with no isolation at all: fork, the child runs the program (the cold caches a fresh fork has) and
  exits, the parent waits. What any fork-per-program design pays on this machine.

Prints the table class x (potrun, exec, fork floor, potrun/exec, potrun/floor, tiers) and, with --json,
the same as JSON. Every program's value from potrun is checked against exec's (a mismatch is printed).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

LIMITS = {"timeout": 10.0, "memory_mb": 1024}


@dataclass(frozen=True)
class ProgramClass:
    name: str
    modules: tuple[str, ...]  # what the fork floor's processes import before forking
    policy: str
    make: Callable[[random.Random], str]


def _class_program(rng: random.Random) -> str:
    a, b, c = rng.randint(2, 500), rng.randint(2, 500), rng.randint(2, 9)
    return (
        "class Account:\n"
        "    def __init__(self, balance):\n"
        "        self.balance = balance\n"
        "    def grow(self, rate, years):\n"
        "        for _ in range(years):\n"
        "            self.balance = self.balance * (1 + rate / 100)\n"
        "        return self.balance\n"
        f"ans = round(Account({a}).grow({b} / 100, {c}), 4)\n"
    )


def _numpy_program(rng: random.Random) -> str:
    seed, size = rng.randint(0, 10**6), rng.randint(5, 300)
    return (  # a Generator holds state: the verifier does not prove it pure, so it forks
        "import numpy as np\n"
        f"generator = np.random.default_rng({seed})\n"
        f"values = np.sort(generator.integers(1, 1000, size={size}))\n"
        "ans = float(np.median(values) + values[-1])\n"
    )


def _sympy_program(rng: random.Random) -> str:
    a, b, c = rng.randint(1, 50), rng.randint(-200, 200), rng.randint(2, 40)
    return (
        "from sympy import Rational, solve, symbols\n"
        "x = symbols('x')\n"
        f"root = solve({a} * x + {b} - Rational({b}, {c}), x)[0]\n"
        "ans = float(root)\n"
    )


def _pandas_program(rng: random.Random) -> str:
    rows = rng.randint(3, 12)
    revenue = [rng.randint(100, 9000) for _ in range(rows)]
    cost = [rng.randint(50, 5000) for _ in range(rows)]
    return (
        "import pandas as pd\n"
        f"df = pd.DataFrame({{'revenue': {revenue}, 'cost': {cost}}})\n"
        "df['margin'] = (df['revenue'] - df['cost']) / df['revenue']\n"
        "ans = round(float(df['margin'].mean() * 100), 4)\n"
    )


CLASSES = {
    "class": ProgramClass("class", (), "restricted", _class_program),
    "numpy": ProgramClass("numpy", ("numpy",), "restricted", _numpy_program),
    "sympy": ProgramClass("sympy", ("sympy",), "restricted", _sympy_program),
    "pandas": ProgramClass("pandas", ("pandas",), "trusted", _pandas_program),
}


def run_exec(programs: list[str]) -> tuple[float, list[object]]:
    """Plain in-process exec, one core: programs per second, and each program's `ans`."""
    values: list[object] = []
    started = time.perf_counter()
    for source in programs:
        namespace: dict[str, object] = {"__name__": "__main__"}
        exec(compile(source, "<program>", "exec"), namespace)
        values.append(namespace.get("ans"))
    return len(programs) / (time.perf_counter() - started), values


def _fork_each(programs: list[str], modules: tuple[str, ...], ready: object, go: object) -> None:
    for module in modules:
        __import__(module)
    ready.set()  # type: ignore[attr-defined]
    go.wait()  # type: ignore[attr-defined]
    for source in programs:
        pid = os.fork()
        if pid == 0:
            try:
                exec(compile(source, "<program>", "exec"), {"__name__": "__main__"})
            finally:
                os._exit(0)
        os.waitpid(pid, 0)


def run_fork_floor(programs: list[str], modules: tuple[str, ...]) -> float:
    """Two processes holding `modules`, fork-per-program, no isolation: programs per second."""
    context = multiprocessing.get_context("fork")
    go = context.Event()
    halves = [programs[0::2], programs[1::2]]
    readies = [context.Event() for _ in halves]
    processes = [
        context.Process(target=_fork_each, args=(half, modules, ready, go))
        for half, ready in zip(halves, readies, strict=True)
    ]
    for process in processes:
        process.start()
    for ready in readies:
        ready.wait()
    started = time.perf_counter()
    go.set()
    for process in processes:
        process.join()
    return len(programs) / (time.perf_counter() - started)


def run_potrun(box: object, programs: list[str]) -> tuple[float, list[object], dict[str, int]]:
    """potrun's `run_many` over the programs: programs per second, values, and tiers used."""
    started = time.perf_counter()
    results = list(box.run_many(programs))  # type: ignore[attr-defined]
    rate = len(programs) / (time.perf_counter() - started)
    tiers: dict[str, int] = {}
    for result in results:
        key = f"{result.isolation or '-'}:{result.status.value}"
        tiers[key] = tiers.get(key, 0) + 1
    return rate, [result.value for result in results], tiers


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9) or (math.isnan(a) and math.isnan(b))
    return a == b


def measure(kind: ProgramClass, count: int, rounds: int, seed: int) -> dict[str, object]:
    from potrun import Sandbox

    rng = random.Random(f"{kind.name}:{seed}")
    batches = [[kind.make(rng) for _ in range(count)] for _ in range(rounds)]
    warmup = [kind.make(rng) for _ in range(20)]
    for module in kind.modules:
        __import__(module)
    rates: dict[str, list[float]] = {"potrun": [], "exec": [], "floor": []}
    tiers: dict[str, int] = {}
    mismatches = 0
    with Sandbox(policy=kind.policy, workers=2, **LIMITS) as box:  # type: ignore[arg-type]
        list(box.run_many(warmup))
        for batch in batches:
            rate, values, used = run_potrun(box, batch)
            rates["potrun"].append(rate)
            for key, n in used.items():
                tiers[key] = tiers.get(key, 0) + n
            exec_rate, expected = run_exec(batch)
            rates["exec"].append(exec_rate)
            mismatches += sum(not _same(got, want) for got, want in zip(values, expected, strict=True))
            rates["floor"].append(run_fork_floor(batch, kind.modules))
    medians = {name: statistics.median(values) for name, values in rates.items()}
    return {
        "class": kind.name,
        "policy": kind.policy,
        "programs": count,
        "rounds": rounds,
        "potrun_per_s": round(medians["potrun"], 1),
        "exec_per_s": round(medians["exec"], 1),
        "fork_floor_per_s": round(medians["floor"], 1),
        "potrun_over_exec": round(medians["potrun"] / medians["exec"], 4),
        "potrun_over_floor": round(medians["potrun"] / medians["floor"], 3),
        "tiers": tiers,
        "value_mismatches": mismatches,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", type=int, default=300, help="programs per class and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--classes", default=",".join(CLASSES), help="comma-separated: " + ", ".join(CLASSES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [measure(CLASSES[name], args.programs, args.rounds, args.seed) for name in args.classes.split(",")]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{os.cpu_count()} cores; {args.programs} programs x {args.rounds} rounds per class, medians")
    print(f"{'class':8} {'potrun/s':>10} {'exec/s':>10} {'floor/s':>10} {'/exec':>8} {'/floor':>7}  tiers")
    for row in rows:
        print(
            f"{row['class']:8} {row['potrun_per_s']:>10,} {row['exec_per_s']:>10,} {row['fork_floor_per_s']:>10,} "
            f"{row['potrun_over_exec']:>8} {row['potrun_over_floor']:>7}  {row['tiers']}"
            + (f"  VALUE MISMATCHES: {row['value_mismatches']}" if row["value_mismatches"] else "")
        )


if __name__ == "__main__":
    main()
