"""Issue 37, item 4: headlines that mean what they say.

With several samples a record, the headline accuracy is pass@1 over all samples (each record's share of
correct samples, averaged: the unbiased estimate of one sample's accuracy), `--fail-under` uses it, and
the first sample's accuracy is labelled as such. A run that grades nothing reports its accuracy as null
and exits 1, in every output: the summary JSON, the table, the markdown and HTML reports."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest

from potrun.check.pipeline import RecordResult
from potrun.cli import main
from potrun.reports.html import load_report, render_markdown
from potrun.reports.table import Summary, render


def sampled(line: int, n: int, correct: int, first: bool) -> RecordResult:
    return RecordResult(
        line,
        line,
        "ok",
        correct=first,
        verdicts={"default": first},
        samples={"n": n, "executed": n, "correct": correct, "pass@k": {"1": correct / n}},
    )


@pytest.mark.parametrize("seed", range(6))
def test_the_headline_is_pass_at_1_over_all_samples(seed: int) -> None:
    rng = random.Random(seed)
    summary = Summary(("default",))
    shares, firsts = [], []
    for line in range(1, rng.randint(2, 60)):
        n = rng.choice([1, 1, 2, 3, 8])
        correct = rng.randint(0, n)
        first = rng.random() < (correct / n)  # any sample may be the first
        first = first if 0 < correct < n else correct == n
        if n == 1:
            summary.add(RecordResult(line, line, "ok", correct=first, verdicts={"default": first}))
            shares.append(float(first))
        else:
            summary.add(sampled(line, n, correct, first))
            shares.append(correct / n)
        firsts.append(first)
    data = summary.finish().to_json()
    assert data["accuracy"] == pytest.approx(sum(shares) / len(shares), abs=1e-6)
    assert data["accuracy_by_preset"]["default"] == data["accuracy"]
    if summary.sample_records:
        assert data["accuracy_measure"] == "pass@1 over all samples"
        assert data["first_sample_accuracy"] == pytest.approx(sum(firsts) / len(firsts), abs=1e-6)
    else:
        assert data["accuracy_measure"] == "verdict" and "first_sample_accuracy" not in data
    low, high = data["accuracy_ci95"]
    assert low <= data["accuracy"] <= high


def test_one_sample_a_record_keeps_the_accuracy_and_its_wilson_interval() -> None:
    summary = Summary(("default",))
    for line, correct in enumerate([True, False, True, True], 1):
        summary.add(RecordResult(line, line, "ok", correct=correct, verdicts={"default": correct}))
    data = summary.finish().to_json()
    assert data["accuracy"] == 0.75 and data["accuracy_interval"] == "wilson" and data["correct"] == 3


def test_nothing_graded_is_null_not_zero() -> None:
    summary = Summary(("default", "pot"))
    summary.add(RecordResult(1, 1, "ok"))  # ran, no gold
    data = summary.finish().to_json()
    assert data["graded"] == 0
    assert data["accuracy"] is None and data["accuracy_ci95"] is None and data["accuracy_se"] is None
    assert data["accuracy_by_preset"] == {"default": None, "pot": None}
    table = io.StringIO()
    render(summary, table)
    assert "null: no record was graded" in table.getvalue() and "0.0000  (0/0)" not in table.getvalue()


def write(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def run_check(tmp_path: Path, *args: str) -> tuple[int, dict[str, object]]:
    summary = tmp_path / "summary.json"
    out = tmp_path / "out.jsonl"
    code = main(["check", *args, "--out", str(out), "--summary-json", str(summary), "--quiet", "--workers", "1"])
    return code, json.loads(summary.read_text())


def three_choices(tmp_path: Path) -> Path:
    """vLLM's n=3: the first choice always wrong, the others right half the time (pass@1 = 1/3)."""
    return write(
        tmp_path / "preds.jsonl",
        [
            {"id": 1, "code": ["ans = 0", "ans = 4", "ans = 4"], "answer": 4},
            {"id": 2, "code": ["ans = 0", "ans = 1", "ans = 6"], "answer": 6},
            {"id": 3, "code": ["ans = 0", "ans = 1", "ans = 2"], "answer": 7},
        ],
    )


def test_check_headline_and_fail_under_use_pass_at_1(tmp_path: Path) -> None:
    preds = three_choices(tmp_path)
    code, summary = run_check(tmp_path, str(preds), "--fail-under", "0.3")
    assert code == 0  # pass@1 (2/3 + 1/3 + 0) / 3 = 1/3, while the first samples are all wrong
    assert summary["accuracy"] == pytest.approx(1 / 3, abs=1e-6)
    assert summary["first_sample_accuracy"] == 0.0
    code, _ = run_check(tmp_path, str(preds), "--fail-under", "0.34")
    assert code == 1


def test_check_with_several_presets_gives_each_its_pass_at_1(tmp_path: Path) -> None:
    preds = write(tmp_path / "p.jsonl", [{"id": 1, "code": ["ans = 72", "ans = 72.004", "ans = 1"], "answer": "72"}])
    code, summary = run_check(tmp_path, str(preds), "--compare", "default,pot")
    assert code == 0
    # default (rel_tol 1e-4 of a whole gold: nearer than 0.5) takes 72 and 72.004; pot rounds 72.004 to 1 dp
    assert summary["accuracy_by_preset"] == {
        "default": pytest.approx(2 / 3, abs=1e-6),
        "pot": pytest.approx(2 / 3, abs=1e-6),
    }


def test_a_run_that_grades_nothing_is_null_and_exits_1_in_every_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    preds = write(tmp_path / "preds.jsonl", [{"id": i, "code": f"ans = {i}", "answer": i} for i in range(3)])
    summary_path, out = tmp_path / "summary.json", tmp_path / "out.jsonl"
    args = ["check", str(preds), "--gold-field", "gold_typo", "--out", str(out), "--summary-json", str(summary_path)]
    code = main([*args, "--workers", "1"])
    assert code == 1
    err = capsys.readouterr().err
    assert "no record was graded" in err and "null" in err and "0.0000" not in err
    summary = json.loads(summary_path.read_text())
    assert summary["accuracy"] is None and summary["scored"] == 3 and summary["graded"] == 0
    for given in (summary_path, None):  # the report from the run's summary, and rebuilt from --out
        text = render_markdown(load_report(out, given))
        assert "**Accuracy null**" in text and "0.0000" not in text.split("## Statuses")[0]
