"""What `potrun` tells a person: `potrun run`'s exit codes, `python -m potrun`, `--version`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import potrun
from potrun.cli import EXIT_FAILED, EXIT_OK, EXIT_SANDBOX_ERROR, EXIT_USAGE, main, run_exit_code
from potrun.types import Status

# (program, the status it gets, the exit code `potrun run` gives it)
RUNS = [
    ("ans = 6 * 7\n", "ok", EXIT_OK),
    ("ans = 1 / 0\n", "error", EXIT_FAILED),
    ("ans = (\n", "syntax_error", EXIT_FAILED),
    ("x = 1\n", "no_answer", EXIT_FAILED),
    ("while True:\n    pass\n", "timeout", EXIT_FAILED),
    ("import os\nans = os.getcwd()\n", "policy_violation", EXIT_FAILED),
]


@pytest.mark.parametrize(("source", "status", "code"), RUNS, ids=[r[1] for r in RUNS])
def test_run_exits_0_only_for_ok(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str, status: str, code: int
) -> None:
    program = tmp_path / "program.py"
    program.write_text(source)
    assert main(["run", str(program), "--timeout", "1"]) == code
    assert json.loads(capsys.readouterr().out)["status"] == status


def test_every_status_has_its_run_exit_code() -> None:
    assert {s: run_exit_code(s) for s in Status} == {
        s: EXIT_OK if s is Status.OK else EXIT_SANDBOX_ERROR if s is Status.SANDBOX_ERROR else EXIT_FAILED
        for s in Status
    }
    assert len({EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SANDBOX_ERROR}) == 4


def test_run_of_a_missing_file_is_usage() -> None:
    assert main(["run", "/nonexistent/program.py"]) == EXIT_USAGE


def test_python_dash_m_potrun_runs_the_command(tmp_path: Path) -> None:
    program = tmp_path / "program.py"
    program.write_text("ans = 1 / 0\n")
    out = subprocess.run(
        [sys.executable, "-m", "potrun", "run", str(program)], capture_output=True, text=True, cwd=tmp_path
    )
    assert out.returncode == EXIT_FAILED
    assert json.loads(out.stdout)["error_type"] == "ZeroDivisionError"


def test_version_prints_the_distribution_version(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "potrun", "--version"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0
    assert out.stdout.strip() == f"potrun {potrun.__version__}"
    assert potrun.__version__ not in ("", "0+unknown")
