"""`potrun check --benchmark docmath` against DocMath-Eval's official verdicts, and its parts.

- Every record of ../shared/data/benchmarks/docmath/sample.jsonl, written into DocMath's own folders
  (`raw_pot_outputs/`, `raw_cot_outputs/`) and run through the real CLI, gets its `official` verdict.
  The sample holds none of the "not gated" kinds, so no record is left out.
- tests/data/benchmarks/docmath_extra.jsonl: shapes of the same classes read from the official code
  (float() of strings, arrays, Series, Decimal, NaN; gold types; fences; continuations; CoT answer
  sentences), each verdict and execution rate obtained by running yale-nlp/DocMath-Eval a175c0c's
  `evaluate_pot_pred_file` (under its pinned numpy 2.0.1, pandas 2.2.2, sympy 1.12) or
  `evaluate_cot_pred_file` with the stand-in's answer (`stand_in`) in place of GPT-3.5: the line's `how`.
- `official_program` is `process_single_pot_output`; the expected programs below are that function's
  output on each shape.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from paths import SHARED, TEST_DATA

from potrun.benchmarks import get_benchmark
from potrun.benchmarks.docmath import for_file, official_program, stated_number
from potrun.check.pipeline import RecordResult
from potrun.check.records import Record
from potrun.types import UsageError

DOCMATH = SHARED / "benchmarks" / "docmath"
EXTRA = TEST_DATA / "benchmarks" / "docmath_extra.jsonl"


def _cases(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        pytest.fail(f"{path} is missing: the repository must sit beside the shared folder")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _run_benchmark(cases: list[dict[str, Any]], tmp_path: Path, *extra: str) -> dict[str, Any]:
    """Each prompt type's records in DocMath's folder, through `potrun check --benchmark docmath`."""
    runs: dict[str, Any] = {}
    for prompt_type in ("pot", "cot"):
        chosen = [case for case in cases if case["prompt_type"] == prompt_type]
        folder = tmp_path / "outputs" / f"raw_{prompt_type}_outputs"
        folder.mkdir(parents=True)
        preds = folder / "mixed-models.jsonl"
        preds.write_text("".join(json.dumps(case["record"]) + "\n" for case in chosen), encoding="utf-8")
        out, summary = tmp_path / f"{prompt_type}.out.jsonl", tmp_path / f"{prompt_type}.summary.json"
        command = [sys.executable, "-m", "potrun", "check", str(preds), "--benchmark", "docmath", *extra]
        done = subprocess.run(
            [*command, "--out", str(out), "--summary-json", str(summary), "--quiet"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
        lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
        assert len(lines) == len(chosen)
        runs[prompt_type] = (chosen, lines, json.loads(summary.read_text(encoding="utf-8")))
    return runs


@pytest.fixture(scope="module")
def sample_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _run_benchmark(_cases(DOCMATH / "sample.jsonl"), tmp_path_factory.mktemp("sample"))


@pytest.fixture(scope="module")
def extra_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _run_benchmark(_cases(EXTRA), tmp_path_factory.mktemp("extra"))


@pytest.mark.parametrize("prompt_type", ["pot", "cot"])
def test_sample_agrees_with_every_official_verdict(sample_runs: dict[str, Any], prompt_type: str) -> None:
    cases, lines, summary = sample_runs[prompt_type]
    differ = [
        (case["kind"], case["official"], line)
        for case, line in zip(cases, lines, strict=True)
        if line["correct"] != bool(case["official"])
    ]
    assert not differ
    assert all(line["score"] == float(line["correct"]) for line in lines)
    official_accuracy = round(sum(case["official"] for case in cases) / len(cases) * 100, 2)
    assert summary["metrics"]["accuracy"] == official_accuracy
    assert summary["metrics"]["prompt_type"] == prompt_type
    assert 0 < summary["metrics"]["execution_rate"] <= 100


@pytest.mark.parametrize("prompt_type", ["pot", "cot"])
def test_extra_cases_agree_with_the_official_code(extra_runs: dict[str, Any], prompt_type: str) -> None:
    cases, lines, summary = extra_runs[prompt_type]
    for case, line in zip(cases, lines, strict=True):
        assert line["correct"] == bool(case["official"]), (case["kind"], line)
        assert line["fields"]["executed"] == bool(case["execution_rate"]), (case["kind"], line)
        if prompt_type == "cot":
            assert line["answer_text"] == case["stand_in"], case["kind"]
    rate = round(sum(case["execution_rate"] for case in cases) / len(cases) * 100, 2)
    assert summary["metrics"]["execution_rate"] == rate


def test_strict_reads_the_model_and_counts_the_differences(tmp_path: Path) -> None:
    cases = _cases(EXTRA)
    runs = _run_benchmark(cases, tmp_path, "--strict")
    pot_cases, lines, summary = runs["pot"]
    by_kind = {case["kind"]: line for case, line in zip(pot_cases, lines, strict=True)}
    # a ```py fence and a corrected second block: the official extractor misreads both, potrun does not
    assert by_kind["py_fence"]["correct"] and not by_kind["py_fence"]["fields"]["official_correct"]
    assert by_kind["draft_then_corrected"]["correct"]
    differs = sum(line["correct"] != line["fields"]["official_correct"] for line in lines)
    assert differs >= 2 and summary["metrics"]["differs_from_official"] == differs
    assert all(
        line["fields"]["official_correct"] == bool(case["official"])
        for case, line in zip(pot_cases, lines, strict=True)
    )


# -- process_single_pot_output --------------------------------------------------------------------------

BODY = "    a = 1\n    return a\n"


@pytest.mark.parametrize(
    "output,program",
    [
        ("```python\ndef solution():\n" + BODY + "```", "def solution():\n" + BODY.rstrip()),
        ("```\nans = 2\n```", "ans = 2"),
        (BODY + "```\nThe function returns a.", "def solution():\n" + BODY.rstrip()),
        (BODY.lstrip() + "```", "def solution():\n" + BODY.rstrip()),
        (BODY, "def solution():\n" + BODY.rstrip()),
        ("Code:\ndef solution():\n    return 1", "Code:\ndef solution():\n    return 1"),
        ("```py\ndef solution():\n    return 1\n```", "py\ndef solution():\n    return 1"),
        ("```python\ndef solution():\n    return 1\n", "python\ndef solution():\n    return 1"),
        ("```python\nA\n```python\nB\n```", "A"),
        ("import argparse\ndef solution():\n    return 1", ""),
        ("", ""),
    ],
    ids=[
        "python fence",
        "bare fence",
        "continuation, closing fence, prose",
        "continuation, first line unindented",
        "continuation, no fence",
        "def in prose, no fence",
        "py fence",
        "unclosed fence",
        "first python block",
        "argparse",
        "empty",
    ],
)
def test_official_program(output: str, program: str) -> None:
    assert official_program(output) == program


def test_official_program_is_linear_on_unclosed_fences() -> None:
    assert official_program("```python\n" * 200_000) == ""  # the regex form would rescan from each one


# -- the CoT stand-in -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "output,stated",
    [
        ("Therefore, the answer is 9759.07 (based on the 2021 figures).", "9759.07"),
        ("Therefore, the answer is $690.00 million.", "690.0"),
        ("Therefore, the answer is 7.51. If restated, it would be 8.04.", "7.51"),
        ("**Final Answer:** 2.95", "2.95"),
        ("Therefore, the answer is approximately 2.00.", "2.0"),
        ("Therefore, the answer is -19.77%.", "-19.77"),
        ("Now, dividing the difference by the base year value, we", "None"),
    ],
)
def test_stated_number(output: str, stated: str) -> None:
    assert stated_number(output) == stated


# -- files and records ----------------------------------------------------------------------------------


def test_prompt_type_comes_from_the_folder() -> None:
    assert for_file("out/compshort/raw_pot_outputs/m.json").prompt_type == "pot"
    assert for_file("out/compshort/raw_cot_outputs/m.json").prompt_type == "cot"
    with pytest.raises(UsageError, match="raw_pot_outputs"):
        for_file("preds.jsonl")
    assert get_benchmark("docmath").SANDBOX == {"policy": "trusted"}


@pytest.mark.parametrize(
    "prompt_type,record,field",
    [
        ("pot", {"question_id": "q", "python_solution": "def solution():\n    return 1"}, "output"),
        ("pot", {"question_id": "q", "output": ["x"]}, "python_solution"),
        ("cot", {"question_id": "q", "output": ["The answer is 1."]}, "ground_truth"),
        ("cot", {"question_id": "q", "output": [], "ground_truth": 1}, "output"),
    ],
)
def test_a_record_missing_a_field_is_a_bad_record(prompt_type: str, record: dict[str, Any], field: str) -> None:
    run = for_file(f"raw_{prompt_type}_outputs/m.jsonl")
    plan = run.plan(Record(3, record))
    assert plan.programs == ()
    result: RecordResult = plan.judge([])
    assert result.status == "bad_record" and result.line == 3 and field in (result.error or "")


# -- potrun validate --benchmark docmath ----------------------------------------------------------------


def test_validate_flags_golds_the_official_scorer_cannot_read(tmp_path: Path) -> None:
    returns = {
        "int": "6",
        "float64": "np.float64(6.0)",
        "int64": "np.int64(6)",
        "float32": "np.float32(6.0)",
        "Decimal": "Decimal(6)",
    }
    golds = tmp_path / "golds.jsonl"
    golds.write_text(
        "".join(
            json.dumps(
                {
                    "question_id": name,
                    "python_solution": "import numpy as np\nfrom decimal import Decimal\n\ndef solution():\n"
                    f"    # the answer\n    return {expression}",
                    "ground_truth": 6,
                }
            )
            + "\n"
            for name, expression in returns.items()
        ),
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "potrun", "validate", str(golds), "--benchmark", "docmath", "--quiet"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr  # errors found
    flagged = {
        report["id"]
        for report in map(json.loads, done.stdout.splitlines())
        if any(p["code"] == "unreadable_by_scorer" for p in report["problems"])
    }
    assert flagged == {"int64", "float32", "Decimal"}
    plain = subprocess.run(
        [sys.executable, "-m", "potrun", "validate", str(golds), "--quiet"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert "unreadable_by_scorer" not in plain.stdout  # only asked for with --benchmark


@pytest.mark.parametrize(
    ("mode", "output", "correct"),
    [
        ("pot", "```python\ndef solution():\n    return '29.31%'\n```", False),  # float('29.31%') fails: 0
        ("pot", "```python\ndef solution():\n    return 29.31\n```", True),
        ("cot", "So the rate is 29.31%. The answer is 29.31%.", True),  # normalize() strips the %
    ],
    ids=["program-string", "program-number", "cot-text"],
)
def test_the_plain_docmath_preset_reads_a_program_with_float_and_a_text_with_normalize(
    tmp_path: Path, mode: str, output: str, correct: bool
) -> None:
    """Without --benchmark, `--compare docmath` takes get_acc's path from the sample's mode, not from the
    value's type: a program's string result goes through float(), as evaluation.py's PoT path does."""
    from potrun.cli import main

    preds, out = tmp_path / "preds.jsonl", tmp_path / "out.jsonl"
    preds.write_text(json.dumps({"id": 1, "output": output, "gold": 29.31}) + "\n")
    assert main(["check", str(preds), "--compare", "docmath", "--mode", mode, "--out", str(out), "--quiet"]) == 0
    assert json.loads(out.read_text())["correct"] is correct
