"""A NaN or an infinity is never paid unless the gold is exactly that (issue 36, class 4): through
`potrun.rewards` under every preset, and `--benchmark docmath --strict` (the official code judges a NaN
prediction correct against any nonzero gold; without --strict potrun still reproduces that)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from potrun import rewards
from potrun.comparators import PRESETS
from potrun.comparators.nonfinite import nonfinite_claim, paid_for_nonfinite

PROGRAMS = [
    "ans = float('nan')",
    "ans = float('inf')",
    "ans = -float('inf')",
    "import math\nans = math.nan",
    "ans = 1e308 * 10",
    "ans = [float('nan')]",
]
TEXTS = ["nan", "NaN", "inf", "-Infinity", "1e999", "math.nan", "float('nan')", "math.inf", "1e308*10", "nan%"]
PRESETS_FOR_REWARDS = [name for name in PRESETS if name != "math"]  # math-verify: an optional extra


@pytest.fixture(autouse=True, scope="module")
def shared_sandbox() -> Iterator[None]:
    rewards.configure(workers=1, timeout=2.0, memory_mb=512)
    yield
    rewards.close()


def _golds(seed: int, count: int) -> list[float | int | str]:
    """Finite golds of every kind a dataset holds, drawn by a seeded generator (zero too: DocMath's
    normalize reads an unevaluable text as 0)."""
    rng = random.Random(seed)
    draws: list[float | int | str] = [0, 1, 5.0, -3, "12", "0.25"]
    draws += [
        rng.choice([rng.randint(-(10**6), 10**6), rng.uniform(-1e6, 1e6), str(rng.randint(1, 999))])
        for _ in range(count)
    ]
    return draws


@pytest.mark.parametrize("preset", PRESETS_FOR_REWARDS)
def test_a_program_s_nan_or_infinity_is_never_paid_against_a_finite_gold(preset: str) -> None:
    golds = _golds(36, 6)
    completions = [program for program in PROGRAMS for _ in golds]
    paid = rewards.score_completions(completions, golds * len(PROGRAMS), preset=preset)
    assert paid == [0.0] * len(completions)


@pytest.mark.parametrize("preset", PRESETS_FOR_REWARDS)
def test_an_answer_text_of_nan_or_infinity_is_never_paid_against_a_finite_gold(preset: str) -> None:
    golds = _golds(37, 4)
    completions = [f"The answer is {text}." for text in TEXTS for _ in golds]
    paid = rewards.score_completions(completions, golds * len(TEXTS), preset=preset, mode="cot")
    assert paid == [0.0] * len(completions)


def test_the_gold_s_own_nan_or_infinity_is_still_judged_by_the_preset() -> None:
    """`paid_for_nonfinite` lets the preset decide when the gold is exactly the value's non-finite."""
    assert not paid_for_nonfinite(float("nan"), float("nan"))
    assert not paid_for_nonfinite(float("inf"), "inf")
    assert paid_for_nonfinite(float("inf"), float("-inf"))
    assert paid_for_nonfinite("math.nan", 5)
    assert nonfinite_claim("12") is None and nonfinite_claim(12.5) is None and nonfinite_claim("abc") is None
    assert rewards.score_completions(["ans = float('inf')"], [float("inf")]) == [1.0]


def test_docmath_strict_judges_a_nan_prediction_wrong(tmp_path: Path) -> None:
    folder = tmp_path / "outputs" / "raw_pot_outputs"
    folder.mkdir(parents=True)
    fence = "```"
    records = [
        {
            "question_id": f"nan-{n}",
            "python_solution": f"def solution():\n    return {gold}",
            "output": [f"{fence}python\ndef solution():\n    return {value}\n{fence}"],
        }
        for n, (value, gold) in enumerate([("float('nan')", 5.0), ("float('nan')", 17), ("4.0", 4.0)])
    ]
    preds = folder / "model.jsonl"
    preds.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    verdicts = {}
    for extra in ((), ("--strict",)):
        out = tmp_path / f"out{len(extra)}.jsonl"
        command = [sys.executable, "-m", "potrun", "check", str(preds), "--benchmark", "docmath", *extra]
        done = subprocess.run([*command, "--out", str(out), "--quiet"], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        verdicts[extra] = [json.loads(line)["correct"] for line in out.read_text().splitlines()]
    assert verdicts[()] == [True, True, True]  # the official code's verdict, reproduced
    assert verdicts[("--strict",)] == [False, False, True]
