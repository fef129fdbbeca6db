"""Issue 37, item 1: no public result type answers `if result:` with a silent True.

A verdict is true exactly when it is correct (Math-Verify's `verify()` is used that way); a result whose
truth could mean several things refuses the question with a TypeError that names the field to test."""

from __future__ import annotations

import random

import pytest

import potrun
from potrun import ExecResult, RecordResult, Status, ValidationReport, Verdict, check_checklist, compare


def test_counting_verdicts_counts_the_right_answers() -> None:
    answers, gold = [71, 72, 73], "72"
    assert sum(1 for answer in answers if compare(answer, gold)) == 1
    assert [bool(compare(answer, gold)) for answer in answers] == [False, True, False]


@pytest.mark.parametrize("seed", range(5))
def test_a_verdicts_truth_is_its_correctness(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(200):
        gold = rng.choice([rng.randint(-1000, 1000), round(rng.uniform(-100, 100), rng.randint(0, 4))])
        value = gold if rng.random() < 0.5 else rng.randint(-1000, 1000) + rng.choice([0, 0.5])
        preset = rng.choice(list(potrun.PRESETS))
        verdict = compare(value, gold, preset=preset)
        assert bool(verdict) is verdict.correct
        assert (not verdict) is (not verdict.correct)
    assert bool(Verdict(False, "a reason")) is False


def test_checklist_result_is_true_when_passed() -> None:
    assert check_checklist([1.0, 2.0], [1.0])
    assert not check_checklist([1.0, 2.0], [3.0])


@pytest.mark.parametrize(
    ("result", "field"),
    [
        (ExecResult(Status.OK, value=1, value_type="int"), ".ok"),
        (ExecResult(Status.ERROR), ".ok"),
        (RecordResult(line=1, id=None, status="ok", correct=False), ".correct"),
        (RecordResult(line=1, id=None, status="skipped"), ".correct"),
        (ValidationReport(id=1, line=1), ".ok"),
    ],
)
def test_an_ambiguous_result_refuses_the_question_and_names_the_field(result: object, field: str) -> None:
    with pytest.raises(TypeError, match=field.replace(".", r"\.")):
        bool(result)
    with pytest.raises(TypeError):
        if result:
            pass


def test_every_public_result_type_is_covered() -> None:
    """A new public dataclass named like a result must be added above (a dataclass is otherwise true)."""
    results = {name for name in potrun.__all__ if name.endswith(("Result", "Report")) or name == "Verdict"}
    assert results == {"ExecResult", "RecordResult", "ValidationReport", "ChecklistResult", "Verdict"}
