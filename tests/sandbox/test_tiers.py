"""Which tiers this Python has, said where a user looks: `potrun doctor`, the summary's run record, and
the tier each result reports. The warm tier needs a CPython release whose bytecode the verifier's review
covers (policies/pure.py, REVIEWED_VERSIONS: 3.11 and 3.13); on any other every program forks, and the
user is told why.

The reviewed case runs for real (a worker on this interpreter); the unreviewed one by switching the
review off in this process (the doctor's and the record's words are made here, not in a worker).
"""

from __future__ import annotations

import dis
import importlib.util
import json
import platform
import sys
import types
from pathlib import Path

import pytest

from potrun import Sandbox
from potrun.check.runrecord import machine
from potrun.cli import main
from potrun.policies import pure
from potrun.tools.doctor import tier_line

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


@pytest.mark.parametrize(
    ("version", "implementation"), [((3, 12), "cpython"), ((3, 14), "cpython"), ((3, 13), "pypy"), ((3, 10), "cpython")]
)
def test_an_unreviewed_release_imports_cleanly_and_proves_nothing(
    version: tuple[int, int], implementation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The crash this guards against: 3.13 numbers pseudo-instructions past 255, and the verifier's
    module failed at import, taking every worker down with it. A fresh copy of policies/pure.py is
    loaded as another release would: its version, an opcode table with names past 255 and without
    3.11's PRECALL. It must load, say why there is no warm tier, and prove nothing."""
    opmap = {name: number for name, number in dis.opmap.items() if name != "PRECALL"}
    opmap |= {"LOAD_METHOD": 300, "JUMP": 301, "SOME_NEW_OPCODE": 512}
    monkeypatch.setattr(dis, "opmap", opmap)
    monkeypatch.setattr(sys, "version_info", (*version, 0, "final", 0))
    monkeypatch.setattr(
        sys, "implementation", types.SimpleNamespace(**vars(sys.implementation) | {"name": implementation})
    )
    spec = importlib.util.spec_from_file_location("pure_on_another_release", pure.__file__)
    assert spec is not None and spec.loader is not None
    copy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(copy)
    reason = copy.warm_tier_refusal()
    assert reason is not None and f"{implementation} {version[0]}.{version[1]}" in reason
    assert copy.ALLOWED_OPCODES == {} and copy._ALLOWED_OPS == b""
    assert (
        copy.why_not_pure(compile("ans = 1", "<program>", "exec")) == f"python {version[0]}.{version[1]} not reviewed"
    )


def test_a_reviewed_name_numbered_past_255_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """The original crash: a name of the release's table that the interpreter numbers past 255 (3.13's
    pseudo LOAD_METHOD is 259) made `bytes()` fail at import. Such a name never appears in co_code."""
    reviewed = sys.version_info[:2]
    if reviewed not in pure.REVIEWED_VERSIONS:
        reviewed = pure.REVIEWED_VERSIONS[0]
    allowed = next(iter(pure._OPCODE_REVIEWS[reviewed][0]))
    monkeypatch.setattr(dis, "opmap", dis.opmap | {allowed: 259})
    monkeypatch.setattr(sys, "version_info", (*reviewed, 0, "final", 0))
    spec = importlib.util.spec_from_file_location("pure_on_another_release", pure.__file__)
    assert spec is not None and spec.loader is not None
    copy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(copy)
    assert copy.warm_tier_refusal() is None
    assert allowed in copy.ALLOWED_OPCODES and len(copy._ALLOWED_OPS) == len(copy.ALLOWED_OPCODES) - 1
