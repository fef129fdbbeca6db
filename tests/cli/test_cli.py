"""`potrun check` through `main(argv)`: streaming, field mapping, bad records, exit codes, summaries."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from paths import REPO

from potrun.check.records import Record, read_records
from potrun.cli import main
from potrun.types import BadRecord

EXAMPLE = REPO / "examples" / "docmath_outputs.jsonl"
FENCE = "```"


def write_jsonl(path: Path, records: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def check(tmp_path: Path, *args: str) -> tuple[int, dict, list[dict]]:
    out, summary = tmp_path / "out.jsonl", tmp_path / "summary.json"
    code = main(["check", *args, "--out", str(out), "--summary-json", str(summary), "--quiet", "--workers", "1"])
    results = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return code, json.loads(summary.read_text()) if summary.exists() else {}, results


def test_bundled_example(tmp_path: Path) -> None:
    code, summary, results = check(tmp_path, str(EXAMPLE))
    assert code == 0
    assert (summary["total"], summary["scored"], summary["skipped"], summary["bad_record"]) == (11, 10, 1, 0)
    assert summary["correct"] == 5 and summary["accuracy"] == 0.5
    by_id = {r["id"]: r for r in results}
    assert by_id["docmath-001"]["correct"] is True and by_id["docmath-001"]["entry"] == "solution"
    assert by_id["docmath-004"]["value"] == -250 and by_id["docmath-004"]["correct"] is False
    assert by_id["docmath-007"]["status"] == "policy_violation"
    assert by_id["docmath-008"]["extraction"] == "truncated"
    assert by_id["docmath-009"]["error_type"] == "ZeroDivisionError"
    assert [r["line"] for r in results] == list(range(1, 12))  # input order, every line
    for key in ("total", "scored", "skipped", "correct", "accuracy", "status_counts", "elapsed_s", "programs_per_s"):
        assert key in summary


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--fail-under", "0.9"], 1),
        (["--fail-under", "0.5"], 0),
        (["--compare", "no-such-preset"], 2),
        (["--workers", "0"], 2),
    ],
)
def test_exit_codes(tmp_path: Path, args: list[str], expected: int) -> None:
    try:
        code, _, _ = check(tmp_path, str(EXAMPLE), *args)
    except SystemExit as exc:  # argparse rejects bad values itself, with exit code 2
        code = int(exc.code or 0)
    assert code == expected


def test_unreadable_input_exits_2(tmp_path: Path) -> None:
    code, _, _ = check(tmp_path, str(tmp_path / "missing.jsonl"))
    assert code == 2


def test_bad_records_are_counted_and_the_rest_scored(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "preds.jsonl",
        [
            {"id": "a", "code": "ans = 2", "answer": 2},
            "{not json",
            "[1, 2]",
            {"id": "d", "code": 42, "answer": 1},
            {"id": "e", "question": "no program here"},
            {"id": "f", "code": "ans = 3", "answer": 4},
        ],
    )
    code, summary, results = check(tmp_path, str(path))
    assert code == 0
    assert [r["status"] for r in results] == ["ok", "bad_record", "bad_record", "bad_record", "skipped", "ok"]
    assert summary["scored"] + summary["skipped"] + summary["bad_record"] == summary["total"] == 6
    assert "line" in json.dumps(results[1]) and results[1]["line"] == 2
    assert "'code'" in results[3]["error"]


def test_strict_stops_at_the_first_bad_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_jsonl(tmp_path / "preds.jsonl", [{"code": "ans = 1", "answer": 1}, "{oops", {"code": "ans = 1"}])
    code, _, results = check(tmp_path, str(path), "--strict")
    assert code == 2
    assert "line 2" in capsys.readouterr().err
    assert [r["line"] for r in results] == [1]


def test_field_mapping_and_gold_file(tmp_path: Path) -> None:
    preds = write_jsonl(
        tmp_path / "preds.jsonl",
        [
            {"qid": "q1", "completion": f"{FENCE}python\ndef solution():\n    return 6 * 7\n{FENCE}"},
            {"qid": "q2", "completion": "ans = 1.5"},
        ],
    )
    golds = write_jsonl(tmp_path / "golds.jsonl", [{"qid": "q1", "target": 42}, {"qid": "q2", "target": 2}])
    code, summary, results = check(
        tmp_path,
        str(preds),
        "--code-field",
        "completion",
        "--id-field",
        "qid",
        "--gold",
        str(golds),
        "--gold-field",
        "target",
    )
    assert code == 0
    assert [(r["id"], r["gold"], r["correct"]) for r in results] == [("q1", 42, True), ("q2", 2, False)]
    assert summary["accuracy"] == 0.5


def test_json_array_input_matches_jsonl(tmp_path: Path) -> None:
    records = [{"id": i, "code": f"ans = {i} * 2", "answer": i * 2} for i in range(5)]
    array = tmp_path / "preds.json"
    array.write_text("[\n" + ",\n".join(json.dumps(r) for r in records) + "\n]\n")
    _, summary_array, results_array = check(tmp_path, str(array))
    _, summary_lines, results_lines = check(tmp_path, str(write_jsonl(tmp_path / "p.jsonl", records)))
    assert [r["value"] for r in results_array] == [r["value"] for r in results_lines] == [0, 2, 4, 6, 8]
    assert summary_array["accuracy"] == summary_lines["accuracy"] == 1.0


def test_records_are_streamed_not_loaded_whole(tmp_path: Path) -> None:
    """A FIFO gives the reader one line at a time: the first record arrives before the rest exist."""
    fifo = tmp_path / "preds.fifo"
    os.mkfifo(fifo)
    first_seen = threading.Event()

    def writer() -> None:
        with open(fifo, "w") as handle:
            handle.write(json.dumps({"code": "ans = 1"}) + "\n")
            handle.flush()
            assert first_seen.wait(10), "the reader waited for the whole file"
            handle.write(json.dumps({"code": "ans = 2"}) + "\n")

    thread = threading.Thread(target=writer)
    thread.start()
    records = read_records(fifo)
    first = next(records)
    first_seen.set()
    rest = list(records)
    thread.join()
    assert isinstance(first, Record) and first.data == {"code": "ans = 1"}
    assert [r.data for r in rest if isinstance(r, Record)] == [{"code": "ans = 2"}]


def test_bad_json_array_element_reports_its_line(tmp_path: Path) -> None:
    path = tmp_path / "preds.json"
    path.write_text('[\n  {"code": "ans = 1"},\n  7\n]')
    items = list(read_records(path))
    assert isinstance(items[0], Record) and isinstance(items[1], BadRecord) and items[1].line == 3


def test_several_samples_report_pass_at_k_and_majority(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "preds.jsonl",
        [
            {"id": 1, "code": ["ans = 3", "ans = 4", "ans = 4"], "answer": 4},
            {"id": 2, "code": ["ans = 5", "ans = 5", "ans = 6"], "answer": 6},
        ],
    )
    code, summary, results = check(tmp_path, str(path), "--k", "1,2")
    assert code == 0
    assert summary["accuracy"] == pytest.approx(0.5)  # pass@1 over all samples: (2/3 + 1/3) / 2
    assert summary["accuracy_measure"] == "pass@1 over all samples"
    assert summary["first_sample_accuracy"] == 0.0  # the first sample of each record is wrong
    assert results[0]["samples"]["majority_correct"] is True and results[1]["samples"]["majority_correct"] is False
    assert summary["samples"]["majority_accuracy"] == 0.5
    assert summary["samples"]["pass@k"]["1"] == pytest.approx((2 / 3 + 1 / 3) / 2)
    assert summary["samples"]["pass@k"]["2"] == pytest.approx((1.0 + 2 / 3) / 2)


def test_run_prints_one_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = tmp_path / "program.py"
    program.write_text("def solution():\n    return 2 ** 10\n")
    assert main(["run", str(program)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["status"], result["value"], result["entry"]) == ("ok", 1024, "solution")
