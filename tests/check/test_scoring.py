"""pass@k, majority vote (self-consistency) and process checklists."""

from __future__ import annotations

import math
from math import comb
from typing import Any

import pytest

from potrun.check.scoring import ChecklistItem, ChecklistResult, check_checklist, majority_vote, pass_at_k
from potrun.types import ExecResult, Status, UsageError

# ----------------------------------------------------------------- pass@k


@pytest.mark.parametrize(
    "n,c,k", [(n, c, k) for n in (1, 2, 5, 10, 20) for c in range(n + 1) for k in (1, 2, 5, 10) if k <= n]
)
def test_pass_at_k_matches_the_binomial_formula(n: int, c: int, k: int) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k), abs=1e-12)


def test_pass_at_k_edges() -> None:
    assert pass_at_k(10, 0, 1) == 0.0
    assert pass_at_k(10, 10, 1) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(10, 1, 10) == 1.0  # n - c < k
    # stable where the binomials are astronomically large
    assert pass_at_k(10_000, 1, 100) == pytest.approx(0.01)
    assert 0.0 <= pass_at_k(100_000, 50, 1000) <= 1.0


@pytest.mark.parametrize("n,c,k", [(0, 0, 1), (5, 6, 1), (5, -1, 1), (5, 2, 0), (5, 2, 6)])
def test_pass_at_k_rejects_bad_counts(n: int, c: int, k: int) -> None:
    with pytest.raises(UsageError):
        pass_at_k(n, c, k)


def test_pass_at_k_rejects_non_ints() -> None:
    with pytest.raises(UsageError):
        pass_at_k(10.0, 3, 1)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        pass_at_k(10, True, 1)  # type: ignore[arg-type]


# ----------------------------------------------------------------- majority vote


@pytest.mark.parametrize(
    "values,gold,options,voted,correct",
    [
        ([3, 5, 5, 3, 5], 5, {}, 5, True),
        ([5.0, 5.00000001, 3, 3], 5, {}, 5.0, True),  # equal under the comparator: one group of two
        ([1, 2.0, 2, None, 1], 2, {}, 1, False),  # tie 2-2: the group seen first wins
        ([2, 1, 1, 2], 1, {}, 2, False),
        ([None, None, 7], 7, {}, 7, True),  # None does not vote
        ([math.nan, math.nan, 4], 4, {}, 4, True),  # NaN does not vote
        ([], 1, {}, None, False),
        ([None], 1, {}, None, False),
        ([-4, 4, 5], 4, {"abs_value": True}, 4, True),  # PoT SVAMP: vote on abs()
        (["yes", True, "no"], "yes", {}, "yes", True),
        (["12.5%", 12.5, 0.125], "12.5%", {}, "12.5%", True),
        ([0.125, 12.5, 12.5], "12.5%", {"percent": True}, 0.125, True),
        ([0.12345678, 0.12, 0.5], 0.12, {"preset": "pot"}, 0.12345678, True),
    ],
)
def test_majority_vote(values: list[Any], gold: Any, options: dict[str, Any], voted: Any, correct: bool) -> None:
    got_value, got_correct = majority_vote(values, gold, **options)
    assert got_value == voted and type(got_value) is type(voted)
    assert got_correct is correct


def test_majority_vote_counts_only_ok_results() -> None:
    results = [
        ExecResult(Status.OK, 6, "int"),
        ExecResult(Status.TIMEOUT),
        ExecResult(Status.ERROR, error_type="ZeroDivisionError"),
        ExecResult(Status.OK, 7, "int"),
        ExecResult(Status.OK, 7, "int"),
        ExecResult(Status.NO_ANSWER),
    ]
    assert majority_vote(results, 7) == (7, True)
    assert majority_vote([ExecResult(Status.TIMEOUT)], 7) == (None, False)


def test_majority_vote_accepts_a_generator() -> None:
    assert majority_vote((x for x in [1, 1, 2]), 1) == (1, True)


# ----------------------------------------------------------------- checklists


def test_checklist_all_present() -> None:
    result = check_checklist([120.0, 0.25, 30.000001], [120, 0.25, 30])
    assert result == ChecklistResult(passed=True, missing=())


def test_checklist_reports_missing_in_order() -> None:
    result = check_checklist([1.0, 2.0], [3, 1, {"name": "total", "value": 4}])
    assert not result.passed
    assert result.missing == (ChecklistItem(value=3.0), ChecklistItem(value=4.0, name="total"))
    assert result.missing[1].describe() == "total = 4"


@pytest.mark.parametrize(
    "observed,item,present",
    [
        ([19.5], "between 18% and 21%", True),
        ([21.0], "an answer between 18% and 21% is correct", True),
        ([22.0], "between 18% and 21%", False),
        ([18.0], "[18, 21]", True),
        ([5.0], {"min": 1, "max": 10}, True),
        ([50.0], {"min": 1}, True),
        ([0.5], {"low": 1}, False),
        ([12.5], "12.5%", True),  # numbers as written
        ([100.02], 100, False),
        ([100.02], ChecklistItem(value=100), False),
        ([100.005], 100, True),
        ([1e6], "1 million", False),  # scale words are not applied
        ([True, math.nan], 1, False),  # bools and NaN are not observed numbers
        ([10**400], {"min": 0}, True),
        ([], 0, False),
    ],
)
def test_checklist_items(observed: list[Any], item: Any, present: bool) -> None:
    assert check_checklist(observed, [item]).passed is present


def test_checklist_tolerance_is_configurable() -> None:
    assert check_checklist([100.5], [100], rel_tol=0.01).passed
    assert check_checklist([1e-9], [0], abs_tol=1e-6).passed
    assert not check_checklist([1e-9], [0]).passed


def test_one_observed_number_can_satisfy_several_items() -> None:
    assert check_checklist([5.0], [5, 5.0, {"min": 4, "max": 6}]).passed


@pytest.mark.parametrize("bad", [True, "abc", {"name": "x"}, {"value": "n/a"}, {"min": "lots"}, object()])
def test_checklist_rejects_bad_items(bad: Any) -> None:
    with pytest.raises(UsageError):
        check_checklist([1.0], [bad])


@pytest.mark.parametrize(
    "call",
    [
        lambda: check_checklist(None, [1.0]),  # type: ignore[arg-type]
        lambda: check_checklist([1.0], "12.5"),
        lambda: check_checklist([1.0], [1.0], rel_tol=float("nan")),
        lambda: check_checklist([1.0], [1.0], abs_tol="0.1"),  # type: ignore[arg-type]
        lambda: check_checklist([1.0], [{"value": 10**400}]),
        lambda: ChecklistItem.from_spec({"min": "lots"}),
    ],
)
def test_bad_checklist_arguments_are_usage_errors(call: Any) -> None:
    with pytest.raises(UsageError):
        call()


def test_checklist_item_is_a_value_or_a_range() -> None:
    with pytest.raises(UsageError):
        ChecklistItem()
    with pytest.raises(UsageError):
        ChecklistItem(value=1, low=0)
