"""Attacks on the benchmark rules and on `potrun report`, through the real CLI: a record or a results
line of a hostile shape must be that record's bad_record (or the file's usage error), never the run's
end, and must not change the other records' verdicts; a report of hostile values runs no script."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import Pools
from paths import SHARED

from potrun.check.cache import CachedSandbox
from potrun.cli import main
from potrun.comparators import compare
from potrun.extractors import response_text
from potrun.integrations.openrlhf import score_queries

BENCHMARKS = SHARED / "benchmarks"
MARKUP = '<script>document.title="PWNED"</script><img src=x onerror="document.title=\'PWNED\'"><svg onload=alert(1)>'


def _samples(benchmark: str) -> list[dict[str, Any]]:
    lines = (BENCHMARKS / benchmark / "sample.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["record"] for line in lines]


def _check(path: Path, records: list[dict[str, Any]], benchmark: str) -> list[dict[str, Any]]:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    out = path.with_suffix(".out")
    assert main(["check", str(path), "--benchmark", benchmark, "--out", str(out), "--quiet", "--workers", "1"]) == 0
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("hostile", [["Table"], {"a": 1}, 5], ids=["list", "object", "number"])
def test_a_longdocurl_field_of_another_type_does_not_end_the_run(tmp_path: Path, hostile: Any) -> None:
    records = _samples("longdocurl")[:6]
    alone = _check(tmp_path / "alone" / "longdocurl.jsonl", records, "longdocurl")
    odd = [{**record, "question_type": hostile, "task_tag": "Locating"} for record in records]
    # a list question_type ended the run in the fine-grained metrics (unhashable), after every record ran
    mixed = _check(tmp_path / "mixed" / "longdocurl.jsonl", records + odd, "longdocurl")
    assert [(line["correct"], line["score"]) for line in mixed[: len(records)]] == [
        (line["correct"], line["score"]) for line in alone
    ]


def _result_line(number: int, **fields: Any) -> dict[str, Any]:
    return {"line": number, "id": number, "status": "ok", "value": 1, "gold": 1, "correct": True, "wall_s": 0.01,
            "cpu_s": 0.01, **fields}  # fmt: skip


@pytest.mark.parametrize(
    "fields",
    [{"correct": "yes"}, {"score": "0.5"}, {"wall_s": [1]}, {"verdicts": {"default": "no"}}, {"cpu_s": {"a": 1}}],
    ids=["correct-text", "score-text", "wall-list", "verdict-text", "cpu-object"],
)
def test_a_results_line_of_the_wrong_shape_is_a_usage_error_of_report(tmp_path: Path, fields: dict[str, Any]) -> None:
    results = tmp_path / "r.jsonl"
    results.write_text(json.dumps(_result_line(1)) + "\n" + json.dumps(_result_line(2, **fields)) + "\n")
    assert main(["report", str(results), "--markdown", str(tmp_path / "r.md")]) == 2  # was a traceback


def test_a_report_of_hostile_values_runs_no_script_in_chromium(tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run does it)")
    lines = [
        _result_line(n, id=MARKUP + str(n), value=MARKUP, gold=MARKUP, correct=False, status="error",
                     error_type=MARKUP, error=MARKUP, source=MARKUP, wall_s=1e300 if n == 3 else 0.01 * n)
        for n in range(1, 14)
    ]  # fmt: skip
    results, page = tmp_path / "r.jsonl", tmp_path / "r.html"
    results.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert main(["report", str(results), "--html", str(page)]) == 0
    text = page.read_text()
    assert "<script" not in text and "<img" not in text and "<svg onload" not in text
    command = [chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}"]
    dumped = subprocess.run([*command, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    assert "PWNED" not in dumped.stdout.split("</title>")[0]  # no handler set the title
    assert "document.title" in dumped.stdout  # the markup is there, as text


FEW_SHOT = "Q: 6*7?\nA:\n```python\nprint(42)\n```\nQ: What is 40+2?\nA:"


def test_a_prompt_that_differs_from_the_query_in_whitespace_is_still_cut_off() -> None:
    decoded = FEW_SHOT.replace("Q: What", "Q:  What").replace("\nA:", " \nA:")  # a decoder's round trip
    assert response_text(decoded + " I think it is easy.", FEW_SHOT) == " I think it is easy."
    assert response_text("ans = 72", "a prompt that is not there") == "ans = 72"  # no prompt in it: all of it


def test_the_prompts_few_shot_program_earns_no_reward(pools: Pools, backend: str) -> None:
    box = CachedSandbox(pools.get("restricted", backend))
    decoded = FEW_SHOT.replace("Q: What", "Q:  What")
    queries = [decoded + " I think it is easy.", decoded + "\n```python\nprint(7)\n```", FEW_SHOT + " no code"]
    answer = score_queries(queries, [FEW_SHOT] * 3, ["42"] * 3, sandbox=box)
    assert answer["rewards"] == [0.0, 0.0, 0.0]  # the first was 1.0: the prompt's print(42) ran as the model's
    assert answer["extra_logs"]["executed"] == [0.0, 1.0, 0.0]


@pytest.mark.parametrize(
    "gold",
    ["9" * 200_000, "1," * 100_000, "between " * 25_000, "1到" * 100_000],
    ids=["digits", "commas", "between", "zh-connector"],
)
def test_a_long_gold_is_read_in_linear_time(gold: str) -> None:
    # "9" * 20,000 took 10 s in the range patterns (quadratic): 200,000 would have taken about 17 minutes
    assert compare(1, gold).correct is False
