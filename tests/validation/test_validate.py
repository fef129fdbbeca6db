"""`potrun validate` and `potrun.validate`: gold programs checked with the sandbox that scores models.

The table below is the contract: each gold of tests/data/golds_validate.jsonl (written for this
project) gets exactly these problem codes. The GSM8K test checks the real PoT programs against an
independent expectation: the authors' own `executed` values, scored with their comparator.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from paths import REPO, SHARED, TEST_DATA

import potrun
from potrun.cli import main
from potrun.comparators import compare
from potrun.sandbox.api import Sandbox
from potrun.validation import PROBLEM_CODES, Problem, ValidationReport, validate

DATA = TEST_DATA
GOLDS = DATA / "golds_validate.jsonl"
EXAMPLE = REPO / "examples" / "golds.jsonl"
GSM8K = SHARED / "pot" / "gsm8k_fewshot_codex.jsonl"
TIMEOUT = 3.0  # the `timeout` gold never ends; `slow` loops for ~1 s of CPU (over 0.1 x 3 s)

# id (or line, for a record without one) -> the problem codes it must get, exactly.
EXPECTED: dict[str | int, list[str]] = {
    "good-growth": [],
    "good-int-string-answer": [],
    "good-numpy": [],
    "good-math-import-inside": [],
    "good-no-recorded-answer": [],
    "bad-missing-program": ["bad_record"],
    "bad-program-not-a-string": ["bad_record"],
    8: ["bad_record"],  # invalid JSON: no id to read
    "bad-two-programs": ["bad_record"],
    "syntax-error": ["syntax_error"],
    "runtime-error": ["runtime_error"],
    "timeout": ["timeout"],
    "memory-limit": ["memory_limit"],
    "output-limit": ["output_limit"],
    "crashed": ["crashed", "import_not_allowed"],  # it takes `os` to leave the process
    "no-answer": ["no_answer"],
    "not-a-number-bool": ["not_a_number"],
    "not-a-number-str": ["not_a_number"],
    "not-a-number-list": ["not_a_number"],
    "not-a-number-complex": ["not_a_number"],
    "not-finite-nan": ["not_finite"],
    "not-finite-inf": ["not_finite"],
    "nondeterministic": ["nondeterministic"],
    "wrong-answer": ["wrong_answer"],
    "no-solution-function": ["no_solution_function"],
    "solution-with-parameters": ["no_solution_function", "variables_not_first"],
    "variables-not-first": ["variables_not_first"],
    "no-comment": ["no_comment"],
    "print-only-answer": ["no_answer", "print_only_answer"],
    "print-only-top-level": ["no_solution_function", "print_only_answer"],
    "import-not-allowed": ["import_not_allowed"],
    "slow": ["slow"],
}
# restricted policy only; potrun's own failure; benchmark="docmath" only (tests/benchmarks/test_benchmark_docmath.py)
NOT_IN_THE_FILE = {"policy_violation", "sandbox_error", "unreadable_by_scorer"}


@pytest.fixture(scope="module")
def reports() -> dict[str | int, ValidationReport]:
    found = {}
    for report in validate(GOLDS, timeout=TIMEOUT, workers=2):
        found[report.id if report.id is not None else report.line] = report
    return found


@pytest.mark.parametrize(("key", "codes"), EXPECTED.items(), ids=[str(k) for k in EXPECTED])
def test_gold_gets_exactly_its_problems(reports: dict, key: str | int, codes: list[str]) -> None:
    report = reports[key]
    assert sorted(report.codes) == sorted(codes), [p.message for p in report.problems]
    assert report.ok is not any(PROBLEM_CODES[c][0] == "error" for c in codes)
    for p in report.problems:
        assert (p.severity, p.code) == (PROBLEM_CODES[p.code][0], p.code) and p.message


def test_the_file_covers_every_code(reports: dict) -> None:
    assert set(reports) == set(EXPECTED)
    seen = {code for codes in EXPECTED.values() for code in codes}
    assert seen | NOT_IN_THE_FILE == set(PROBLEM_CODES)
    assert [r.line for r in reports.values()] == list(range(1, len(EXPECTED) + 1))  # input order


@pytest.mark.parametrize(
    ("key", "code", "line", "words"),
    [
        ("syntax-error", "syntax_error", 6, "never closed"),
        ("runtime-error", "runtime_error", 6, "ZeroDivisionError"),
        ("timeout", "timeout", None, "limit"),
        ("import-not-allowed", "import_not_allowed", 1, "`import json`"),
        ("print-only-answer", "print_only_answer", 6, "prints"),
        ("print-only-top-level", "print_only_answer", 5, "printed"),
        ("solution-with-parameters", "no_solution_function", 1, "parameters"),
        ("variables-not-first", "variables_not_first", 3, "variables"),
        ("not-finite-nan", "not_finite", None, "NaN"),
        ("not-a-number-complex", "not_a_number", None, "complex"),
        ("not-a-number-bool", "not_a_number", None, "bool"),
        ("nondeterministic", "nondeterministic", None, "run 2"),
        ("wrong-answer", "wrong_answer", None, "12.0"),
        ("bad-missing-program", "bad_record", None, "'python_solution'"),
        ("bad-program-not-a-string", "bad_record", None, "'python_solution'"),
        ("bad-two-programs", "bad_record", None, "list of 2"),
        (8, "bad_record", None, "invalid JSON"),
    ],
)
def test_problem_lines_and_messages(reports: dict, key: str | int, code: str, line: int | None, words: str) -> None:
    (found,) = [p for p in reports[key].problems if p.code == code]
    assert found.line == line
    assert words in found.message


def test_report_values_and_json(reports: dict) -> None:
    good = reports["good-int-string-answer"]
    assert (good.value, good.value_type, good.status, good.entry) == (1250, "int", "ok", "solution")
    assert reports["bad-missing-program"].line == 6 and reports["bad-missing-program"].status is None
    assert reports["wrong-answer"].fixable and not reports["print-only-answer"].fixable
    line = reports["not-finite-nan"].to_json()
    assert json.loads(json.dumps(line, allow_nan=False))["value"] == "NaN"
    assert set(line) >= {"id", "line", "problems", "value", "ok"}
    assert line["problems"][0] == {
        "code": "not_finite",
        "severity": "error",
        "message": "the answer is NaN",
        "line": None,
    }
    with pytest.raises(dataclasses.FrozenInstanceError):
        Problem("slow", "warning", "m").code = "x"  # type: ignore[misc]
    assert hash(reports["wrong-answer"].problems[0]) == hash(reports["wrong-answer"].problems[0])


def test_ignore_drops_codes() -> None:
    records = [{"python_solution": "def solution():\n    return 1"}]
    (report,) = validate(records, ignore={"no_comment", "variables_not_first"}, workers=1)
    assert report.problems == ()


def test_public_api_is_callable_from_the_package() -> None:
    import potrun.validation

    (report,) = potrun.validate([{"id": 1, "python_solution": "ans = 2"}], workers=1, ignore={"no_comment"})
    assert isinstance(report, potrun.ValidationReport) and report.value == 2
    assert report.codes == ("no_solution_function",)


def test_streams_records_and_keeps_the_sandbox_warm() -> None:
    consumed = itertools.count()

    def records():
        for number in range(100_000):
            next(consumed)
            yield {"id": number, "python_solution": f"def solution():\n    # n\n    n = {number}\n    return n"}

    with (
        Sandbox(policy="trusted", workers=1, hash_seed=0) as box,
        Sandbox(policy="trusted", workers=1, hash_seed=1) as again,
    ):
        first = list(itertools.islice(validate(records(), sandbox=box, recheck=again), 50))
        assert [r.value for r in first] == list(range(50)) and all(r.ok and not r.problems for r in first)
        assert next(consumed) < 500  # read as needed, not loaded whole
        assert box.workers_replaced == 0 and box.run("ans = 7").value == 7  # still warm, still open


def test_one_sandbox_runs_each_program_twice() -> None:
    golds = [
        {
            "id": "pid",
            "python_solution": "import time\ndef solution():\n    # the clock\n    x = 1\n    return time.time_ns()",
        },
        {"id": "fine", "python_solution": "def solution():\n    # fine\n    x = 1\n    return x"},
    ]
    with Sandbox(policy="trusted", workers=2) as box:
        pid, fine = validate(golds, sandbox=box)
    assert "nondeterministic" in pid.codes and fine.codes == ()


def test_restricted_policy_reports_violations() -> None:
    golds = [{"id": 1, "python_solution": "import os\ndef solution():\n    # x\n    x = 1\n    return os.getpid()"}]
    (report,) = validate(golds, policy="restricted", workers=1)
    assert sorted(report.codes) == ["import_not_allowed", "policy_violation"]


def test_json_array_input(tmp_path: Path) -> None:
    records = [json.loads(line) for line in EXAMPLE.read_text().splitlines()]
    array = tmp_path / "golds.json"
    array.write_text(json.dumps(records, indent=2))
    from_lines = [r.codes for r in validate(EXAMPLE, workers=1)]
    from_array = list(validate(array, workers=1))
    assert [r.codes for r in from_array] == from_lines
    assert [r.id for r in from_array] == [r["id"] for r in records]


def test_bad_options() -> None:
    with pytest.raises(potrun.UsageError):
        validate(GOLDS, compare="no-such-preset")
    with pytest.raises(potrun.UsageError):
        validate(GOLDS, ignore={"no_such_code"})
    with pytest.raises(potrun.UsageError):
        validate(GOLDS, timeout=-1)
    with pytest.raises(potrun.InputError):
        validate(DATA / "missing.jsonl")


# -- the command -----------------------------------------------------------------------------------


def run_cli(tmp_path: Path, *args: str) -> tuple[int, list[dict]]:
    out = tmp_path / "reports.jsonl"
    code = main(["validate", *args, "--out", str(out), "--quiet", "--workers", "2"])
    return code, [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []


def test_cli_exit_codes_and_output(tmp_path: Path) -> None:
    code, lines = run_cli(tmp_path, str(EXAMPLE))
    assert code == 1 and len(lines) == 5
    assert [[p["code"] for p in line["problems"]] for line in lines] == [
        [],
        ["wrong_answer"],
        ["runtime_error"],
        ["no_comment"],
        ["no_answer", "print_only_answer"],
    ]
    clean = tmp_path / "clean.jsonl"
    clean.write_text(
        "".join(
            json.dumps(json.loads(line)) + "\n"
            for line in EXAMPLE.read_text().splitlines()
            if json.loads(line)["id"] in ("fin-001", "fin-004")
        )
    )
    assert run_cli(tmp_path, str(clean))[0] == 0  # warnings alone pass
    assert run_cli(tmp_path, str(clean), "--strict")[0] == 1
    assert run_cli(tmp_path, str(clean), "--strict", "--ignore", "no_comment")[0] == 0


def test_cli_unreadable_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path / "nope.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage\n")  # a bad line is a bad_record, as in check: not the end of the run
    assert main(["validate", str(binary), "--quiet"]) == 1
    (report,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert report["problems"][0]["code"] == "bad_record" and "invalid UTF-8" in report["problems"][0]["message"]


def test_cli_stdout_and_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(EXAMPLE), "--workers", "1"]) == 1
    captured = capsys.readouterr()
    assert [json.loads(line)["id"] for line in captured.out.splitlines()] == [f"fin-00{i}" for i in range(1, 6)]
    assert "problems by code" in captured.err and "wrong_answer" in captured.err


def test_cli_fix_answers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fixed = tmp_path / "fixed.jsonl"
    code, _ = run_cli(tmp_path, str(EXAMPLE), "--fix-answers", str(fixed))
    assert code == 1  # the input still has its errors
    original, copy = EXAMPLE.read_text().splitlines(), fixed.read_text().splitlines()
    changed = [(a, b) for a, b in zip(original, copy, strict=True) if a != b]
    assert len(changed) == 1
    before, after = (json.loads(x) for x in changed[0])
    assert (before["id"], before["ground_truth"], after["ground_truth"]) == ("fin-002", 12.0, 12.5)
    assert {k: v for k, v in before.items() if k != "ground_truth"} == {
        k: v for k, v in after.items() if k != "ground_truth"
    }
    assert "line 2 (id fin-002): 12.0 -> 12.5" in capsys.readouterr().err
    assert run_cli(tmp_path, str(fixed), "--ignore", "runtime_error,no_answer")[0] == 0


# -- the real thing: 1,318 GSM8K PoT programs validated as golds ---------------------------------------

# Records where re-execution legitimately differs from the authors' recorded `executed`:
KNOWN = {
    826: {(), ("timeout",)},  # a 341^3 brute-force loop, ~3.5 s: matches, or times out on a loaded machine
    856: {("wrong_answer",), ("timeout",)},  # an 87^4 loop: timed out for the authors; returns 0 (gold 13)
    907: {("not_a_number",)},  # `ans = a, b`: a tuple; floatify_ans took its first element
}
REFERENCE = """
import sys
source = sys.stdin.read()
try:
    code = compile(source, "<gold>", "exec")
except SyntaxError:
    print("syntax_error"); sys.exit()
namespace = {}
try:
    exec(code, namespace)
except Exception:
    print("runtime_error"); sys.exit()
print("ok" if namespace.get("ans") is not None else "no_answer")
"""


def reference_outcome(source: str) -> str:
    """PoT's own `safe_execute`, in a plain subprocess: how an unsandboxed run of the program ends."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", REFERENCE], input=source, capture_output=True, text=True, timeout=5
        )
    except subprocess.TimeoutExpired:
        return "timeout"
    return done.stdout.strip()


# The README's second `potrun validate` command, as written (plus --quiet, and --timeout 15: line 826's
# ~3.5 s loop can pass the 5 s CPU limit on a busy machine, the README says so; 15 s leaves it twice the
# most seen under load, and the two endless programs, 1104 and 1106, cost 15 s each, not 30). tests/docs/test_readme.py
# leaves this command to this test, which checks each record and the README's figures: one run of the
# 1,318 programs, not two.
README_COMMAND = [
    "validate",
    str(GSM8K),
    "--program-field",
    "generated",
    "--answer-field",
    "answer",
    "--compare",
    "pot",
]


@pytest.mark.slow
@pytest.mark.skipif(not GSM8K.exists(), reason="the shared PoT data is not here")
def test_gsm8k_pot_programs_as_golds() -> None:
    records = [json.loads(line) for line in GSM8K.read_text().splitlines()]
    command = [sys.executable, "-m", "potrun", *README_COMMAND, "--timeout", "15", "--quiet"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stderr  # some golds have errors
    reports = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(reports) == len(records) == 1318
    failed_for_authors = [n for n, r in enumerate(records, start=1) if r["executed"] is None and n not in KNOWN]
    with ThreadPoolExecutor(8) as pool:
        outcomes = dict(
            zip(
                failed_for_authors,
                pool.map(lambda n: reference_outcome(records[n - 1]["generated"][0]), failed_for_authors),
                strict=True,
            )
        )
    tally: Counter[str] = Counter()
    for number, (record, report) in enumerate(zip(records, reports, strict=True), start=1):
        assert report["line"] == number
        codes = {p["code"] for p in report["problems"]}
        errors = tuple(p["code"] for p in report["problems"] if p["severity"] == "error")
        if number in KNOWN:
            assert errors in KNOWN[number], (number, report["problems"])
            continue
        if record["executed"] is None:
            expected: tuple[str, ...] = (outcomes[number],)
        elif compare(record["executed"], record["answer"], preset="pot").correct:
            expected = ()
        else:
            expected = ("wrong_answer",)
        assert errors == expected, (number, record["executed"], record["answer"], report["problems"])
        assert report["ok"] is (expected == ())
        tally[expected[0] if expected else "pass"] += 1
        # the `ans` convention: never a `def solution():`, as every PoT few-shot program
        assert "no_solution_function" in codes or "syntax_error" in codes
    assert (tally["pass"], tally["wrong_answer"]) == (942, 351)  # + 826, 856 and 907: 1,318
    # The README's figures: 943 pass (826 too, with room to finish), 351 wrong_answer (and 856, an 87^4
    # loop: wrong at 15 s, a timeout only if the machine ran far slower still).
    assert sum(report["ok"] for report in reports) == 943
    wrong = sum(any(p["code"] == "wrong_answer" for p in report["problems"]) for report in reports)
    line_856 = [p["code"] for p in reports[855]["problems"] if p["severity"] == "error"]
    assert wrong == 351 + (line_856 == ["wrong_answer"])
    assert tally["runtime_error"] + tally["no_answer"] + tally["syntax_error"] + tally["timeout"] == 22
