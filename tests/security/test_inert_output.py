"""Everything a program or an input chose is inert when shown (issue 36, class 5): error types built
of terminal escapes, direction overrides, rich markup and mathtext reach `potrun check`'s table,
`potrun report --markdown` and `--html` (its charts) and `potrun diff` as text, never as actions, and
no report fails on them. The names are generated from a seed."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from potrun.reports.table import inert

ACTING = ["\x1b[2J", "\x1b[H", "\x1b]0;owned\x07", "\r", "\x08", "\u202e", "\x9b31m", "\u2028", "\x7f"]
MARKUP = ["[bold red]", "[/]", "$\\frac{1}{0}$", "$x^{", "|", "*", "<script>", "`"]


def _hostile_names(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return [
        "E" + "".join(rng.choice(ACTING + MARKUP + ["a", "1"]) for _ in range(rng.randint(3, 8))) for _ in range(count)
    ]


def _potrun(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "potrun", *args], capture_output=True, text=True, cwd=cwd)


def _acts(text: str) -> bool:
    return any(ch in text for ch in "\x1b\x9b\u202e\x00\x08\u2028") or "\r" in text.replace("\r\n", "\n")


@pytest.mark.parametrize("seed", [5, 36])
def test_program_chosen_error_types_are_inert_in_every_command(tmp_path: Path, seed: int) -> None:
    names = _hostile_names(seed, 4)
    records = [
        {"id": f"r{n}", "output": f"raise type({name!r}, (Exception,), {{}})('x')", "answer": 1}
        for n, name in enumerate(names)
    ] + [{"id": "ok", "output": "ans = 1", "answer": 1}]
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    checked = _potrun(
        "check", str(preds), "--policy", "trusted", "--out", "out.jsonl", "--summary-json", "s.json", cwd=tmp_path
    )
    assert checked.returncode in (0, 1), checked.stderr
    assert not _acts(checked.stderr) and not _acts(checked.stdout)
    assert "error types" in checked.stderr
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert {r["error_type"] for r in out[:-1]} == set(names)  # the data keeps them as they were

    markdown = _potrun("report", "out.jsonl", "--summary", "s.json", "--markdown", "r.md", cwd=tmp_path)
    assert markdown.returncode == 0, markdown.stderr
    assert not _acts((tmp_path / "r.md").read_text(encoding="utf-8"))

    page = _potrun("report", "out.jsonl", "--summary", "s.json", "--html", "r.html", cwd=tmp_path)
    assert page.returncode == 0, page.stderr  # mathtext in a label once ended the report
    text = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert not _acts(text) and "<script>" not in text

    changed = [dict(r, status="\x1b[2J" + r["status"], correct=not r["correct"]) for r in out]
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in changed), encoding="utf-8")
    diffed = _potrun("diff", "out.jsonl", "b.jsonl", cwd=tmp_path)
    assert diffed.returncode == 0, diffed.stderr
    assert not _acts(diffed.stdout) and "\\x1b[2J" in diffed.stdout


def test_inert_escapes_only_what_acts() -> None:
    assert inert("plain 42 % ünïcode 答案") == "plain 42 % ünïcode 答案"
    assert inert("\x1b[2Jx\u202e") == "\\x1b[2Jx\\u202e"
