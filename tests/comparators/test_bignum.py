"""Numbers past a float (issue 36, class 1): every preset compares them as the decimals they are written
as, never as the inf (or 0, or refusal) a float reading makes of them. Seeded generated pairs: the same
number written another way is correct; a different one (a digit, the exponent, the sign) never is."""

from __future__ import annotations

import random

import pytest

from potrun.comparators import PRESETS, compare
from potrun.comparators.bignum import MAX_EXACT_CHARS, overflows_in_text, plain_decimal
from potrun.comparators.nonfinite import paid_for_nonfinite
from potrun.rewards import score_completions

PRESET_NAMES = [name for name in PRESETS if name != "math"]


def _spellings(rng: random.Random, digits: str, power: int) -> str:
    """One way to write digits * 10**power: with leading zeros, trailing zeros moved into the
    exponent, a decimal point somewhere, an explicit sign."""
    zeros = rng.randint(0, 3)
    shift = rng.randint(0, min(5, len(digits) - 1)) if len(digits) > 1 else 0
    body = digits + "0" * zeros
    exponent = power - zeros
    if shift:
        body = body[: len(body) - shift] + "." + body[len(body) - shift :]
        exponent += shift
    lead = "0" * rng.randint(0, 2)
    return f"{rng.choice(['', '+'])}{lead}{body}e{exponent}" if exponent else f"{lead}{body}"


def _pairs(seed: int, count: int) -> list[tuple[str, str, str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        digits = str(rng.randint(1, 9)) + "".join(rng.choice("0123456789") for _ in range(rng.randint(0, 40)))
        digits = digits.rstrip("0") or "1"
        power = rng.choice([rng.randint(320, 10**8), -rng.randint(340, 10**8)])
        same = _spellings(rng, digits, power)
        other_digits = digits[:-1] + str((int(digits[-1]) + rng.randint(1, 8)) % 10)
        other_digits = other_digits.rstrip("0") or "1"
        different = rng.choice(
            [
                _spellings(rng, digits, power + rng.choice([-1, 1])),
                _spellings(rng, other_digits, power) if other_digits != digits else "-" + same,
                "-" + _spellings(rng, digits, power),
            ]
        )
        out.append((_spellings(rng, digits, power), same, different))
    return out


@pytest.mark.parametrize("preset", PRESET_NAMES)
@pytest.mark.parametrize("seed", [36, 3600])
def test_numbers_past_a_float_are_compared_exactly(preset: str, seed: int) -> None:
    for gold, same, different in _pairs(seed, 40):
        assert compare(same, gold, preset=preset).correct, (preset, same, gold)
        assert not compare(different, gold, preset=preset).correct, (preset, different, gold)
        assert not compare(float("inf") if gold[0] != "-" else float("-inf"), gold, preset=preset).correct
        assert not compare(f"The answer is {different}", gold, preset=preset).correct


@pytest.mark.parametrize("preset", PRESET_NAMES)
def test_a_200000_digit_answer_equal_to_its_gold_is_correct(preset: str) -> None:
    rng = random.Random(200_000)
    number = str(rng.randint(1, 9)) + "".join(rng.choice("0123456789") for _ in range(199_999))
    assert compare(number, number, preset=preset).correct
    assert compare(number, number + ".000", preset=preset).correct
    changed = number[:-1] + str((int(number[-1]) + 1) % 10)
    assert not compare(changed, number, preset=preset).correct
    assert not compare(number + "0", number, preset=preset).correct
    too_long = "1" * (MAX_EXACT_CHARS + 1)
    assert plain_decimal(too_long) is None  # past the sane maximum: not read as a number
    assert not compare(too_long, "1" + too_long, preset=preset).correct


@pytest.mark.parametrize("preset", PRESET_NAMES)
def test_a_huge_finite_gold_is_not_inf(preset: str) -> None:
    """`1e99999999` against the gold text `1e99999999` is equal (the same number); `2e99999999`, inf,
    `1e308` and a text that says another huge number are not: a float reads them all as inf."""
    gold = "1e99999999"
    assert compare("1e99999999", gold, preset=preset).correct
    assert compare("10e99999998", gold, preset=preset).correct
    for wrong in ["2e99999999", "1e99999998", "inf", float("inf"), 1e308, "1e308 * 10", "1e99999999 apples"]:
        assert not compare(wrong, gold, preset=preset).correct, (preset, wrong)
    assert not compare("1e400 apples", "2e400 apples", preset=preset).correct
    assert not compare("10^{400}", "10^{401}", preset=preset).correct
    assert paid_for_nonfinite(float("inf"), gold)  # inf claimed, and the gold is a finite number
    assert not paid_for_nonfinite("1e99999999", gold)  # the same finite number: nothing non-finite
    assert not compare(float("inf"), gold, preset=preset).correct


def test_rewards_pay_for_an_equal_huge_number_and_nothing_else() -> None:
    class NoPrograms:
        def run_requests(self, requests):  # type: ignore[no-untyped-def]
            for request in requests:
                assert request is None
                yield None

    completions = ["The answer is 1e99999999.", "The answer is 2e99999999.", "The answer is inf."]
    rewards = score_completions(completions, ["1e99999999"] * 3, mode="cot", sandbox=NoPrograms())  # type: ignore[arg-type]
    assert rewards == [1.0, 0.0, 0.0]


def test_the_readings_are_linear_and_bounded() -> None:
    assert plain_decimal("1," + ",".join(["000"] * 50_000)) == (False, "1", 150_000)
    assert plain_decimal("1,00,000") is None  # not thousands
    assert plain_decimal("1e" + "9" * 19) is None  # an exponent past 18 digits is no plain decimal...
    assert overflows_in_text("x = 1e" + "9" * 19)  # ...and a text holding one overflows
    assert not overflows_in_text("x = 1e300 and 2.5")
    assert plain_decimal(10**400) == (False, "1", 400)
    assert plain_decimal(True) is None
