"""Chain-of-thought results a person can read: `value` is what the comparator read in the answer text
(`potrun.comparators.read_answer`), `value_type` its type, `answer_text` the text extracted; the
verdicts are the ones the text itself gets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from potrun.check.pipeline import CheckOptions, check_records
from potrun.check.records import Record
from potrun.cli import main
from potrun.comparators import compare, read_answer
from potrun.sandbox.api import Sandbox

# (answer text, what the default reads, what pot reads)
READINGS = [
    ("1{,}234.5", 1234.5, "1{,}234.5"),
    ("1,234", 1234, "1,234"),
    ("25%", 25, "25%"),  # the default compares 25% as 25 (percent=True also accepts 0.25)
    ("$3.5 million", 3.5, "$3.5 million"),  # scale words apply only with scale=True
    ("(1,234.5)", -1234.5, "(1,234.5)"),
    ("42 dollars", 42, "42 dollars"),
    ("\\frac{3}{4}", 0.75, "\\frac{3}{4}"),
    ("72", 72, 72.0),
    ("1e5", 100000.0, 100000.0),
    ("Yes", True, "Yes"),
    ("false", False, "false"),
    ("(B)", "B", "(B)"),
    ("c.", "C", "c."),
    ("[2, 3]", [2, 3], "[2, 3]"),  # the default reads a list written out as the list
    ("x = 72", 72, "x = 72"),  # the right side of an assignment, as the extractor reads it
    ("(B) 25 apples", "B", "(B) 25 apples"),
    ("D and B", "BD", "D and B"),
    ("72 or 73", "72 or 73", "72 or 73"),  # a hedge reads as no number
    ("not answerable", "not answerable", "not answerable"),
    ("x + 1", "x + 1", "x + 1"),
]


@pytest.mark.parametrize(("text", "default", "pot"), READINGS)
def test_read_answer(text: str, default: object, pot: object) -> None:
    for preset, expected in (("default", default), ("pot", pot)):
        read = read_answer(text, preset=preset)
        assert read == expected and type(read) is type(expected), preset
    assert read_answer(text, preset="docmath") == text


# (answer text, gold): the reading gets the verdict the text gets, under the default rules
JUDGED = [
    ("1{,}234.5", 1234.5),
    ("1{,}234.5", "1,234.5"),
    ("25%", 25),
    ("25%", 0.25),
    ("$3.5 million", 3500000),
    ("(B)", "B"),
    ("(B)", "C"),
    ("Yes", True),
    ("yes", "no"),
    ("42 dollars", "42"),
    ("12.50", "12.5"),
]


@pytest.mark.parametrize(("text", "gold"), JUDGED)
def test_the_reading_is_what_the_default_compared(text: str, gold: object) -> None:
    assert compare(read_answer(text), gold).correct is compare(text, gold).correct


@pytest.fixture(scope="module")
def box() -> Sandbox:
    with Sandbox(workers=1) as sandbox:
        yield sandbox


COT = [
    ("We add them up. The answer is 1{,}234.5.", 1234.5, 1234.5, "float", "1{,}234.5", True),
    ("So the share is \\boxed{25\\%}", 25, 25, "int", "25\\%", True),
    ("The final answer is (B).", "B", "B", "str", "(B)", True),
    ("Final answer: yes", True, True, "bool", "yes", True),
    ("The answer is 12.", 13, 12, "int", "12", False),
]


@pytest.mark.parametrize(("output", "gold", "value", "value_type", "answer_text", "correct"), COT)
def test_check_records_shows_the_reading(
    box: Sandbox, output: str, gold: object, value: object, value_type: str, answer_text: str, correct: bool
) -> None:
    (result,) = check_records([Record(1, {"output": output, "answer": gold})], box, CheckOptions(mode="cot"))
    assert (result.value, result.value_type, result.answer_text, result.correct) == (
        value,
        value_type,
        answer_text,
        correct,
    )
    assert result.correct is compare(answer_text, gold).correct
    line = result.to_json()
    assert (line["value"], line["value_type"], line["answer_text"]) == (value, value_type, answer_text)


def test_pot_results_have_no_answer_text(box: Sandbox) -> None:
    (result,) = check_records([Record(1, {"output": "ans = 6 * 7", "answer": 42})], box, CheckOptions())
    assert (result.value, result.value_type, result.answer_text, result.correct) == (42, "int", None, True)
    assert result.to_json()["answer_text"] is None


def test_the_out_line_of_potrun_check(tmp_path: Path) -> None:
    preds = tmp_path / "preds.jsonl"
    preds.write_text(
        json.dumps(
            {"id": 1, "output": "Total: 1,234 + 0.5 = 1{,}234.5. The answer is 1{,}234.5", "answer": "#### 1,234.5"}
        )
        + "\n"
    )
    out = tmp_path / "out.jsonl"
    assert main(["check", str(preds), "--mode", "cot", "--out", str(out), "--quiet", "--workers", "1"]) == 0
    line = json.loads(out.read_text())
    assert (line["value"], line["value_type"], line["answer_text"], line["correct"]) == (
        1234.5,
        "float",
        "1{,}234.5",
        True,
    )
