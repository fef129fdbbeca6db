"""Preset "math" (math-verify): symbolic answers, and what hostile text can and cannot do in the parent."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from potrun import compare
from potrun.comparators.math import MAX_CHARS
from potrun.types import InputError

pytest.importorskip("math_verify", reason="the math extra: pip install 'potrun[math]'")


@pytest.mark.parametrize(
    "value,gold",
    [
        ("2\\sqrt{2}", "\\sqrt{8}"),
        ("\\frac{\\pi}{2}", "\\pi/2"),
        ("(1,2)", "(1, 2)"),
        ("1+x^2", "x^2+1"),
        (0.5, "\\frac{1}{2}"),
        (72, "72"),
        ("The answer is $\\boxed{3}$.", 3),
        ([1, 2], "(1, 2)"),
    ],
)
def test_equal_answers(value: Any, gold: Any) -> None:
    assert compare(value, gold, preset="math").correct


@pytest.mark.parametrize(
    "value,gold",
    [("x^2+2", "x^2+1"), ("\\sqrt{3}", "\\sqrt{8}"), ("(1, 3)", "(1, 2)"), (True, "1"), (None, "1"), (0.51, "1/2")],
)
def test_different_answers(value: Any, gold: Any) -> None:
    assert not compare(value, gold, preset="math").correct


def test_text_reaches_no_code(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    for text in (
        f"__import__('os').system('touch {marker}')",
        f"${{__import__('os').system('touch {marker}')}}$",
        f"The answer is (lambda: __import__('os').system('touch {marker}'))()",
    ):
        assert not compare(text, "0", preset="math").correct
    assert not marker.exists()


@pytest.mark.parametrize("text", ["(10^{7})!", "2^{2^{40}}", "\\sum_{i=1}^{10^{9}} i"])
def test_huge_computations_end_at_math_verify_timeouts(text: str) -> None:
    assert not compare(text, "5", preset="math").correct


def test_over_max_chars_is_not_parsed() -> None:
    verdict = compare("1+" * MAX_CHARS + "1", "3", preset="math")
    assert not verdict.correct and "characters" in verdict.reason


CASES = [
    ("2\\sqrt{2}", "\\sqrt{8}", True),
    ("\\frac{\\pi}{2}", "\\pi/2", True),
    ("72", "72", True),
    ("71", "72", False),
]


def test_off_the_main_thread_it_judges_as_in_it() -> None:
    """verl's reward loop, a reward server's threads, asyncio.to_thread: math-verify's alarm works only
    in a main thread, so the judgment runs in a pool process's (it raised a UsageError here)."""
    here = [compare(value, gold, preset="math").correct for value, gold, _ in CASES]
    assert here == [expected for _, _, expected in CASES]
    with ThreadPoolExecutor(4) as pool:
        threaded = list(pool.map(lambda case: compare(case[0], case[1], preset="math").correct, CASES * 3))
    assert threaded == here * 3

    async def awaited() -> list[bool]:
        judged = [asyncio.to_thread(compare, value, gold, preset="math") for value, gold, _ in CASES]
        return [verdict.correct for verdict in await asyncio.gather(*judged)]

    assert asyncio.run(awaited()) == here


@pytest.mark.parametrize("text", ["(10^{7})!", "2^{2^{40}}"])
def test_off_the_main_thread_huge_computations_end_in_a_false_verdict(text: str) -> None:
    verdicts: list[Any] = []
    thread = threading.Thread(target=lambda: verdicts.append(compare(text, "5", preset="math")))
    thread.start()
    thread.join()
    assert len(verdicts) == 1 and not verdicts[0].correct


def test_without_the_extra_it_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "math_verify", None)  # import math_verify now raises ImportError
    with pytest.raises(InputError, match=r"potrun\[math\]"):
        compare("1", "1", preset="math")


def test_check_compare_math(tmp_path: Path) -> None:
    records = [
        {"id": 1, "output": "So the answer is $\\boxed{2\\sqrt{2}}$.", "answer": "\\sqrt{8}"},
        {"id": 2, "output": "def solution():\n    return 0.5", "answer": "\\frac{1}{2}"},
        {"id": 3, "output": "The answer is $\\boxed{x^2+2}$", "answer": "x^2+1"},
    ]
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "potrun", "check", str(preds), "--mode", "auto", "--compare", "math", "--out", "-"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["correct"] for line in done.stdout.splitlines()] == [True, True, False]
