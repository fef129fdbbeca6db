"""potrun.run_check: `potrun check` as a library call. Its summary is the command's `--summary-json`
and its `out` the command's `--out`, whole or stopped and resumed through the API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The repository's root, wherever in tests/ this file stands.
from paths import REPO

from potrun import CheckOptions, SandboxConfig, UsageError, run_check
from potrun.check.run import CheckRun
from potrun.cli import EXIT_OK, main

EXAMPLES = REPO / "examples"
SANDBOX = SandboxConfig(workers=1)
# What differs between two runs of the same records: timings, the clock, the command line.
TIMED = ("elapsed_s", "programs_per_s", "slowest")
TIMED_RUN = ("started_at", "ended_at", "command")
TIMED_LINE = ("wall_s", "cpu_s")

# Each example file with the options that read it (the README's commands).
CASES = {
    "docmath_outputs.jsonl": ([], CheckOptions()),
    "puzzles.jsonl": (["--mode", "auto"], CheckOptions(mode="auto")),
    "openai_batch_output.jsonl": (
        ["--code-field", "response.body.choices.0.message.content", "--id-field", "custom_id"],
        CheckOptions(code_fields=("response.body.choices.0.message.content",), id_fields=("custom_id",)),
    ),
}
GOLDS = {"openai_batch_output.jsonl": EXAMPLES / "openai_batch_golds.jsonl"}


def untimed(summary: dict[str, Any]) -> dict[str, Any]:
    data = json.loads(json.dumps(summary))  # tuples as lists, as --summary-json writes them
    for key in TIMED:
        data.pop(key, None)
    for key in TIMED_RUN:
        data["run"].pop(key, None)
    return data


def lines_of(path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [{k: v for k, v in line.items() if k not in TIMED_LINE} for line in lines]


def cli_run(tmp_path: Path, name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    flags, _ = CASES[name]
    out, summary = tmp_path / "cli.jsonl", tmp_path / "cli-summary.json"
    gold = ["--gold", str(GOLDS[name])] if name in GOLDS else []
    words = ["check", str(EXAMPLES / name), *flags, *gold, "--workers", "1", "--quiet"]
    assert main([*words, "--out", str(out), "--summary-json", str(summary)]) == EXIT_OK
    return untimed(json.loads(summary.read_text(encoding="utf-8"))), lines_of(out)


@pytest.mark.parametrize("name", sorted(CASES))
def test_run_check_is_potrun_check(tmp_path: Path, name: str) -> None:
    expected, expected_lines = cli_run(tmp_path, name)
    out = tmp_path / "lib.jsonl"
    summary = run_check(EXAMPLES / name, CASES[name][1], gold=GOLDS.get(name), sandbox=SANDBOX, out=out)
    assert untimed(summary.to_json()) | {"run": None} == expected | {"run": None}
    assert {k: v for k, v in untimed(summary.to_json())["run"].items() if k != "inputs"} == {
        k: v for k, v in expected["run"].items() if k != "inputs"
    }
    assert lines_of(out) == expected_lines
    assert summary.scored > 0  # the comparison is of real work


def test_a_run_interrupted_through_the_api_resumes_to_the_same_summary(tmp_path: Path) -> None:
    name = "docmath_outputs.jsonl"
    expected, expected_lines = cli_run(tmp_path, name)
    records = [json.loads(line) for line in (EXAMPLES / name).read_text(encoding="utf-8").splitlines()]
    out = tmp_path / "lib.jsonl"

    # A first run given the records as data, stopped by an interrupt after six of them.
    def interrupted() -> Iterator[dict[str, Any]]:
        yield from records[:6]
        raise KeyboardInterrupt

    run = CheckRun(interrupted(), sandbox=SANDBOX, out=out)
    with pytest.raises(KeyboardInterrupt):
        run.run()
    assert run.kept is not None and run.kept == len(out.read_text(encoding="utf-8").splitlines()) <= 6
    assert lines_of(out) == expected_lines[: run.kept]  # whole lines only, the first records' own

    # Another stop, with more written: the first seven records, the last line torn as a kill leaves it.
    run_check(records[:7], sandbox=SANDBOX, out=out, resume=True)
    text = out.read_bytes()
    out.write_bytes(text[: len(text) - 20])

    summary = run_check(EXAMPLES / name, sandbox=SANDBOX, out=out, resume=True)
    got = untimed(summary.to_json())
    assert got["run"].pop("inputs")["preds"]["sha256"] == expected["run"].pop("inputs")["preds"]["sha256"]
    assert got == expected
    assert lines_of(out) == expected_lines


def test_resume_needs_out() -> None:
    with pytest.raises(UsageError, match="resume needs out"):
        run_check(EXAMPLES / "docmath_outputs.jsonl", sandbox=SANDBOX, resume=True)


def test_records_that_are_not_mappings_are_bad_records(tmp_path: Path) -> None:
    summary = run_check([{"id": 1, "code": "ans = 2", "gold": 2}, ["not", "a", "record"]], sandbox=SANDBOX)
    assert (summary.total, summary.scored, summary.bad_record, summary.correct["default"]) == (2, 1, 1, 1)
