"""Which template a program forks from, read before it runs: from its compiled code (Python 3.11) or,
where the worker compiles nothing (3.12+: runner.COMPILE_AHEAD), from its source's import lines. Both
readings must pick the same template for the programs models write (generated, seeded)."""

from __future__ import annotations

import random

import pytest

from potrun.policies import get_policy
from potrun.sandbox.inside.templates import BARE, profile, source_imports

IMPORTS = [
    "import numpy as np",
    "import sympy",
    "from sympy import Rational, solve",
    "import pandas as pd",
    "from numpy.linalg import inv",
    "import math, sympy as sp",
    "from decimal import Decimal",
    "import datetime",
]
BODIES = ["x = 1", "def solution():\n    return 6 * 7", "class A:\n    pass", "ans = sum(range(10))"]


def generated_programs(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    programs = []
    for _ in range(count):
        lines = rng.sample(IMPORTS, rng.randint(0, 3)) + rng.sample(BODIES, rng.randint(1, 3))
        rng.shuffle(lines)
        if rng.random() < 0.3:  # imports inside a function are imports too
            lines = ["def f():\n    " + line.replace("\n", "\n    ") for line in lines]
        programs.append("\n".join(lines))
    return programs


@pytest.mark.parametrize("policy", ["restricted", "trusted"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_source_and_code_pick_the_same_template(policy: str, seed: int) -> None:
    spec = get_policy(policy)
    for source in generated_programs(seed, 60):
        from_code = profile(compile(source, "<program>", "exec"), spec)
        assert profile(None, spec, source) == from_code, source


def test_the_import_lines_read() -> None:
    assert source_imports("import numpy as np, sympy\nfrom pandas.core import x\nx = 1; import math\n") == {
        "numpy",
        "sympy",
        "pandas.core",
        "math",
    }
    # a name that starts with "import", and an import statement's text inside a string, are no imports
    assert source_imports("important = 3\nfromage = 'import sympy'") == set()


def test_no_source_and_no_code_is_the_bare_fork_server() -> None:
    assert profile(None, get_policy("trusted")) == BARE
