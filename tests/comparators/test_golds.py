"""Issue 37, item 2: a numeric gold string is read as a number under every preset, as each peer's own
code reads its golds ("72": verl's ground_truth, HF datasets' columns, lm-eval's target).

The invariant, on seeded generated golds and values: under every preset, a value's verdict against the
gold string is its verdict against the number the string spells, in the type the peer's own data
stores it (a float for PoT's data, an int or float as written for LongDocURL's and the others)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from paths import SHARED

from potrun import PRESETS, compare
from potrun.cli import main
from potrun.comparators.golds import PLAIN_NUMBER_CHARS, plain_number

GSM8K = SHARED / "pot" / "gsm8k_fewshot_codex.jsonl"


def spelled(number: int | float, rng: random.Random, preset: str) -> str:
    """A gold string as a loader writes the number: plain, thousands-grouped (not for docmath, whose
    peer reads a gold string with float(), which reads no comma), padded."""
    text = f"{number:,}" if rng.random() < 0.3 and preset != "docmath" else str(number)
    return f" {text} " if rng.random() < 0.1 else text


def as_stored(number: int | float, preset: str) -> int | float:
    """The number as the preset's peer stores it in its own data."""
    return float(number) if preset == "pot" else number


def nearby(number: int | float, rng: random.Random) -> Any:
    """A value a program could answer: the gold, a float near it, another number, text, a bool, None."""
    return rng.choice(
        [
            number,
            float(number),
            number + rng.choice([1, -1, 0.5]),
            float(number) * (1 + rng.choice([1e-9, 1e-5, 1e-3, 0.02])),
            str(number),
            rng.choice([True, False, None, "abc"]),
        ]
    )


@pytest.mark.parametrize("preset", [name for name in PRESETS if name != "math"])
@pytest.mark.parametrize("seed", range(3))
def test_a_numeric_gold_string_is_the_number_it_spells(preset: str, seed: int) -> None:
    rng = random.Random(f"{preset}-{seed}")
    for _ in range(300):
        number: int | float = rng.choice(
            [rng.randint(-100_000, 100_000), round(rng.uniform(-10_000, 10_000), rng.randint(1, 4))]
        )
        value = nearby(number, rng)
        gold = spelled(number, rng, preset)
        by_string = compare(value, gold, preset=preset)
        by_number = compare(value, as_stored(number, preset), preset=preset)
        assert by_string.correct is by_number.correct, (preset, value, gold, by_string, by_number)


def test_docmath_reads_a_gold_string_as_its_peer_does() -> None:
    """DocMath-Eval's `evaluate_cot_pred_file` converts a gold with float(): "1,234" is no number there."""
    assert compare(72, "72", preset="docmath").correct
    assert not compare(1234, "1,234", preset="docmath").correct


def test_math_reads_a_numeric_gold_string_as_the_number() -> None:
    pytest.importorskip("math_verify")
    for value, gold in [(72, "72"), (72.0, "72"), (-3.5, "-3.5"), (1234, "1,234")]:
        assert compare(value, gold, preset="math").correct


@pytest.mark.parametrize(("text", "number"), [("72", 72), (" -3.5 ", -3.5), ("1,234", 1234), ("1e-05", 1e-05)])
def test_plain_number_reads_what_loaders_write(text: str, number: float) -> None:
    assert plain_number(text) == number


@pytest.mark.parametrize("text", ["$72", "72%", "nan", "inf", "1_000", "1,23", "seventy", "", ".", "e5", "9" * 101])
def test_plain_number_reads_nothing_else(text: str) -> None:
    assert plain_number(text) is None
    assert len("9" * 101) > PLAIN_NUMBER_CHARS


def test_pot_keeps_finqa_equals_string_rule_for_a_string_prediction() -> None:
    """A program that returned the text "1,234" still meets the gold text "1,234", as finqa_equal
    compares two strings; a bool meets only "yes"/"no"."""
    assert compare("1,234", "1,234", preset="pot").correct
    assert not compare(True, "72", preset="pot").correct
    assert compare(True, "yes", preset="pot").correct


def gsm8k_as_verl_writes_it() -> list[dict[str, Any]]:
    """PoT's GSM8K records with the gold as verl's gsm8k preprocessing writes it: the text after
    "#### ", commas dropped ("18", not 18.0)."""
    records = [json.loads(line) for line in GSM8K.read_text().splitlines()]
    for record in records:
        gold = record["answer"]
        record["answer_text"] = str(int(gold)) if float(gold).is_integer() else repr(gold)
    return records


@pytest.mark.slow
def test_pot_on_gsm8k_string_golds_gives_the_same_verdicts_as_pots_float_golds() -> None:
    """All 1,318 GSM8K records, PoT's own predictions (`executed`): gold "18" and gold 18.0 agree."""
    records = gsm8k_as_verl_writes_it()
    assert len(records) == 1318
    for record in records:
        by_text = compare(record["executed"], record["answer_text"], preset="pot")
        by_float = compare(record["executed"], record["answer"], preset="pot")
        assert by_text.correct is by_float.correct, record
    assert sum(compare(r["executed"], r["answer_text"], preset="pot").correct for r in records) > 900


def test_check_compare_pot_with_string_golds(tmp_path: Path) -> None:
    """`potrun check --compare pot` on GSM8K records whose golds are strings: the accuracy of the float
    golds (it was 0.0: every correct answer failed), on the first 80 records."""
    records = gsm8k_as_verl_writes_it()[:80]
    accuracies = []
    for gold_field in ("answer", "answer_text"):
        data = tmp_path / f"{gold_field}.jsonl"
        data.write_text("".join(json.dumps(record) + "\n" for record in records))
        summary = tmp_path / f"{gold_field}.json"
        args = ["check", str(data), "--compare", "pot", "--code-field", "generated", "--gold-field", gold_field]
        code = main([*args, "--summary-json", str(summary), "--quiet", "--workers", "1", "--out", "/dev/null"])
        assert code == 0
        accuracies.append(json.loads(summary.read_text())["accuracy"])
    assert accuracies[0] == accuracies[1] > 0.6
