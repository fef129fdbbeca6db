"""A warning raised in C with a program's frame on top (numpy's `divide by zero encountered in log`) is
shown on the program's stderr and changes nothing else, on every Python, policy and tier.

CPython 3.13's C warnings code imports `warnings` to show such a warning, through the `__import__` of
the frame on top: the program's. Under the restricted policy that import was refused, so `np.log(0.0)`
became a policy violation on 3.13 in the fork tier (an everyday program refused: a wrong reward), where
3.11 showed the warning. The import is a library's own (policies/restricted.py, IMPLICIT_IMPORTS): the
module goes to the C code, never to the program.

Programs are generated from a seed: numpy operations that warn (log, divide, sqrt, power, arccos on
edge values) mixed with plain arithmetic; each result must equal plain numpy's, computed here.
"""

from __future__ import annotations

import math
import random
import warnings
from typing import Any

import numpy as np
import pytest

from potrun import Sandbox

SEED = 20261207
COUNT = 24

# (template, how to compute it here): each warns from C for the edge values it is given.
OPERATIONS = [
    ("float(np.log({x}))", lambda x: float(np.log(x))),
    ("float(np.log10({x}))", lambda x: float(np.log10(x))),
    ("(np.array([{x}, 1.0]) / {x}).tolist()", lambda x: (np.array([x, 1.0]) / x).tolist()),
    ("float(np.sqrt({x}))", lambda x: float(np.sqrt(x))),
    ("float(np.arccos({x}))", lambda x: float(np.arccos(x))),
    ("float(np.float64({x}) ** 400)", lambda x: float(np.float64(x) ** 400)),
]
EDGE_VALUES = [0.0, -1.0, -2.5, 2.0, 1e300, -0.0]


def generated_programs(seed: int, count: int) -> list[tuple[str, Any]]:
    """(program, expected value) pairs: an operation on an edge value, then plain arithmetic."""
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        template, compute = rng.choice(OPERATIONS)
        x = rng.choice(EDGE_VALUES)
        k = rng.randint(1, 9)
        with warnings.catch_warnings(), np.errstate(all="warn"):
            warnings.simplefilter("ignore")
            expected = [compute(x), k * 3]
        source = f"import numpy as np\nv = {template.format(x=repr(x))}\nans = [v, {k} * 3]"
        cases.append((source, expected))
    return cases


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@pytest.mark.parametrize("isolation", ["warm", "fork"])
@pytest.mark.parametrize("policy", ["restricted", "trusted"])
def test_warnings_raised_in_c_are_shown_and_change_nothing(policy: str, isolation: str, backend: str) -> None:
    cases = generated_programs(SEED, COUNT)
    with Sandbox(backend, workers=1, policy=policy, isolation=isolation, timeout=10) as box:
        results = list(box.run_many(source for source, _ in cases))
    warned = 0
    for (source, expected), result in zip(cases, results, strict=True):
        assert result.status.value == "ok", (source, result.status.value, result.error)
        assert same(result.value, expected), (source, result.value, expected)
        warned += "Warning" in (result.stderr or "")
    assert warned > 0  # the cases are what they say: some warned
