"""`--resume` trusts no line it cannot vouch for (issue 39): each `--out` line carries a digest of its
record, its gold, the run's options and its own verdict, so that a resumed run equals a clean run of
the *current* inputs and options, whatever changed or was edited since the lines were written; a line
that does not fit the input is refused with the file, the line and the field named.

In-process runs (`potrun.cli.main`) of small inputs of quick programs; each case is compared with a
clean run of the same inputs and options, timings aside.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from conftest import lines_of

from potrun.cli import main

ARGS = ["--workers", "1", "--timeout", "5", "--quiet"]
RECORDS = 30


def write_preds(path: Path, golds: list[float]) -> Path:
    lines = [json.dumps({"id": f"q{k}", "output": f"ans = {k} * 1.5", "answer": gold}) for k, gold in enumerate(golds)]
    path.write_text("\n".join(lines) + "\n")
    return path


def right_golds() -> list[float]:
    return [k * 1.5 for k in range(RECORDS)]


def clean_run(tmp_path: Path, preds: Path, extra: list[str]) -> list[dict[str, Any]]:
    out = tmp_path / "clean.jsonl"
    out.unlink(missing_ok=True)
    assert main(["check", str(preds), "--out", str(out), *ARGS, *extra]) == 0
    return lines_of(out)


def resume(preds: Path, out: Path, extra: list[str]) -> int:
    return main(["check", str(preds), "--out", str(out), *ARGS, *extra, "--resume"])


def test_every_line_carries_a_digest_and_a_resume_of_an_unchanged_run_keeps_every_byte(tmp_path: Path) -> None:
    preds, out = write_preds(tmp_path / "p.jsonl", right_golds()), tmp_path / "out.jsonl"
    assert main(["check", str(preds), "--out", str(out), *ARGS]) == 0
    before = out.read_bytes()
    assert all(len(json.loads(line)["digest"]) == 32 for line in before.splitlines())
    assert resume(preds, out, []) == 0
    assert out.read_bytes() == before


def _change_golds(golds: list[float], rng: random.Random) -> list[float]:
    changed = list(golds)
    for k in rng.sample(range(RECORDS), 3):
        changed[k] = -1.0
    return changed


@pytest.mark.parametrize("seed", range(4))
def test_a_change_of_golds_options_or_lines_is_graded_as_a_clean_run_would(tmp_path: Path, seed: int) -> None:
    """Seeded: a run is written, then something changes: the golds in the input, the golds of a
    --gold file, the comparator options, or lines of the output edited by hand (a verdict flipped, a
    value changed, a digest removed as an older potrun wrote none). The resumed file equals a clean
    run of what is there now."""
    rng = random.Random(seed)
    preds = write_preds(tmp_path / "p.jsonl", right_golds())
    gold_file = tmp_path / "golds.jsonl"
    gold_file.write_text("".join(json.dumps({"id": f"q{k}", "answer": g}) + "\n" for k, g in enumerate(right_golds())))
    change = ["input golds", "gold file", "options", "edited lines"][seed % 4]
    extra = ["--gold", str(gold_file)] if change == "gold file" else []
    out = tmp_path / "out.jsonl"
    assert main(["check", str(preds), "--out", str(out), *ARGS, *extra]) == 0
    if change == "input golds":
        write_preds(preds, _change_golds(right_golds(), rng))
    elif change == "gold file":
        golds = _change_golds(right_golds(), rng)
        gold_file.write_text("".join(json.dumps({"id": f"q{k}", "answer": g}) + "\n" for k, g in enumerate(golds)))
    elif change == "options":
        write_preds(preds, [g * 1.01 for g in right_golds()])  # wrong by 1% ...
        out.unlink()
        assert main(["check", str(preds), "--out", str(out), *ARGS]) == 0
        assert not any(line["correct"] for line in lines_of(out)[1:])  # ... for the default comparator
        extra = ["--rel-tol", "0.05"]  # ... and right within 5%
    else:
        lines = out.read_text().splitlines()
        for k in sorted(rng.sample(range(RECORDS), 3)):
            data = json.loads(lines[k])
            edit = rng.choice(["flip", "value", "no digest"])
            if edit == "flip":
                data["correct"] = not data["correct"]
            elif edit == "value":
                data["value"] = 12345.0
            else:
                del data["digest"]
            lines[k] = json.dumps(data)
        out.write_text("\n".join(lines) + "\n")
    code = resume(preds, out, extra)
    expected = clean_run(tmp_path, preds, extra)
    assert lines_of(out) == expected, change
    assert code == 0
    golds_changed = change in ("input golds", "gold file")
    assert all(line["correct"] for line in expected) != golds_changed  # the change shows in the verdicts


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda data: data.update(id="q99"), "field 'id' is \"q99\""),
        (lambda data: data.update(line=40), "field 'line' is 40"),
        (lambda data: data.update(correct="yes"), "'correct' is not a bool"),
        (lambda data: data.update(cpu_s="fast"), "'cpu_s' is not a int or float"),
    ],
    ids=["id", "line", "correct", "cpu_s"],
)
def test_a_line_that_does_not_fit_the_input_is_refused_naming_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Any, named: str
) -> None:
    preds, out = write_preds(tmp_path / "p.jsonl", right_golds()), tmp_path / "out.jsonl"
    assert main(["check", str(preds), "--out", str(out), *ARGS]) == 0
    lines = out.read_text().splitlines()[:10]
    data = json.loads(lines[6])
    edit(data)
    lines[6] = json.dumps(data)
    out.write_text("\n".join(lines) + "\n")
    before = out.read_bytes()
    capsys.readouterr()
    assert resume(preds, out, []) == 2
    error = capsys.readouterr().err
    assert f"{out}: line 7" in error and named in error, error
    assert out.read_bytes() == before  # a refused resume touches nothing
