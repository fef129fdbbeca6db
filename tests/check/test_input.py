"""Input that cannot kill a run: bad bytes, compressed and Parquet files, streams, output paths,
missing golds, field paths, and runs that score nothing. Real CLI (in-process `main` or a subprocess)
and a real sandbox."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from paths import REPO

from potrun.check.records import Record, count_records, field_value, first_field, is_missing, read_records
from potrun.cli import main
from potrun.types import BadRecord

DATA = REPO / "tests" / "data"
EXAMPLES = REPO / "examples"  # the harness-shaped files are bundled examples (README, "Input")
EXAMPLE = REPO / "examples" / "docmath_outputs.jsonl"
GOOD = [{"id": f"r{i}", "code": f"ans = {i} * 2", "answer": i * 2} for i in range(4)]


def jsonl(records: list[Any]) -> bytes:
    return b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in records)


def check(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    out, summary = tmp_path / "out.jsonl", tmp_path / "summary.json"
    code = main(["check", *args, "--out", str(out), "--summary-json", str(summary), "--quiet", "--workers", "1"])
    results = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return code, json.loads(summary.read_text()) if summary.exists() else {}, results


def potrun(*args: str, stdin: bytes | None = None, timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "potrun.cli", *args], input=stdin, capture_output=True, timeout=timeout, cwd=REPO
    )


# -- bad lines, whatever their bytes ---------------------------------------------------------------------

BAD_LINES = [
    (b'\xff\xfe{"code": "ans = 1"}', "invalid UTF-8"),
    (b'{"code": "ans = 1"\x00}', "invalid JSON"),
    (b'{"code": "' + b"x" * 300_000 + b'"}', "longer than"),
    (b'{"a": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", "nested deeper"),
    (b'{"a": ' + b"[" * 100 + b"]" * 100 + b"}", "nested deeper"),
    (b'{"n": 1' + b"0" * 5000 + b"}", "invalid JSON"),
    (b"", "empty line"),
    (b"[1, 2]", "not an array"),
]


@pytest.mark.parametrize(
    ("line", "reason"), BAD_LINES, ids=[f"{n}-{reason}" for n, (_, reason) in enumerate(BAD_LINES)]
)
def test_a_bad_line_is_a_bad_record_and_the_rest_is_read(tmp_path: Path, line: bytes, reason: str) -> None:
    path = tmp_path / "preds.jsonl"
    path.write_bytes(jsonl([GOOD[0], line, GOOD[1]]))
    items = list(read_records(path, max_line_bytes=200_000))
    assert [type(item) for item in items] == [Record, BadRecord, Record]
    assert items[1].line == 2 and (reason in items[1].message or reason == "not an array")
    assert items[2].line == 3 and items[2].data == GOOD[1]


def test_a_huge_line_is_read_past_in_pieces(tmp_path: Path) -> None:
    path = tmp_path / "preds.jsonl"
    path.write_bytes(jsonl([GOOD[0], b'{"code": "' + b"y" * (3 << 20) + b'"}', GOOD[1]]))
    code, summary, results = check(tmp_path, str(path), "--max-record-mb", "1")
    assert code == 0 and [r["status"] for r in results] == ["ok", "bad_record", "ok"]
    assert "longer than 1048576 bytes" in results[1]["error"]
    assert (summary["total"], summary["bad_record"]) == (3, 1)


def test_a_truncated_last_line_says_so(tmp_path: Path) -> None:
    path = tmp_path / "preds.jsonl"
    path.write_bytes(jsonl(GOOD[:2]) + b'{"id": "r2", "code": "ans')
    code, _summary, results = check(tmp_path, str(path))
    assert code == 0 and [r["status"] for r in results] == ["ok", "ok", "bad_record"]
    assert "truncated" in results[2]["error"] and results[2]["line"] == 3


def test_a_non_utf8_line_does_not_end_the_run(tmp_path: Path) -> None:
    path = tmp_path / "preds.jsonl"
    path.write_bytes(jsonl([GOOD[0], b'{"code": "ans = \xe9"}', GOOD[1]]))
    code, summary, results = check(tmp_path, str(path))
    assert code == 0 and summary["correct"] == 2
    assert results[1]["status"] == "bad_record" and "invalid UTF-8 at byte 17" in results[1]["error"]


def test_a_broken_array_scores_what_came_before_and_reports_the_break(tmp_path: Path) -> None:
    path = tmp_path / "preds.json"
    path.write_text(
        "[\n"
        + ",\n".join(json.dumps(r) for r in GOOD[:3])
        + ',\n{"id": "r3", "code": oops},\n'
        + json.dumps(GOOD[3])
        + "\n]\n"
    )
    code, summary, results = check(tmp_path, str(path))
    assert code == 0
    assert [r["status"] for r in results] == ["ok", "ok", "ok", "bad_record"]
    assert results[3]["line"] == 5 and "the rest of the array is not read" in results[3]["error"]
    assert summary["correct"] == 3 and summary["bad_record"] == 1


@pytest.mark.parametrize("text", ['[{"id": 1, "code": "ans = 1"}', "[", '[{"id": 1, "code": "ans = 1"} {"id": 2}]'])
def test_an_unclosed_or_unseparated_array_is_one_bad_record_at_the_end(tmp_path: Path, text: str) -> None:
    path = tmp_path / "preds.json"
    path.write_text(text)
    items = list(read_records(path))
    assert isinstance(items[-1], BadRecord) and "the rest of the array is not read" in items[-1].message
    assert all(isinstance(item, Record) for item in items[:-1])


def test_a_jsonl_file_whose_first_line_is_an_array_is_read_as_lines(tmp_path: Path) -> None:
    path = tmp_path / "preds.jsonl"
    path.write_bytes(jsonl([[GOOD[0], GOOD[1]], GOOD[2], GOOD[3]]))
    items = list(read_records(path))
    assert [type(item) for item in items] == [BadRecord, Record, Record] and items[1].line == 2
    path.write_bytes(jsonl([[GOOD[0], GOOD[1]]]))  # one line alone: a JSON array file
    assert [item.data for item in read_records(path) if isinstance(item, Record)] == GOOD[:2]


def test_text_after_an_array_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "preds.json"
    path.write_text("[\n" + json.dumps(GOOD[0]) + "\n]\n" + json.dumps(GOOD[1]) + "\n")
    items = list(read_records(path))
    assert isinstance(items[0], Record) and isinstance(items[1], BadRecord) and items[1].line == 4
    assert "after the end" in items[1].message


WRONG_TYPES = [
    ({"code": 7, "answer": 1}, "bad_record", None),
    ({"code": [1, 2], "answer": 1}, "bad_record", None),
    ({"code": {"src": "ans = 1"}, "answer": 1}, "bad_record", None),
    ({"code": [], "answer": 1}, "bad_record", None),
    ({"code": "ans = 1", "answer": {"value": 1}}, "ok", False),
    ({"code": "ans = 1", "answer": [1]}, "ok", False),
    ({"code": "ans = 1", "answer": 1, "id": [1, 2]}, "ok", True),
    ({"code": "ans = 1", "answer": 1, "id": {"a": None}}, "ok", True),
    ({"code": "ans = 1", "answer": 1, "checklist": "x"}, "bad_record", None),
    ({"code": "ans = 1", "answer": 1, "checker": 3}, "bad_record", None),
    ({"code": "ans = 1\u0000", "answer": 1}, "syntax_error", False),
]


def test_wrong_types_in_every_field(tmp_path: Path) -> None:
    path = tmp_path / "preds.jsonl"
    path.write_bytes(jsonl([record for record, _, _ in WRONG_TYPES]))
    code, _summary, results = check(tmp_path, str(path))
    assert code == 0
    assert [(r["status"], r["correct"]) for r in results] == [(status, correct) for _, status, correct in WRONG_TYPES]
    assert [r["id"] for r in results][6:8] == [[1, 2], {"a": None}]


def test_a_lone_surrogate_in_the_program_is_a_bad_record(tmp_path: Path) -> None:
    path = tmp_path / "preds.jsonl"
    path.write_bytes(jsonl([GOOD[0], {"code": "ans = '\ud800'"}]))
    code, _, results = check(tmp_path, str(path))
    assert code == 0 and results[1]["status"] == "bad_record" and "surrogate" in results[1]["error"]


# -- formats -----------------------------------------------------------------------------------------------


def _reference(tmp_path: Path) -> list[dict[str, Any]]:
    _, _, results = check(tmp_path, str(EXAMPLE))
    return _without_timings(results)


def _without_timings(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The lines without timings and digests; a number gold as a float (a Parquet column holds one
    type: the example's golds 250 and 15.0 are both doubles there, so the digests differ too)."""
    return [
        {k: float(v) if k == "gold" and type(v) in (int, float) else v for k, v in r.items()}
        for r in ({k: v for k, v in r.items() if k not in ("wall_s", "cpu_s", "digest")} for r in results)
    ]


def _write_format(path: Path, kind: str) -> Path:
    raw = EXAMPLE.read_bytes()
    if kind == "gz":
        path = path.with_suffix(".jsonl.gz")
        path.write_bytes(gzip.compress(raw))
    elif kind == "gz-array":
        path = path.with_suffix(".json.gz")
        records = [json.loads(line) for line in raw.splitlines()]
        path.write_bytes(gzip.compress(("[\n" + ",\n".join(json.dumps(r) for r in records) + "\n]").encode()))
    elif kind == "zst":
        zstandard = pytest.importorskip("zstandard")
        path = path.with_suffix(".jsonl.zst")
        path.write_bytes(zstandard.ZstdCompressor().compress(raw))
    else:
        pa, pq = pytest.importorskip("pyarrow"), pytest.importorskip("pyarrow.parquet")
        path = path.with_suffix(".parquet")
        records = [json.loads(line) for line in raw.splitlines()]
        pq.write_table(pa.Table.from_pylist(records), path, row_group_size=4)  # several row groups
    return path


@pytest.mark.parametrize("kind", ["gz", "gz-array", "zst", "parquet"])
def test_compressed_and_parquet_inputs_score_as_the_jsonl(tmp_path: Path, kind: str) -> None:
    expected = _reference(tmp_path)
    path = _write_format(tmp_path / "preds", kind)
    code, summary, results = check(tmp_path, str(path))
    assert code == 0 and summary["total"] == 11 and summary["correct"] == 5
    if kind == "gz-array":  # an array's lines are where its elements start (and the ids default to them)
        assert [r["line"] for r in results] == list(range(2, 13))
        assert [(r["status"], r["value"], r["correct"]) for r in results] == [
            (r["status"], r["value"], r["correct"]) for r in expected
        ]
        return
    assert _without_timings(results) == expected


def test_parquet_rows_are_counted_and_its_values_are_plain_data(tmp_path: Path) -> None:
    pa, pq = pytest.importorskip("pyarrow"), pytest.importorskip("pyarrow.parquet")
    import datetime
    import decimal

    table = pa.table(
        {
            "code": ["ans = 1", "ans = 2"],
            "answer": [decimal.Decimal("1.0"), decimal.Decimal("3.0")],
            "when": [datetime.date(2024, 1, 1), None],
            "blob": [b"\xff\x00", b"ok"],
        }
    )
    path = tmp_path / "preds.parquet"
    pq.write_table(table, path)
    assert count_records(path) == 2
    code, _summary, results = check(tmp_path, str(path))
    assert code == 0 and [r["line"] for r in results] == [1, 2]
    assert [r["gold"] for r in results] == ["1.0", "3.0"] and [r["correct"] for r in results] == [True, False]


def test_a_truncated_gzip_scores_what_it_holds_and_reports_the_break(tmp_path: Path) -> None:
    records = [{"id": i, "code": f"ans = {i}", "answer": i, "pad": os.urandom(200).hex()} for i in range(200)]
    path = tmp_path / "preds.jsonl.gz"
    path.write_bytes(gzip.compress(jsonl(records))[:-5000])
    code, _summary, results = check(tmp_path, str(path))
    assert code == 0 and results[-1]["status"] == "bad_record" and "broken" in results[-1]["error"]
    assert all(r["correct"] for r in results[:-1]) and len(results) > 1
    assert [r["line"] for r in results] == list(range(1, len(results) + 1))


def test_a_missing_extra_is_named(tmp_path: Path) -> None:
    path = _write_format(tmp_path / "preds", "gz")
    zst = tmp_path / "preds.zst"
    zst.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 16)
    parquet = tmp_path / "preds.parquet"
    parquet.write_bytes(b"PAR1" + b"\x00" * 16)
    for target, extra, module in ((zst, "zstd", "zstandard"), (parquet, "parquet", "pyarrow")):
        script = (
            f"import sys; sys.modules[{module!r}] = None; from potrun.cli import main; "
            f"sys.exit(main(['check', {str(target)!r}, '--quiet']))"
        )
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
        assert done.returncode == 2, done.stderr
        assert f"pip install 'potrun[{extra}]'" in done.stderr.decode() and b"Traceback" not in done.stderr
    assert path.exists()


def test_a_file_that_claims_parquet_but_is_not_exits_2(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    path = tmp_path / "preds.parquet"
    path.write_bytes(b"PAR1 not really")
    code, _, _ = check(tmp_path, str(path))
    assert code == 2


# -- streams: stdin, pipes, FIFOs, stdout ------------------------------------------------------------------


def test_stdin_is_read_as_it_comes_and_stdout_gets_the_lines(tmp_path: Path) -> None:
    done = potrun("check", "-", "--out", "-", "--quiet", "--workers", "1", stdin=EXAMPLE.read_bytes())
    assert done.returncode == 0, done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["line"] for r in results] == list(range(1, 12)) and sum(bool(r["correct"]) for r in results) == 5


def test_a_gzip_stream_on_stdin_and_dev_stdout(tmp_path: Path) -> None:
    done = potrun(
        "check",
        "/dev/stdin",
        "--out",
        "/dev/stdout",
        "--summary-json",
        str(tmp_path / "s.json"),
        "--quiet",
        "--workers",
        "1",
        stdin=gzip.compress(EXAMPLE.read_bytes()),
    )
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 11
    assert json.loads((tmp_path / "s.json").read_text())["total"] == 11


def test_summary_json_to_stdout(tmp_path: Path) -> None:
    done = potrun("check", str(EXAMPLE), "--summary-json", "-", "--quiet", "--workers", "1")
    assert done.returncode == 0 and json.loads(done.stdout)["correct"] == 5


def test_a_fifo_is_scored_as_it_comes(tmp_path: Path) -> None:
    """Results come out while the writer still holds the input open: nothing waits for its end (the
    pool reads a few records ahead of the one it runs, so the test leaves room for that)."""
    preds, out = tmp_path / "preds.fifo", tmp_path / "out.fifo"
    os.mkfifo(preds)
    os.mkfifo(out)
    process = subprocess.Popen(
        [sys.executable, "-m", "potrun.cli", "check", str(preds), "--out", str(out), "--quiet", "--workers", "1"],
        cwd=REPO,
        stderr=subprocess.PIPE,
    )
    records = [{"id": f"s{i}", "code": f"ans = {i}", "answer": i} for i in range(400)]
    seen: list[dict[str, Any]] = []
    before_the_end = threading.Event()

    def talk() -> None:
        with open(preds, "w") as writer, open(out) as reader:
            for record in records:
                writer.write(json.dumps(record) + "\n")
                writer.flush()
            seen.append(json.loads(reader.readline()))  # the input is still open here
            before_the_end.set()
            writer.close()
            seen.extend(json.loads(line) for line in reader)

    thread = threading.Thread(target=talk, daemon=True)
    thread.start()
    thread.join(120)
    assert before_the_end.is_set(), "no result came before the end of the input"
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    assert [r["id"] for r in seen] == [r["id"] for r in records] and all(r["correct"] for r in seen)


def test_resume_needs_a_regular_output_file(tmp_path: Path) -> None:
    done = potrun("check", str(EXAMPLE), "--out", "-", "--resume", "--quiet")
    assert done.returncode == 2 and b"regular file" in done.stderr


def test_resume_reads_a_piped_input(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    lines = EXAMPLE.read_bytes().splitlines(keepends=True)
    first = potrun("check", "-", "--out", str(out), "--quiet", "--workers", "1", stdin=b"".join(lines[:4]))
    assert first.returncode == 0
    again = potrun("check", "-", "--out", str(out), "--resume", "--quiet", "--workers", "1", stdin=b"".join(lines))
    assert again.returncode == 0, again.stderr
    assert [json.loads(line)["line"] for line in out.read_text().splitlines()] == list(range(1, 12))


# -- outputs checked before the run -----------------------------------------------------------------------


@pytest.mark.parametrize("option", ["--out", "--summary-json"])
@pytest.mark.parametrize("where", ["missing-dir", "directory", "the-input"])
def test_an_unwritable_output_stops_before_the_run(tmp_path: Path, option: str, where: str) -> None:
    """The input is a FIFO nobody writes: a run that started would wait on it forever."""
    preds = tmp_path / "preds.fifo"
    os.mkfifo(preds)
    target = {"missing-dir": tmp_path / "no" / "such.json", "directory": tmp_path, "the-input": preds}[where]
    done = potrun("check", str(preds), option, str(target), "--quiet", timeout=60)
    assert done.returncode == 2
    assert f"{option} {target}" in done.stderr.decode() and b"Traceback" not in done.stderr
    assert not (tmp_path / "no").exists()


def test_both_outputs_on_stdout_is_refused() -> None:
    assert main(["check", str(EXAMPLE), "--out", "-", "--summary-json", "-", "--quiet"]) == 2


def test_validate_checks_its_outputs_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    golds = DATA / "golds_validate.jsonl"
    assert main(["validate", str(golds), "--fix-answers", str(tmp_path), "--quiet"]) == 2
    assert f"--fix-answers {tmp_path}: it is a directory" in capsys.readouterr().err
    assert main(["validate", str(golds), "--out", str(tmp_path / "no" / "x.jsonl"), "--quiet"]) == 2
    assert "--out" in capsys.readouterr().err


# -- missing golds, nothing scored --------------------------------------------------------------------------


def test_a_record_without_a_gold_in_the_gold_file_is_no_gold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    preds = tmp_path / "preds.jsonl"
    preds.write_bytes(jsonl([{"id": r["id"], "code": r["code"]} for r in GOOD]))
    golds = tmp_path / "golds.jsonl"
    golds.write_bytes(jsonl([{"id": r["id"], "answer": r["answer"]} for r in GOOD[:2]]))
    code, summary, results = check(tmp_path, str(preds), "--gold", str(golds))
    assert code == 0
    assert [r["status"] for r in results] == ["ok", "ok", "no_gold", "no_gold"]
    assert (summary["total"], summary["scored"], summary["no_gold"], summary["graded"]) == (4, 2, 2, 2)
    assert "2 record(s) have no gold" in capsys.readouterr().err


def test_ids_that_match_no_gold_fail_loudly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    preds = tmp_path / "preds.jsonl"
    preds.write_bytes(jsonl([{"id": i, "code": "ans = 1"} for i in range(3)]))
    golds = tmp_path / "golds.jsonl"
    golds.write_bytes(jsonl([{"id": str(i), "answer": 1} for i in range(3)]))  # "0" is not 0
    code, summary, _ = check(tmp_path, str(preds), "--gold", str(golds))
    err = capsys.readouterr().err
    assert code == 1 and summary["no_gold"] == 3
    assert "no record was scored" in err and "the first record's id is 0; the gold file's first id is \"0\"" in err


def test_a_run_where_every_record_is_skipped_says_which_fields_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, summary, results = check(tmp_path, str(EXAMPLES / "lm_eval_samples_gsm8k_cot.jsonl"), "--mode", "cot")
    err = capsys.readouterr().err
    assert code == 1 and summary["skipped"] == 4 and len(results) == 4
    assert "no record was scored" in err and "code, output, generated, prediction" in err
    assert "doc_id, doc, target, arguments, resps, filtered_resps" in err
    assert "--code-field resps.0.0" in err


def test_an_empty_input_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    assert check(tmp_path, str(path))[0] == 1
    assert "no records" in capsys.readouterr().err


# -- field paths ----------------------------------------------------------------------------------------------


def test_field_paths() -> None:
    record = {
        "resps": [["first", "second"]],
        "doc": {"answer": 4},
        "doc.answer": 5,
        "a.b": {"c": 6},
        "response": {"body": {"choices": [{"message": {"content": "text"}}]}},
        "none": None,
    }
    assert field_value(record, "resps.0.0") == "first" and field_value(record, "resps.0.-1") == "second"
    assert field_value(record, "doc.answer") == 5  # the literal key first
    assert field_value({"doc": {"answer": 4}}, "doc.answer") == 4
    assert field_value(record, "a.b.c") == 6  # a literal key with a dot, then a step
    assert field_value(record, "response.body.choices.0.message.content") == "text"
    for missing in ("resps.1", "resps.x", "doc.question", "resps.0.0.0", "", "none.x"):
        assert is_missing(field_value(record, missing)), missing
    assert field_value(record, "resps.5", None) is None
    assert first_field(record, ["none", "nope", "doc.answer"]) == ("doc.answer", 5)
    assert first_field(record, ["none"]) is None


def test_lm_eval_log_samples_score_with_flags_alone(tmp_path: Path) -> None:
    path = EXAMPLES / "lm_eval_samples_gsm8k_cot.jsonl"
    code, summary, results = check(
        tmp_path,
        str(path),
        "--mode",
        "cot",
        "--code-field",
        "resps.0.0",
        "--gold-field",
        "target",
        "--id-field",
        "doc_id",
    )
    assert code == 0 and [r["id"] for r in results] == [0, 1, 2, 3]
    assert [r["correct"] for r in results] == [True, True, False, True]
    code, summary, _ = check(
        tmp_path,
        str(path),
        "--mode",
        "cot",
        "--code-field",
        "filtered_resps.0",
        "--gold-field",
        "target",
        "--id-field",
        "doc_id",
    )
    assert summary["correct"] == 2  # the harness's strict-match filter found no answer in record 3


def test_openai_batch_output_scores_with_flags_alone(tmp_path: Path) -> None:
    code, summary, results = check(
        tmp_path,
        str(EXAMPLES / "openai_batch_output.jsonl"),
        "--code-field",
        "response.body.choices.0.message.content",
        "--id-field",
        "custom_id",
        "--gold",
        str(EXAMPLES / "openai_batch_golds.jsonl"),
    )
    assert code == 0
    assert [(r["id"], r["status"], r["correct"]) for r in results] == [
        ("request-1", "ok", True),
        ("request-2", "ok", True),
        ("request-3", "ok", False),
        ("request-4", "skipped", None),
        ("request-5", "no_gold", None),
    ]
    assert (summary["scored"], summary["skipped"], summary["no_gold"], summary["accuracy"]) == (3, 1, 1, 0.666667)


def test_count_records_never_drains_a_stream(tmp_path: Path) -> None:
    fifo = tmp_path / "preds.fifo"
    os.mkfifo(fifo)
    assert count_records(fifo) is None and count_records("-") is None
    gz = _write_format(tmp_path / "p", "gz")
    assert count_records(gz) is None and count_records(EXAMPLE) == 11


def test_validate_reads_stdin_but_fixes_only_a_file(tmp_path: Path) -> None:
    golds = (DATA / "golds_validate.jsonl").read_bytes()
    done = potrun("validate", "-", "--quiet", "--workers", "1", "--timeout", "2", stdin=golds)  # (one loops)
    assert done.returncode in (0, 1) and len(done.stdout.splitlines()) == len(golds.splitlines())
    refused = potrun("validate", "-", "--quiet", "--fix-answers", str(tmp_path / "fixed.jsonl"), stdin=golds)
    assert refused.returncode == 2 and b"not a stream" in refused.stderr
