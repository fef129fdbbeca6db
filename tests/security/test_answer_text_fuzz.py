"""Hostile answer texts cost the parent bounded work (issue 36, class 1): generated texts (towers of
powers, huge format widths, deep nesting, 10^5-digit numbers, backtracking bait, every script's
numerals; tests/security/fuzz_answer_texts.py) through every preset and mode, every extractor and number
reader, in a subprocess whose memory is capped (RLIMIT_AS) and whose whole run has a CPU-time ceiling
(RLIMIT_CPU). Each case's own CPU time (its thread's, by getrusage: other processes' load does not
count) must stay under a ceiling only an unbounded computation reaches; no text is judged correct.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from potrun.budget import OverBudget, charge, record_budget
from potrun.comparators import compare
from potrun.comparators.safe_eval import EvalFailed, safe_eval

FUZZ = Path(__file__).with_name("fuzz_answer_texts.py")
MEMORY_CEILING = 4 << 30  # address space: an interpreter with numpy and sympy, and no gigabyte string
RUN_CPU_CEILING_S = 900  # the whole run's CPU: a few seconds of real work per seed, and far from this


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CEILING, MEMORY_CEILING))
    resource.setrlimit(resource.RLIMIT_CPU, (RUN_CPU_CEILING_S, RUN_CPU_CEILING_S))


@pytest.mark.parametrize("seed", [36, 3600])
def test_generated_hostile_answer_texts_cost_bounded_work_and_are_never_correct(seed: int) -> None:
    done = subprocess.run(
        [sys.executable, str(FUZZ), str(seed), "60"], capture_output=True, text=True, preexec_fn=_limited
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "worst case" in done.stdout


@pytest.mark.parametrize(
    "text",
    [
        "round(5, -10**9)",
        "'%0999999999e' % 1",
        "'%.999999999f' % 1",
        "'%*d' % (999999999, 1)",
        "'a' * 10**9",
        "[[1] * 9999] * 9999",
        "[1] * 9999 + [1] * 9999",
        "sum([[1] * 99] * 99, [])",
        "1 << 10**9",
        "9 ** 9 ** 9",
        "(" * 200 + "1" + ")" * 200,
        "-" * 500 + "1",
        "0x" + "f" * 5000,
    ],
)
def test_safe_eval_refuses_or_bounds_each_costly_operation_before_it_runs(text: str) -> None:
    try:
        result = safe_eval(text)
    except EvalFailed:
        return
    assert result == 0  # round(int, -n) past its digits: 0, given without computing 10**n


def test_safe_eval_still_gives_what_eval_gives_for_everyday_text() -> None:
    for text in ["1+2*3", "round(1234, -2)", "'%.2f' % 3.14159", "sum([1, 2, 3])", "'ab' * 3", "[1, 2][0]", "2**10"]:
        assert safe_eval(text) == eval(text)


def test_the_record_budget_holds_in_any_thread_without_signals() -> None:
    """A budget is a context variable: each thread's (and each record's) own, counted, never a timer."""
    import threading

    outcomes: list[str] = []

    def spend() -> None:
        try:
            with record_budget(1000):
                for _ in range(2000):
                    charge(1)
        except OverBudget:
            outcomes.append("over")

    threads = [threading.Thread(target=spend) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes == ["over"] * 4
    with record_budget(10):  # a preset's evaluation charges the budget its caller opened
        verdict = compare("1 + 1 + 1 + 1 + 1 + 1 + 1", 7, preset="docmath")
    assert not verdict.correct and "not judged" in verdict.reason


@pytest.mark.parametrize("seed", [36, 37])
def test_a_record_in_a_batch_is_scored_as_it_would_be_alone(seed: int) -> None:
    """/v1/score and /openrlhf/reward score a batch: each record's reward is the one it earns alone,
    whatever hostile records share the batch (each record has its own budget and its own failures)."""
    import random

    from fuzz_answer_texts import GOLD, _NoPrograms, hostile_texts

    from potrun.comparators import PRESETS
    from potrun.rewards import score_completions

    rng = random.Random(seed)
    texts = list(hostile_texts(seed, 12))
    honest = [f"So the answer is {GOLD}.", "The answer is 12.", f"#### {GOLD}", f"\\boxed{{{GOLD}}}"]
    batch = [rng.choice(texts) if rng.random() < 0.5 else rng.choice(honest) for _ in range(16)]
    batch += [[rng.choice(texts) for _ in range(rng.choice([1, 32]))] for _ in range(4)]  # many samples
    for preset in (name for name in PRESETS if name != "math"):
        golds = [GOLD] * len(batch)
        together = score_completions(batch, golds, mode="cot", preset=preset, sandbox=_NoPrograms())  # type: ignore[arg-type]
        alone = [
            score_completions([one], [GOLD], mode="cot", preset=preset, sandbox=_NoPrograms())[0]  # type: ignore[arg-type]
            for one in batch
        ]
        assert together == alone, preset
        assert any(together), preset  # the honest records are paid
