"""Process scores measure the process (issue 36, class 3): checklist evidence is a value the program
computed or a number the reasoning states, never a literal container of candidates, an enumeration, or
a spray of more distinct values than the checklist could need. Run through the real pipeline and
sandbox; checklists and sprays drawn from a seed."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from potrun.check.pipeline import CheckOptions, check_records
from potrun.check.records import read_records
from potrun.check.scoring import check_checklist, spray_limit
from potrun.sandbox.api import Sandbox


def _checked(tmp_path: Path, records: list[dict[str, object]], mode: str = "pot") -> dict[object, dict[str, object]]:
    preds = tmp_path / "p.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    with Sandbox(workers=1) as box:
        return {r.id: r.to_json() for r in check_records(read_records(preds), box, CheckOptions(mode=mode))}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_spray_never_passes_a_checklist_and_a_computation_does(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    steps = [rng.randint(2, 900) for _ in range(rng.randint(2, 4))]  # the total is none of them
    total = sum(steps)
    computed = "def solution():\n" + "".join(f"    s{k} = {v // 2} + {v - v // 2}\n" for k, v in enumerate(steps))
    computed += "    return " + " + ".join(f"s{k}" for k in range(len(steps))) + "\n"
    spray_size = rng.choice([1000, 2000, 5000])
    records = [
        {"id": "computed", "output": computed, "answer": total, "checklist": steps},
        {  # every candidate held in a variable: list(range(N))
            "id": "range",
            "output": f"def solution():\n    seen = list(range({spray_size}))\n    return {total}",
            "answer": total,
            "checklist": steps,
        },
        {  # the checklist's own values, written out in a literal container, never computed
            "id": "literal",
            "output": f"def solution():\n    cands = {steps + [rng.randint(1, 999) for _ in range(5)]!r}\n    return {total}",
            "answer": total,
            "checklist": steps,
        },
    ]
    by_id = _checked(tmp_path, records)
    assert by_id["computed"]["checklist_passed"] is True
    assert by_id["range"]["checklist_passed"] is False
    assert by_id["literal"]["checklist_passed"] is False
    assert all(r["correct"] for r in by_id.values())  # the answer's verdict is the answer's alone


@pytest.mark.parametrize("seed", [4, 5])
def test_a_chain_of_thought_that_lists_numbers_passes_no_checklist(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    steps = [rng.randint(2, 900) for _ in range(2)]
    listed = ", ".join(str(i) for i in range(rng.choice([200, 1000])))
    stated = f"First, {steps[0] // 2} + {steps[0] - steps[0] // 2} = {steps[0]}. Then the second step gives {steps[1]}."
    records = [
        {"id": "stated", "output": f"{stated} The answer is {sum(steps)}.", "answer": sum(steps), "checklist": steps},
        {
            "id": "listed",
            "output": f"It is one of {listed}. The answer is {sum(steps)}.",
            "answer": sum(steps),
            "checklist": steps,
        },
        {  # numbers spread through words: not an enumeration, but far more than two items need
            "id": "sprayed",
            "output": " ".join(f"maybe {i}." for i in range(300)) + f" The answer is {sum(steps)}.",
            "answer": sum(steps),
            "checklist": steps,
        },
    ]
    by_id = _checked(tmp_path, records, mode="cot")
    assert by_id["stated"]["checklist_passed"] is True
    assert by_id["listed"]["checklist_passed"] is False
    assert by_id["sprayed"]["checklist_passed"] is False


def test_the_spray_limit_grows_with_the_checklist() -> None:
    assert spray_limit(1) == spray_limit(4) == 64 and spray_limit(10) == 160
    many = [float(i) for i in range(200)]
    assert check_checklist(many, [5.0]).passed  # the plain check: the benchmarks' (DocPuzzle's) reading
    refused = check_checklist(many, [5.0], reject_spray=True)
    assert not refused.passed and refused.spray
    assert check_checklist(many, [float(i) for i in range(20)], reject_spray=True).passed  # 200 <= 16 * 20
