"""Process-aware golds (potrun.check.process_golds): captured values and checklists, checker programs.

- capture: the numbers a program's variables held come back as plain floats, only when asked, from
  the entry function's locals and the module's globals, bounded, with no method of the program's own
  objects called and the trace hook gone afterwards;
- checklists: for programs against the captured numbers, for chain of thought against the numbers in
  the text; `checklist_passed`/`checklist_missing` per record, `checklist_accuracy` in the summary;
- checkers: `def check(answer) -> bool` runs trusted in the sandbox on the answer written as a literal
  of plain data (model text stays a string, never code); the example checkers and puzzles.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import json
import math
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import describe
from paths import REPO

from potrun import Sandbox, Status
from potrun.check.pipeline import CheckOptions, check_records
from potrun.check.process_golds import (
    ProcessGoldError,
    answer_literal,
    checker_program,
    observed_in_text,
    read_process_gold,
)
from potrun.check.records import read_records
from potrun.cli import main
from potrun.reports.table import Summary, render
from potrun.sandbox.inside.runner import MAX_CAPTURED, Capture

CHECKERS = REPO / "examples" / "checkers"
PUZZLES = REPO / "examples" / "puzzles.jsonl"
FENCE = "```"


def load_checker(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"checker_{name}", CHECKERS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SOLVED = [
    [int(c) for c in row]
    for row in [
        "534678912",
        "672195348",
        "198342567",
        "859761423",
        "426853791",
        "713924856",
        "961537284",
        "287419635",
        "345286179",
    ]
]


# ------------------------------------------------------------------------------------- capture


# (id, program, numbers that must be captured, numbers that must not)
CAPTURES = [
    (
        "solution-locals",
        "def solution():\n    revenue = 120.5\n    cost = 80\n    growth = (revenue - cost) / cost\n"
        "    return round(growth * 100, 2)",
        [120.5, 80, 0.50625, 50.62],
        [],
    ),
    ("ans-globals", "a = 3\nb = a * 7\nans = b + 0.5", [3, 21, 21.5], []),
    (
        "containers",
        "def solution():\n    years = {'2019': 100, '2020': [110, (121,)]}\n    return 1",
        [100, 110, 121, 1],
        [],
    ),
    (
        "number-types",
        "import numpy as np\nfrom fractions import Fraction\nfrom decimal import Decimal\n"
        "x = np.array([[1.5, 2.5]])\ny = np.float32(0.5)\nf = Fraction(1, 4)\nd = Decimal('2.25')\n"
        "ans = 1",
        [1.5, 2.5, 0.5, 0.25, 2.25],
        [],
    ),
    (
        "not-numbers",
        "flag = True\nbig = 10 ** 400\nnan = float('nan')\ninf = float('inf')\ntext = '42'\nans = 7",
        [7],
        [1.0, 42.0],
    ),
    (
        "outermost-frame",
        "def solution(k=3):\n    if k == 0:\n        return 0\n    inner = k * 100\n"
        "    solution(k - 1)\n    return inner",
        [3, 300],
        [100, 200],
    ),
    (
        "helper-locals-not",
        "def helper(n):\n    hidden = n * 1000\n    return n\ndef solution():\n    return helper(5)",
        [5],
        [5000],
    ),
]


@pytest.mark.parametrize("policy", ["restricted", "trusted"])
@pytest.mark.parametrize(("source", "present", "absent"), [pytest.param(*row[1:], id=row[0]) for row in CAPTURES])
def test_capture_gathers_plain_numbers(box: Sandbox, source: str, present: list[float], absent: list[float]) -> None:
    result = box.run(source, capture=True)
    assert result.status is Status.OK, describe(result)
    assert result.captured is not None and all(type(x) is float and math.isfinite(x) for x in result.captured)
    for number in present:
        assert float(number) in result.captured, (number, result.captured)
    for number in absent:
        assert float(number) not in result.captured, (number, result.captured)
    assert box.run(source).captured is None  # not asked: nothing captured, nothing sent
    assert "captured" not in box.run(source).to_json() and "captured" in result.to_json()


@pytest.mark.parametrize("policy", ["restricted"])
def test_capture_is_bounded(box: Sandbox) -> None:
    result = box.run("def solution():\n    xs = [i * 0.5 for i in range(50000)]\n    return len(xs)", capture=True)
    assert result.status is Status.OK and result.captured is not None
    assert len(result.captured) == MAX_CAPTURED


@pytest.mark.parametrize("policy", ["trusted"])
def test_capture_calls_no_method_of_the_programs_objects(box: Sandbox) -> None:
    """Subclasses of number types are not looked at: their __float__/__index__ never run."""
    source = (
        "import os\n"
        "class F(float):\n    def __float__(self):\n        os._exit(3)\n"
        "class I(int):\n    def __index__(self):\n        os._exit(3)\n    __int__ = __index__\n"
        "class L(list):\n    def __iter__(self):\n        os._exit(3)\n"
        "def solution():\n    f = F(1.5)\n    i = I(7)\n    items = L([9])\n    plain = 2.5\n    return 4"
    )
    result = box.run(source, capture=True)
    assert result.status is Status.OK, describe(result)
    assert result.captured == (2.5, 4.0)


@pytest.mark.parametrize("policy", ["restricted", "trusted"])
def test_capture_of_a_failed_program_is_none(box: Sandbox) -> None:
    result = box.run("def solution():\n    a = 5\n    return 1 / 0", capture=True)
    assert result.status is Status.ERROR and result.captured is None


@pytest.mark.parametrize("policy", ["restricted"])
def test_warm_runner_is_unchanged_after_a_capture(box: Sandbox) -> None:
    sources = ["def solution():\n    x = 1.25\n    return x"] * 3 + ["def solution():\n    y = 2\n    return y"]
    results = list(box.run_many(sources, capture=True))
    assert [r.captured for r in results] == [(1.25,)] * 3 + [(2.0,)]
    assert box.run("def solution():\n    return 42").value == 42


def test_capture_hook_is_removed_and_restores_the_previous_one() -> None:
    previous = sys.gettrace()

    def solution() -> int:
        total = 40
        return total + 2

    capture = Capture()
    assert capture.call(solution) == 42
    assert sys.gettrace() is previous
    assert capture.numbers({"other": 7}, 42) == [40.0, 42.0, 7.0]

    def failing() -> None:
        raise ValueError("x")

    with pytest.raises(ValueError):
        Capture().call(failing)
    assert sys.gettrace() is previous


# ------------------------------------------------------------------------------------- reading golds


def test_read_process_gold() -> None:
    assert read_process_gold({"answer": 1}, "text", "cot", "checklist", "checker") is None
    assert read_process_gold({"checklist": None}, "text", "cot", "checklist", "checker") is None
    gold = read_process_gold(
        {"checklist": [1, {"value": "12.5%"}, {"min": 2, "max": 3}]},
        "from 120 to 150: 25% or 3.5 million",
        "cot",
        "checklist",
        None,
    )
    assert gold is not None and gold.checklist is not None and len(gold.checklist) == 3
    assert gold.text_numbers == (120.0, 150.0, 25.0, 0.25, 3.5, 3500000.0)
    program = read_process_gold({"checklist": [1]}, "def solution(): ...", "pot", "checklist", None)
    assert program is not None and program.text_numbers is None
    assert read_process_gold({"checklist": [1]}, "text", "cot", None, None) is None  # field turned off


@pytest.mark.parametrize(
    ("data", "field_name"),
    [
        ({"checklist": 5}, "checklist"),
        ({"checklist": [True]}, "checklist"),
        ({"checklist": [{"name": "x"}]}, "checklist"),
        ({"checklist": ["many"]}, "checklist"),
        ({"checker": 3}, "checker"),
        ({"checker": "lambda answer: True"}, "checker"),
    ],
)
def test_malformed_process_golds_are_refused(data: dict[str, Any], field_name: str) -> None:
    with pytest.raises(ProcessGoldError) as info:
        read_process_gold(data, "text", "cot", "checklist", "checker")
    assert info.value.field_name == field_name


def test_observed_in_text_is_bounded_and_finite() -> None:
    assert observed_in_text("no numbers here") == ()
    assert len(observed_in_text(" then ".join(str(i) for i in range(20000)))) == 10000
    assert observed_in_text(" ".join(str(i) for i in range(20000))) == ()  # an enumeration states nothing


# ------------------------------------------------------------------------------------- answer literals


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -12,
        10**50,
        2.5,
        "(8-4)*(7-1)",
        "__import__('os').system('true')",
        "'); import os; ('",
        '"""\n\\',
        "\ud800",
        [],
        [1, [2.5, "x"], None],
        SOLVED,
    ],
)
def test_answer_literal_round_trips_plain_data(value: Any) -> None:
    literal = answer_literal(value)
    assert ast.literal_eval(literal) == value


def test_answer_literal_non_finite_floats() -> None:
    for value in (math.inf, -math.inf):
        assert answer_literal(value) == f"float({str(value)!r})"
    assert answer_literal(math.nan) == "float('nan')"


@pytest.mark.parametrize("value", [{"a": 1}, b"x", object(), (1, 2j), 1j])
def test_answer_literal_refuses_anything_else(value: Any) -> None:
    with pytest.raises(TypeError):
        answer_literal(value)


def test_answer_literal_refuses_deep_nesting() -> None:
    value: list[Any] = []
    for _ in range(40):
        value = [value]
    with pytest.raises(ValueError):
        answer_literal(value)


def test_checker_program_text() -> None:
    program = checker_program("def check(answer):\n    return True\n\n", "x')")
    assert program.endswith('\n\n\nans = check("x\')")\n')
    assert ast.parse(program)


# ------------------------------------------------------------------------------------- example checkers


@pytest.mark.parametrize(
    ("numbers", "answer", "expected"),
    [
        ((4, 7, 8, 1), "(8-4)*(7-1)", True),
        ((4, 7, 8, 1), "(8 - 4) × (7 - 1) = 24", True),
        ((4, 7, 8, 1), "8*(7-4)*1", True),
        ((3, 3, 8, 8), "8/(3-8/3)", True),  # exact: in floats it is 23.999999999999996
        ((4, 7, 8, 1), "(8-4)*(8-2)", False),  # 8 twice, no 7, 2 is not given
        ((4, 7, 8, 1), "(8-4)*(7-1)=25", False),
        ((4, 7, 8, 1), "4*7-8+1", False),  # 21
        ((4, 7, 8, 1), "-(4-8)*(7-1)", False),  # unary minus
        ((4, 7, 8, 1), "(8-4)**1*(7-1)", False),  # power, and 1 twice
        ((4, 7, 8, 1), "(8-4)*(7-1)/(1-1)", False),
        ((4, 7, 8, 1), "__import__('os')", False),
        ((4, 7, 8, 1), "(84)*(71)", False),
        ((4, 7, 8, 1), "", False),
        ((4, 7, 8, 1), 24, False),
        ((4, 7, 8, 1), "(" * 150 + "8" + ")" * 150, False),
    ],
)
def test_game24_checker(numbers: tuple[int, ...], answer: Any, expected: bool) -> None:
    game24 = load_checker("game24")
    game24.NUMBERS = numbers
    assert game24.check(answer) is expected


def _relabeled(grid: list[list[int]]) -> list[list[int]]:
    return [[{1: 2, 2: 1}.get(c, c) for c in row] for row in grid]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (SOLVED, True),
        (json.dumps(SOLVED), True),
        (str([tuple(row) for row in SOLVED]), True),
        (_relabeled(SOLVED), False),  # a valid sudoku that breaks the givens
        ([row[:] for row in SOLVED[:8]] + [SOLVED[8][::-1]], False),
        ([[c if (r, c_) != (0, 2) else 5 for c_, c in enumerate(row)] for r, row in enumerate(SOLVED)], False),
        ([[float(c) for c in row] for row in SOLVED], False),
        ([[True] * 9] * 9, False),
        ("not a grid", False),
        ("__import__('os').system('true')", False),
        (None, False),
    ],
)
def test_sudoku_checker(answer: Any, expected: bool) -> None:
    assert load_checker("sudoku").check(answer) is expected


def test_puzzles_carry_the_example_checkers() -> None:
    """Each record's checker is an example file, up to its puzzle constant (NUMBERS)."""
    files = {name: (CHECKERS / f"{name}.py").read_text() for name in ("game24", "sudoku")}
    constant = re.compile(r"^NUMBERS = .*$", re.M)
    seen = set()
    for line in PUZZLES.read_text().splitlines():
        checker = json.loads(line).get("checker")
        if checker is None:
            continue
        shape = constant.sub("NUMBERS", checker)
        matches = [name for name, text in files.items() if constant.sub("NUMBERS", text) == shape]
        assert len(matches) == 1, checker[:200]
        seen.add(matches[0])
    assert seen == {"game24", "sudoku"}


# ------------------------------------------------------------------------------------- potrun check


def write_jsonl(path: Path, records: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def check(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any], dict[Any, dict[str, Any]]]:
    out, summary = tmp_path / "out.jsonl", tmp_path / "summary.json"
    code = main(["check", *args, "--out", str(out), "--summary-json", str(summary), "--quiet", "--workers", "1"])
    results = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return code, json.loads(summary.read_text()) if summary.exists() else {}, {r["id"]: r for r in results}


def test_bundled_puzzles(tmp_path: Path) -> None:
    code, summary, by_id = check(tmp_path, str(PUZZLES), "--mode", "auto")
    assert code == 0
    expected = {  # id: (correct, checklist_passed)
        "24-4781-right": (True, True),
        "24-4781-reuses-8": (False, True),
        "24-3388-fractions": (True, None),
        "24-1234-wrong-value": (False, None),
        "sudoku-solved": (True, None),
        "sudoku-givens-broken": (False, None),
        "growth-program": (True, True),
        "growth-program-no-work": (True, False),
        "growth-cot": (True, True),
    }
    assert {i: (r["correct"], r.get("checklist_passed")) for i, r in by_id.items()} == expected
    assert by_id["growth-program-no-work"]["checklist_missing"] == [30, {"min": 0.24, "max": 0.26}]
    assert by_id["24-4781-right"]["checker"] == {"status": "ok", "value": True, "accepted": True}
    assert "checklist_passed" not in by_id["24-3388-fractions"]
    assert (summary["correct"], summary["graded"]) == (6, 9)
    assert summary["checklist_accuracy"] == 0.6 and summary["checklist_records"] == 5
    assert summary["checklist_pass_rate"] == 0.8


def test_checklist_accuracy_in_the_table(tmp_path: Path) -> None:
    preds = write_jsonl(
        tmp_path / "p.jsonl",
        [
            {"id": 1, "output": "def solution():\n    a = 6\n    return a * 7", "answer": 42, "checklist": [6]},
            {"id": 2, "output": "def solution():\n    return 42", "answer": 42, "checklist": [6]},
            {"id": 3, "output": "def solution():\n    return 42", "answer": 42},
        ],
    )
    summary = Summary(("default",))
    with Sandbox(workers=1) as box:
        for result in check_records(read_records(preds), box, CheckOptions()):
            summary.add(result)
    stream = io.StringIO()
    render(summary.finish(), stream=stream)
    table = stream.getvalue()
    assert re.search(r"accuracy \+ checklist\s*│\s*0\.5000\s+\(1/2 with a checklist\)", table), table
    assert summary.to_json()["checklist_accuracy"] == 0.5 and summary.to_json()["accuracy"] == 1.0


def test_checklist_field_option_and_tolerance(tmp_path: Path) -> None:
    preds = write_jsonl(
        tmp_path / "p.jsonl",
        [
            {"id": 1, "output": "def solution():\n    r = 0.333\n    return 1", "answer": 1, "steps": [1 / 3]},
        ],
    )
    _, summary, by_id = check(tmp_path, str(preds), "--checklist-field", "steps")
    assert by_id[1]["checklist_passed"] is False and summary["checklist_accuracy"] == 0.0
    _, summary, by_id = check(tmp_path, str(preds), "--checklist-field", "steps", "--rel-tol", "1e-2")
    assert by_id[1]["checklist_passed"] is True and summary["checklist_accuracy"] == 1.0
    _, summary, by_id = check(tmp_path, str(preds))  # the default field is `checklist`: none here
    assert "checklist_passed" not in by_id[1] and "checklist_accuracy" not in summary


def test_malformed_checklist_is_a_bad_record(tmp_path: Path) -> None:
    preds = write_jsonl(
        tmp_path / "p.jsonl",
        [
            {"id": 1, "output": "ans = 1", "answer": 1, "checklist": {"value": 1}},
            {"id": 2, "output": "ans = 1", "answer": 1, "checker": "not a checker"},
            {"id": 3, "output": "ans = 1", "answer": 1},
        ],
    )
    _, summary, by_id = check(tmp_path, str(preds))
    assert by_id[3]["correct"] is True
    assert summary["bad_record"] == 2
    statuses = sorted(r["status"] for r in by_id.values())
    assert statuses == ["bad_record", "bad_record", "ok"]


ECHO_CHECKER = "def check(answer):\n    return answer == EXPECTED\n\nEXPECTED = {expected!r}\n"


def test_checker_gets_model_text_as_a_string_never_as_code(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    hostile = f"__import__('pathlib').Path({str(marker)!r}).touch() or True"
    breakout = "x'); __import__('pathlib').Path(" + repr(str(marker)) + ").touch(); ('"
    preds = write_jsonl(
        tmp_path / "p.jsonl",
        [
            {"id": i, "output": f"Thinking.\nAnswer: {text}", "checker": ECHO_CHECKER.format(expected=text)}
            for i, text in enumerate((hostile, breakout))
        ],
    )
    _, _, by_id = check(tmp_path, str(preds), "--mode", "cot")
    assert [by_id[i]["correct"] for i in (0, 1)] == [True, True]
    assert not marker.exists()


@pytest.mark.parametrize(
    ("checker", "correct", "status"),
    [
        ("def check(answer):\n    return 1", False, "ok"),  # 1 is not True
        ("def check(answer):\n    return None", False, "no_answer"),
        ("def check(answer):\n    raise ValueError('broken checker')", False, "error"),
        ("def check(answer)\n    return True", False, "syntax_error"),
        ("import time\ndef check(answer):\n    time.sleep(30)", False, "timeout"),
        ("import os\ndef check(answer):\n    return os.getcwd() != ''", True, "ok"),  # trusted: plain Python
    ],
)
def test_checker_outcomes(tmp_path: Path, checker: str, correct: bool, status: str) -> None:
    preds = write_jsonl(tmp_path / "p.jsonl", [{"id": 1, "output": "ans = 7", "checker": checker}])
    _, summary, by_id = check(tmp_path, str(preds), "--timeout", "1")
    assert by_id[1]["correct"] is correct and by_id[1]["checker"]["status"] == status, by_id[1]
    assert summary["graded"] == 1


def test_checker_on_program_values_and_samples(tmp_path: Path) -> None:
    """A program's value (here a sudoku grid) reaches the checker as plain data; with several samples
    pass@k and the majority vote are judged by the checker."""
    sudoku = (CHECKERS / "sudoku.py").read_text()
    right = f"def solution():\n    return {SOLVED!r}"
    wrong = f"def solution():\n    return {_relabeled(SOLVED)!r}"
    preds = write_jsonl(
        tmp_path / "p.jsonl",
        [
            {"id": "one", "output": right, "checker": sudoku},
            {"id": "many", "output": [wrong, right, wrong, "def solution():\n    return 1 / 0"], "checker": sudoku},
        ],
    )
    _, summary, by_id = check(tmp_path, str(preds), "--k", "1,2")
    assert by_id["one"]["correct"] is True and by_id["one"]["value_type"] == "list"
    many = by_id["many"]
    assert many["correct"] is False and many["samples"]["correct"] == 1
    assert many["samples"]["pass@k"] == {"1": 0.25, "2": 0.5}
    assert many["samples"]["majority_correct"] is False and many["samples"]["majority_value"] == _relabeled(SOLVED)
    assert summary["correct"] == 1 and summary["graded"] == 2


def test_checker_decides_over_a_gold_answer(tmp_path: Path) -> None:
    preds = write_jsonl(
        tmp_path / "p.jsonl",
        [
            {"id": 1, "output": "ans = 7", "answer": 7, "checker": "def check(answer):\n    return answer == 8"},
        ],
    )
    _, _, by_id = check(tmp_path, str(preds))
    assert by_id[1]["correct"] is False and by_id[1]["gold"] == 7
    _, _, by_id = check(tmp_path, str(preds), "--checker-field", "")  # turned off: the gold answer decides
    assert by_id[1]["correct"] is True and "checker" not in by_id[1]
