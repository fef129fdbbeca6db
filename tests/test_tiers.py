"""Which tiers this Python has, said where a user looks: `potrun doctor`, the summary's run record, and
the tier each result reports. The warm tier needs a CPython release whose bytecode the verifier's review
covers (policies/pure.py, REVIEWED_VERSIONS: 3.11 and 3.13); on any other every program forks, and the
user is told why.

The reviewed case runs for real (a worker on this interpreter); the unreviewed one by switching the
review off in this process (the doctor's and the record's words are made here, not in a worker).
"""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

import pytest

from potrun import Sandbox
from potrun.cli import main
from potrun.doctor import tier_line
from potrun.policies import pure
from potrun.runrecord import machine

REVIEWED = pure.warm_tier_refusal() is None


def test_the_review_covers_the_pythons_potrun_is_tested_on() -> None:
    assert (3, 11) in pure.REVIEWED_VERSIONS and (3, 13) in pure.REVIEWED_VERSIONS
    assert (sys.implementation.name == "cpython" and sys.version_info[:2] in pure.REVIEWED_VERSIONS) == REVIEWED


@pytest.mark.skipif(not REVIEWED, reason="this interpreter has no warm tier (the test below covers that case)")
def test_a_pure_program_takes_the_warm_tier_on_a_reviewed_python() -> None:
    programs = [
        "ans = sum(x * x for x in range(10))",
        "def solution():\n    xs = [3, 1, 2]\n    xs.sort()\n    low = xs[0]\n    return str(low) + f'{+xs[1]!r}'",
        "import math\nans = math.sqrt(16) + max(*[1, 2])",
        "class A:\n    pass\nans = 1",  # not pure: forks
    ]
    with Sandbox(workers=1, timeout=5) as box:
        results = list(box.run_many(programs))
    assert [r.value for r in results] == [285, "12", 6.0, 1]
    assert [r.isolation for r in results] == ["warm", "warm", "warm", "fork"]


def test_doctor_and_run_record_name_the_tiers_here(capsys: pytest.CaptureFixture[str]) -> None:
    line = tier_line()
    record = machine()
    if REVIEWED:
        assert line.startswith("[ok] tiers warm and fork") and platform.python_version() in line
        assert record["tiers"] == ["warm", "fork"] and "reviewed" in record["tiers_why"]
    else:
        assert line.startswith("[--] tiers fork only")
        assert record["tiers"] == ["fork"] and "not reviewed" in record["tiers_why"]
    assert main(["doctor"]) == 0
    assert line in capsys.readouterr().out


def test_an_unreviewed_python_is_told_why_every_program_forks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pure, "_REVIEWED", False)
    line = tier_line()
    assert line.startswith("[--] tiers fork only, no warm tier: ")
    assert "bytecode is not reviewed (reviewed: CPython 3.11, 3.13)" in line and "every program forks" in line
    record = machine()
    assert record["tiers"] == ["fork"]
    assert record["tiers_why"] == pure.warm_tier_refusal()
    assert pure.why_not_pure(compile("ans = 1", "<program>", "exec")) is not None  # nothing proven


def test_the_summary_records_the_tiers(tmp_path: Path) -> None:
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({"id": 1, "generated": "ans = 2", "answer": 2}) + "\n")
    summary = tmp_path / "summary.json"
    main(["check", str(preds), "--quiet", "--summary-json", str(summary), "--workers", "1"])
    run = json.loads(summary.read_text())["run"]
    assert run["machine"]["tiers"] == (["warm", "fork"] if REVIEWED else ["fork"])
    assert run["machine"]["tiers_why"]
    assert run["tiers_used"] == (["warm"] if REVIEWED else ["fork"])
