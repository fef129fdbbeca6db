"""`potrun diff` on two real runs whose changes are known: which verdicts changed, each way, and
McNemar's exact p-value against the binomial computed here."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from potrun.cli import main

GOLD = 5


def run(tmp_path: Path, name: str, answers: list[int | str]) -> Path:
    """`potrun check` on records 0..n-1 whose programs answer `answers`; its --out file."""
    preds = tmp_path / f"{name}.jsonl"
    lines = [
        json.dumps({"id": f"q{i}", "output": f"ans = {answer}", "answer": GOLD}) for i, answer in enumerate(answers)
    ]
    preds.write_text("\n".join(lines) + "\n")
    out = tmp_path / f"{name}.out.jsonl"
    assert main(["check", str(preds), "--out", str(out), "--quiet", "--workers", "1"]) == 0
    return out


def diff_json(a: Path, b: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    capsys.readouterr()
    assert main(["diff", str(a), str(b), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def binomial_two_sided(only_a: int, only_b: int) -> float:
    n = only_a + only_b
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(min(only_a, only_b) + 1)) / 2**n)


def test_changes_both_ways_and_a_difference_that_is_not_significant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = run(tmp_path, "a", [5, 5, 0, 0, 5, 0, 5, 5, 0, 5])
    b = run(tmp_path, "b", [5, 0, 5, 5, 5, 0, 5, 5, 5, "1 / 0"])  # fixed: q2 q3 q8; broken: q1 q9
    diff = diff_json(a, b, capsys)
    assert [c["id"] for c in diff["became_correct"]] == ["q2", "q3", "q8"]
    assert [c["id"] for c in diff["became_wrong"]] == ["q1", "q9"]
    assert diff["became_wrong"][1] == {
        "line": 10,
        "id": "q9",
        "gold": GOLD,
        "value_a": 5,
        "value_b": None,
        "status_a": "ok",
        "status_b": "error",
    }
    assert (diff["paired"], diff["both_correct"], diff["both_wrong"]) == (10, 4, 1)
    assert diff["accuracy_a"]["value"] == 0.6 and diff["accuracy_b"]["value"] == 0.7
    assert diff["difference"] == pytest.approx(0.1)
    assert diff["mcnemar_p"] == pytest.approx(binomial_two_sided(2, 3)) and diff["significant"] is False
    assert main(["diff", str(a), str(b)]) == 0
    text = capsys.readouterr().out
    assert "not significant at 0.05" in text and 'line 3 (id "q2")' in text


def test_eight_fixes_and_no_break_are_significant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = run(tmp_path, "a", [0] * 8 + [5] * 4)
    b = run(tmp_path, "b", [5] * 12)
    diff = diff_json(a, b, capsys)
    assert len(diff["became_correct"]) == 8 and diff["became_wrong"] == []
    assert diff["mcnemar_p"] == pytest.approx(2 / 2**8) and diff["significant"] is True
    assert main(["diff", str(a), str(b)]) == 0
    text = capsys.readouterr().out
    assert ": significant at 0.05" in text and "not significant" not in text


def test_records_only_one_run_has_or_of_another_input_are_unpaired(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = run(tmp_path, "a", [5, 0, 5, 0])
    shorter = tmp_path / "shorter.jsonl"
    lines = a.read_text().splitlines()
    other = json.loads(lines[2]) | {"id": "not-q2"}  # line 3 of another input
    shorter.write_text("\n".join([lines[0], lines[1], json.dumps(other)]) + "\n")
    diff = diff_json(a, shorter, capsys)
    assert (diff["paired"], diff["unpaired_a"], diff["unpaired_b"]) == (2, 2, 1)
    assert diff["became_correct"] == diff["became_wrong"] == [] and diff["mcnemar_p"] == 1.0


def test_a_file_that_is_not_an_out_file_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = run(tmp_path, "a", [5])
    preds = tmp_path / "a.jsonl"  # the input, not the results: no line numbers
    assert main(["diff", str(a), str(preds)]) == 2
    assert "not a potrun --out line" in capsys.readouterr().err
