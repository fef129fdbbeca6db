"""Fuzz of `potrun check`'s input: seeded random files of records with wrong types in every field,
random bytes, invalid UTF-8, NUL bytes, lone surrogates, deep nesting, huge lines and truncation, as
JSON Lines, gzip, JSON arrays, Parquet and standard input, through the real CLI (a subprocess) and
the library, with a real sandbox. What must hold, whatever the bytes:

- no traceback (stderr never has "Traceback"), and the exit code is 0 or 1 (1: nothing scored);
- `--out` has exactly one line per input line (per Parquet row), numbered 1..N in order; a stream that
  breaks (a truncated gzip, a broken array) ends with one bad_record that says so;
- every status is a documented one.
"""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from paths import REPO

from potrun.check.pipeline import CheckOptions, check_records
from potrun.check.records import read_records
from potrun.sandbox.api import Sandbox
from potrun.types import Status

STATUSES = {s.value for s in Status} | {"skipped", "bad_record", "no_gold"}
EXIT_CODES = {0, 1}
MAGICS = (b"\x1f\x8b", b"\x28\xb5\x2f\xfd", b"PAR1")
SMALL_BOUND = 4096  # the library runs use this line bound, so huge lines stay small files
PROGRAMS = [
    "ans = 1",
    "def solution():\n    return 6 * 7",
    "x = 1 / 0",
    "import os\nans = os.getpid()",
    "def (",
    "print(3)",
    "ans = [1, 2.5, 'x']",
    "```python\nans = 2 + 2\n```",
    "The answer is 12.",
    "ans = None",
    "ans = float('nan')",
    "ans = 10 ** 400",
    "ans = {'a': 1}",
    "raise SystemExit(3)",
    "ans = 'é\u2028ü'",
    "ans = 1\x00",
    "```python\ndef solution(:\n",
    "",
    "   ",
    "#### 72",
    "\\boxed{5}",
]


def random_value(rng: random.Random, depth: int = 0) -> Any:
    """Any JSON value: what a field of the wrong type holds."""
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return rng.randint(-(10**20), 10**20)
    if kind == 1:
        return rng.choice([0.5, -1e308, 1e-300, float("inf"), float("nan")])
    if kind == 2:
        return rng.choice(PROGRAMS)
    if kind == 3:
        return rng.choice([True, False, None])
    if kind == 4:
        return "".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(0x80, 0x3000)])) for _ in range(8))
    if kind == 5:
        return "\ud800" + rng.choice(PROGRAMS)  # a lone surrogate: valid JSON, not UTF-8 text
    if kind == 6:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 7:
        return {rng.choice(["value", "a", "code", ""]): random_value(rng, depth + 1) for _ in range(rng.randrange(3))}
    return [rng.randrange(100) for _ in range(rng.randrange(5))]


def random_record(rng: random.Random) -> dict[str, Any]:
    record: dict[str, Any] = {}
    if rng.random() < 0.9:
        record["code" if rng.random() < 0.7 else "output"] = (
            rng.choice(PROGRAMS) if rng.random() < 0.6 else random_value(rng)
        )
    if rng.random() < 0.8:
        record["answer"] = rng.choice([1, 42, "42", 4, "#### 72", 12]) if rng.random() < 0.5 else random_value(rng)
    if rng.random() < 0.7:
        record["id"] = (
            rng.choice([rng.randrange(50), f"q{rng.randrange(50)}"]) if rng.random() < 0.6 else random_value(rng)
        )
    if rng.random() < 0.15:
        record["checklist"] = random_value(rng) if rng.random() < 0.5 else [1, {"value": 2}]
    if rng.random() < 0.1:
        record["checker"] = random_value(rng) if rng.random() < 0.5 else "def check(answer):\n    return answer == 1"
    return record


def random_line(rng: random.Random, bound: int) -> bytes:
    """One line's bytes (without its end of line; it may hold a newline of its own, as random bytes do)."""
    kind = rng.randrange(12)
    if kind <= 4:
        return json.dumps(random_record(rng)).encode()
    if kind == 5:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 80)))
    if kind == 6:  # invalid UTF-8 inside a string
        return b'{"code": "ans = \xc3\x28 \xff", "answer": 1}'
    if kind == 7:
        depth = rng.choice([65, 500, 5000, 100_000])
        return b'{"code": "ans = 1", "answer": ' + b"[" * depth + b"]" * depth + b"}"
    if kind == 8:  # over the line bound
        return b'{"code": "' + b"x" * (bound + rng.randrange(1, 2 * bound)) + b'"}'
    if kind == 9:
        return json.dumps(random_record(rng)).encode()[: rng.randrange(1, 30)]  # cut short
    if kind == 10:
        return rng.choice([b"", b"   ", b"\x00\x00", b"\xef\xbb\xbf{}", b"null", b"[]", b'"text"', b"1e999"])
    return json.dumps(random_value(rng)).encode()


def random_jsonl(rng: random.Random, bound: int, lines: int) -> bytes:
    data = b"\n".join(random_line(rng, bound) for _ in range(lines))
    if rng.random() < 0.7:
        data += b"\n"
    if rng.random() < 0.2:
        data = data[: rng.randrange(1, len(data) + 1)]  # truncated anywhere
    if data.startswith(MAGICS):
        data = b" " + data  # a format of its own: its own tests
    return data


def line_count(data: bytes) -> int | None:
    """Lines as the reader numbers them: the newline-separated pieces (a last one without newline too);
    None for a file of one line that starts with "[": a JSON array, its elements the records."""
    lines = data.count(b"\n") + (not data.endswith(b"\n") and bool(data))
    if data.lstrip()[:1] == b"[" and len(data.strip().splitlines()) <= 1:
        return None
    return lines


def assert_accounted(results: list[dict[str, Any]], lines: int | None, *, broken: bool = False) -> None:
    numbers = [r["line"] for r in results]
    assert all(r["status"] in STATUSES for r in results), {r["status"] for r in results}
    if lines is not None:
        assert numbers == list(range(1, lines + 1)), (len(numbers), lines)
    else:  # an array's elements, by the line each starts on (a break may share its element's line)
        assert numbers == sorted(numbers)
    if broken:
        assert results and results[-1]["status"] == "bad_record"
        assert "broken" in results[-1]["error"] or "not read" in results[-1]["error"], results[-1]["error"]


def run_cli(tmp_path: Path, preds: str, *args: str, stdin: bytes | None = None) -> list[dict[str, Any]]:
    out = tmp_path / "out.jsonl"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "potrun.cli",
            "check",
            preds,
            "--out",
            str(out),
            "--summary-json",
            str(tmp_path / "summary.json"),
            "--policy",
            "restricted",
            "--workers",
            "1",
            "--timeout",
            "2",
            *args,
        ],
        input=stdin,
        capture_output=True,
        timeout=300,
        cwd=REPO,
    )
    assert b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")[-3000:]
    assert done.returncode in EXIT_CODES, (done.returncode, done.stderr.decode(errors="replace")[-2000:])
    summary = json.loads((tmp_path / "summary.json").read_text())
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert summary["total"] == len(results)
    assert summary["scored"] + summary["skipped"] + summary["bad_record"] + summary["no_gold"] == summary["total"]
    return results


# -- the CLI -------------------------------------------------------------------------------------------------

MB = 1 << 20


@pytest.mark.parametrize("seed", range(4))
def test_cli_jsonl(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    data = random_jsonl(rng, MB, 40)
    path = tmp_path / "preds.jsonl"
    path.write_bytes(data)
    mode = ["pot", "cot", "auto", "pot"][seed]
    results = run_cli(
        tmp_path, str(path), "--max-record-mb", "1", "--mode", mode, "--k", "1,2", "--compare", "default,pot,docmath"
    )
    assert_accounted(results, line_count(data))


@pytest.mark.parametrize("seed", range(2))
def test_cli_stdin(tmp_path: Path, seed: int) -> None:
    rng = random.Random(100 + seed)
    data = random_jsonl(rng, MB, 30)
    payload = gzip.compress(data) if seed else data
    results = run_cli(tmp_path, "-", "--max-record-mb", "1", stdin=payload)
    assert_accounted(results, line_count(data))


def test_cli_gzip_whole_and_truncated(tmp_path: Path) -> None:
    rng = random.Random(200)
    data = random_jsonl(rng, MB, 60)
    path = tmp_path / "preds.jsonl.gz"
    path.write_bytes(gzip.compress(data))
    assert_accounted(run_cli(tmp_path, str(path), "--max-record-mb", "1"), line_count(data))
    compressed = gzip.compress(data)
    for cut in (len(compressed) // 2, len(compressed) - 3, 15):
        path.write_bytes(compressed[:cut])
        assert_accounted(run_cli(tmp_path, str(path), "--max-record-mb", "1"), None, broken=True)


def test_cli_json_array_whole_and_broken(tmp_path: Path) -> None:
    rng = random.Random(300)
    elements = [json.dumps(random_record(rng) if rng.random() < 0.8 else random_value(rng)) for _ in range(30)]
    text = "[\n" + ",\n".join(elements) + "\n]\n"
    path = tmp_path / "preds.json"
    path.write_text(text)
    results = run_cli(tmp_path, str(path))
    assert len(results) == len(elements)
    assert_accounted(results, None)
    for cut in (len(text) // 3, len(text) - 4):
        path.write_text(text[:cut])
        assert_accounted(run_cli(tmp_path, str(path)), None, broken=True)
    path.write_text("[\n" + ",\n".join(elements[:11]) + " } ,\n" + ",\n".join(elements[11:]) + "\n]\n")  # broken midway
    broken = run_cli(tmp_path, str(path))
    assert_accounted(broken, None, broken=True)
    assert len(broken) == 12  # elements 1-11, then the break


def test_cli_parquet(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rng = random.Random(400)
    rows = 57
    table = pa.table(
        {
            "id": [rng.choice([None, f"p{i}"]) for i in range(rows)],
            "code": [rng.choice([*PROGRAMS, None]) for _ in range(rows)],
            "answer": [rng.choice(["1", "42", None, "x"]) for _ in range(rows)],
            "tags": [[rng.randrange(9) for _ in range(rng.randrange(3))] for _ in range(rows)],
            "meta": [{"k": rng.randrange(5), "s": rng.choice(["a", None])} for _ in range(rows)],
            "blob": [bytes(rng.randrange(256) for _ in range(4)) for _ in range(rows)],
        }
    )
    path = tmp_path / "preds.parquet"
    pq.write_table(table, path, row_group_size=10)
    assert_accounted(run_cli(tmp_path, str(path)), rows)


def test_cli_gold_file_with_random_ids(tmp_path: Path) -> None:
    rng = random.Random(500)
    records = [random_record(rng) for _ in range(30)]
    preds = tmp_path / "preds.jsonl"
    preds.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records))
    golds = tmp_path / "golds.jsonl"
    golds.write_text(
        "".join(
            json.dumps({"id": r["id"], "answer": rng.choice([1, 42, "x"])}) + "\n"
            for r in records[::2]
            if r.get("id") is not None
        )
    )
    assert_accounted(run_cli(tmp_path, str(preds), "--gold", str(golds)), len(records))


# -- the library ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(policy="restricted", workers=2, timeout=2) as box:
        yield box


@pytest.mark.parametrize("mode", ["pot", "cot", "auto"])
def test_library_many_files(tmp_path: Path, sandbox: Sandbox, mode: str) -> None:
    options = CheckOptions(mode=mode, presets=("default", "pot"), ks=(1, 2))
    for seed in range(12):
        rng = random.Random(f"{mode}-{seed}")
        data = random_jsonl(rng, SMALL_BOUND, rng.randrange(1, 50))
        path = tmp_path / f"preds-{seed}.jsonl"
        path.write_bytes(data)
        results = [r.to_json() for r in check_records(read_records(path, max_line_bytes=SMALL_BOUND), sandbox, options)]
        json.dumps(results)  # every result is plain JSON data
        assert_accounted(results, line_count(data))
