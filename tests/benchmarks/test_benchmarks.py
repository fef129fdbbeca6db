"""The `--benchmark` seam (potrun.benchmarks, pipeline.Plan/run_plans) with a toy benchmark: each record's
plan runs its programs under its own limits, its judge gives the line of `--out`, bad input stays a
bad_record, and the summary carries the benchmark's metrics. The real benchmarks have their own tests."""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from potrun.benchmarks import BENCHMARKS, get_benchmark
from potrun.benchmarks.base import judged_without_programs, unreadable, verdict
from potrun.check.pipeline import Plan, Program, RecordResult
from potrun.check.records import Record
from potrun.cli import EXIT_OK, EXIT_USAGE, main
from potrun.types import BadRecord, UsageError


@dataclass(frozen=True)
class ToyRun:
    """Records with `code` run it (1 s CPU) and compare the value; records with `answer` are judged on
    text, half credit for a right answer (a continuous score)."""

    name: str = "toy"

    def plan(self, item: Record | BadRecord) -> Plan:
        bad = unreadable(item)
        if bad is not None:
            return bad
        assert isinstance(item, Record)
        data = item.data
        if "code" in data:
            return Plan(
                (Program(data["code"], timeout_s=1.0),),
                lambda results: verdict(
                    item.line,
                    data["id"],
                    correct=results[0].value == data["gold"],
                    outcome=results[0],
                    fields={"kind": "program"},
                ),
            )
        if data.get("explode") == "plan":
            raise ValueError("the rules cannot read this record")
        if data.get("explode") == "judge":
            return judged_without_programs(lambda: verdict(item.line, data["id"], correct=1 / 0 == 0))
        right = data["answer"] == data["gold"]
        return judged_without_programs(
            lambda: verdict(item.line, data["id"], correct=right, score=0.5 if right else 0.0, fields={"kind": "text"})
        )

    def metrics(self, results: Sequence[RecordResult]) -> dict[str, Any]:
        scores = [r.score for r in results if r.score is not None]
        return {"records": len(results), "mean_score": sum(scores) / len(scores)}


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    module = types.ModuleType("potrun_toy_benchmark")
    module.SANDBOX = {"policy": "trusted"}  # type: ignore[attr-defined]
    module.for_file = lambda path, strict=False: ToyRun()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "potrun_toy_benchmark", module)
    monkeypatch.setitem(BENCHMARKS, "toy", "potrun_toy_benchmark")
    yield "toy"


RECORDS = [
    '{"id": 1, "code": "def solution():\\n    return 42", "gold": 42}',
    '{"id": 2, "code": "def solution():\\n    while True:\\n        pass", "gold": 42}',
    '{"id": 3, "answer": 3, "gold": 3}',
    "not json",
    '{"id": 5, "code": "def solution():\\n    return 41", "gold": 42}',
]


def _check(tmp_path: Path, *extra: str) -> tuple[int, list[dict[str, Any]], dict[str, Any]]:
    preds = tmp_path / "preds.jsonl"
    preds.write_text("\n".join(RECORDS) + "\n")
    out, summary = tmp_path / "out.jsonl", tmp_path / "summary.json"
    code = main(
        [
            "check",
            str(preds),
            "--benchmark",
            "toy",
            "--out",
            str(out),
            "--summary-json",
            str(summary),
            "--quiet",
            *extra,
        ]
    )
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    return code, lines, json.loads(summary.read_text())


def test_each_record_gets_its_judges_verdict_in_input_order(toy: str, tmp_path: Path) -> None:
    code, lines, _ = _check(tmp_path)
    assert code == EXIT_OK
    assert [line["line"] for line in lines] == [1, 2, 3, 4, 5]
    assert [line["correct"] for line in lines] == [True, False, True, None, False]
    assert [line["score"] for line in lines] == [1.0, 0.0, 0.5, None, 0.0]
    assert lines[0]["value"] == 42 and lines[0]["fields"] == {"kind": "program"}


def test_a_programs_own_limit_applies(toy: str, tmp_path: Path) -> None:
    """The toy's 1 s limit, not the sandbox's 10 s default: the loop is a CPU timeout of about 1 s."""
    _, lines, _ = _check(tmp_path)
    assert lines[1]["status"] == "timeout" and lines[1]["timeout_kind"] == "cpu"
    assert 0.9 < lines[1]["cpu_s"] < 5


def test_bad_input_is_a_bad_record_naming_its_line(toy: str, tmp_path: Path) -> None:
    _, lines, summary = _check(tmp_path)
    assert lines[3]["status"] == "bad_record" and "invalid JSON" in lines[3]["error"]
    assert summary["bad_record"] == 1


def test_the_summary_has_the_benchmarks_metrics_and_accuracy(toy: str, tmp_path: Path) -> None:
    _, _, summary = _check(tmp_path)
    assert summary["metrics"] == {"records": 5, "mean_score": pytest.approx(1.5 / 4)}
    assert summary["benchmark"] == "toy"
    assert (summary["graded"], summary["correct"]) == (4, 2)


def test_the_benchmarks_sandbox_settings_apply_unless_the_command_line_sets_them(toy: str, tmp_path: Path) -> None:
    assert _check(tmp_path)[2]["policy"] == "trusted"
    assert _check(tmp_path, "--policy", "restricted")[2]["policy"] == "restricted"


def test_resumed_results_count_in_the_metrics(toy: str, tmp_path: Path) -> None:
    _check(tmp_path)
    out = tmp_path / "out.jsonl"
    out.write_text("".join(out.read_text().splitlines(keepends=True)[:2]))  # as if interrupted after 2 lines
    code, lines, summary = _check(tmp_path, "--resume")
    assert code == EXIT_OK and [line["line"] for line in lines] == [1, 2, 3, 4, 5]
    assert summary["metrics"]["records"] == 5


def test_gold_file_is_refused(toy: str, tmp_path: Path) -> None:
    (tmp_path / "gold.jsonl").write_text('{"id": 1, "gold": 1}\n')
    preds = tmp_path / "preds.jsonl"
    preds.write_text(RECORDS[0] + "\n")
    assert main(["check", str(preds), "--benchmark", "toy", "--gold", str(tmp_path / "gold.jsonl")]) == EXIT_USAGE


def test_an_error_of_the_rules_on_one_record_is_its_bad_record_and_the_run_goes_on(toy: str, tmp_path: Path) -> None:
    preds = tmp_path / "preds.jsonl"
    preds.write_text('{"id": 1, "explode": "plan"}\n{"id": 2, "explode": "judge"}\n' + RECORDS[0] + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["check", str(preds), "--benchmark", "toy", "--out", str(out), "--quiet"]) == EXIT_OK
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["status"] for line in lines] == ["bad_record", "bad_record", "ok"]
    assert "ValueError: the rules cannot read this record" in lines[0]["error"]
    assert "ZeroDivisionError" in lines[1]["error"] and lines[2]["correct"] is True


def test_an_unknown_benchmark_names_the_choices() -> None:
    with pytest.raises(UsageError, match="choose one of"):
        get_benchmark("no-such-benchmark")
