"""GSM8K-format golds ("...reasoning...\\n#### 72", openai/gsm8k's `answer`, lm-evaluation-harness's
`target`) are read as the number after the last "####", by every preset and in every place a gold is
compared: `compare`, `potrun check`, the rewards and `potrun validate`."""

from __future__ import annotations

import json

import pytest
from paths import SHARED

from potrun.check.pipeline import CheckOptions, check_records
from potrun.check.records import Record
from potrun.comparators import PRESETS, compare, gsm8k_gold
from potrun.rewards import score_completions
from potrun.sandbox.api import Sandbox
from potrun.validation import validate

NATALIA = (
    "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
    "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72"
)
POT_GSM8K = SHARED / "pot" / "gsm8k_fewshot_codex.jsonl"

# (gold text, the answer lm-evaluation-harness compares)
ANSWERS = [
    ("#### 72", "72"),
    (NATALIA, "72"),
    ("#### 1,234", "1234"),
    ("#### -3.5", "-3.5"),
    ("####72", "72"),
    ("#### $5.", "5"),
    ("first #### 3\nthen\n#### 4", "4"),  # the last marker
    ("no marker, 72", None),
]


@pytest.mark.parametrize(("gold", "answer"), ANSWERS)
def test_the_answer_is_the_text_after_the_last_marker(gold: str, answer: str | None) -> None:
    assert gsm8k_gold(gold) == answer


# (value, GSM8K-format gold, the same gold as a number, correct under the default)
CASES = [
    (72, "#### 72", 72, True),
    (72, NATALIA, 72, True),
    (72.0, NATALIA, 72, True),
    ("72", NATALIA, 72, True),
    (73, NATALIA, 72, False),
    (1234, "#### 1,234", 1234, True),
    (-3.5, "#### -3.5", -3.5, True),
    (3.5, "#### -3.5", -3.5, False),
    (None, NATALIA, 72, False),
]


@pytest.mark.parametrize(("value", "gold", "number", "correct"), CASES)
def test_the_default_reads_the_number(value: object, gold: str, number: float, correct: bool) -> None:
    assert compare(value, gold).correct is correct


@pytest.mark.parametrize("preset", list(PRESETS))
@pytest.mark.parametrize(("value", "gold", "number", "correct"), CASES)
def test_every_preset_judges_it_as_the_number(
    preset: str, value: object, gold: str, number: float, correct: bool
) -> None:
    """Each preset's verdict is the one it gives the gold written as a number (PoT's data stores
    floats: 72.0), leniencies included (docmath's absolute values, longdocurl's Integer format)."""
    plain = float(number) if preset == "pot" else number
    assert compare(value, gold, preset=preset).correct is compare(value, plain, preset=preset).correct


@pytest.mark.slow
def test_pot_verdicts_on_the_published_file_are_the_same_with_gsm8k_golds() -> None:
    """Each of the 1,319 PoT GSM8K records, its recorded value judged against its numeric gold and
    against the same gold written as openai/gsm8k writes it: identical verdicts."""
    if not POT_GSM8K.exists():
        pytest.skip(f"shared data missing: {POT_GSM8K}")
    records = [json.loads(line) for line in POT_GSM8K.read_text().splitlines()]
    compared = 0
    for record in records:
        gold = record["answer"]
        written = f"Some reasoning.\n#### {int(gold):,}" if float(gold).is_integer() else f"#### {gold}"
        for preset in ("default", "pot"):
            assert (
                compare(record["executed"], written, preset=preset).correct
                == compare(record["executed"], gold, preset=preset).correct
            ), (record["question"], preset)
        compared += 1
    assert compared == len(records) > 1000


@pytest.fixture(scope="module")
def box() -> Sandbox:
    with Sandbox(workers=1) as sandbox:
        yield sandbox


@pytest.mark.parametrize("mode", ["pot", "cot"])
def test_check_records_reads_gsm8k_golds(box: Sandbox, mode: str) -> None:
    outputs = {
        "pot": ["ans = 48 + 24", "ans = 48 - 24"],
        "cot": ["So she sold 72 clips.\n#### 72", "The answer is 24."],
    }
    records = [Record(n, {"output": text, "answer": NATALIA}) for n, text in enumerate(outputs[mode], 1)]
    results = list(check_records(records, box, CheckOptions(mode=mode, presets=("default", "pot"))))
    assert [r.correct for r in results] == [True, False]
    assert [dict(r.verdicts or {}) for r in results] == [
        {"default": True, "pot": True},
        {"default": False, "pot": False},
    ]


def test_rewards_read_gsm8k_golds(box: Sandbox) -> None:
    completions = ["```python\nans = 48 + 24\n```", "```python\nans = 70\n```", "ans = 1234"]
    golds = [NATALIA, NATALIA, "#### 1,234"]
    assert score_completions(completions, golds, sandbox=box) == [1.0, 0.0, 1.0]
    assert score_completions(completions, golds, sandbox=box, preset="pot") == [1.0, 0.0, 1.0]


def test_validate_reads_gsm8k_recorded_answers() -> None:
    golds = [
        {"id": 1, "python_solution": "def solution():\n    # clips\n    return 48 + 24", "answer": NATALIA},
        {"id": 2, "python_solution": "def solution():\n    # clips\n    return 48 - 24", "answer": NATALIA},
    ]
    reports = list(validate(golds, workers=1, ignore={"variables_not_first"}))
    assert [r.codes for r in reports] == [(), ("wrong_answer",)]
