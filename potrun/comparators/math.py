"""Preset "math": symbolic answers compared with huggingface's math-verify (the `math` extra).

`\\sqrt{8}` is `2\\sqrt{2}`, `\\pi/2` is `\\frac{\\pi}{2}`, `(1, 2)` is `(1,2)`, `x^2+1` is `1+x^2`:
math-verify parses both sides (LaTeX through latex2sympy2_extended, plain numbers and arithmetic
through sympy's `parse_expr`) and `verify` decides, numerically and symbolically.

What it costs the parent, read from math-verify 0.9: parsing and comparing run sympy on the text, so
a short text can ask for a huge computation (`(10^{7})!`, `2^{2^{40}}`). math-verify bounds each
step with `signal.alarm` (whole seconds, the main thread only; elsewhere it refuses with a
ValueError); this preset uses its options, PARSE_TIMEOUT_S and VERIFY_TIMEOUT_S. In the main thread
it runs here; from any other thread (verl's reward loop, a reward server's pool, `asyncio.to_thread`)
it runs in the main thread of a small pool of processes of its own (MATH_WORKERS, spawned and warmed
once), where the alarm works, under a deadline of its own (DEADLINE_S: past it the pool is killed and
replaced, and the verdict is False with that reason). The text reaches
`parse_expr`'s `eval` only through math-verify's expression pattern, which admits digits, spaces and
the operators `+ - * / ^ ( ) × ÷`: no name, so no call. Texts over MAX_CHARS are not parsed.
"""

from __future__ import annotations

import atexit
import multiprocessing
import re
import threading
from concurrent.futures import BrokenExecutor, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from types import MappingProxyType
from typing import Any

from potrun.comparators.common import shown
from potrun.comparators.preset import Preset
from potrun.types import InputError, UsageError, Verdict

__all__ = ["DEADLINE_S", "MATH_WORKERS", "MAX_CHARS", "PARSE_TIMEOUT_S", "PRESET", "VERIFY_TIMEOUT_S"]

PARSE_TIMEOUT_S = 2  # math-verify's parsing_timeout, per parse (signal.alarm: whole seconds)
VERIFY_TIMEOUT_S = 2  # its timeout_seconds, per comparison
MAX_CHARS = 2_000  # a longer answer or gold is not parsed (the verdict is False)
_DELIMITED = ("$", "\\(", "\\[", "\\boxed")
_PLAIN_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d*)(?:\.\d+)?%?")


def _as_text(x: Any) -> str | None:
    """The answer as math-verify reads it: text as it is, a number in its decimal form, a list as a tuple."""
    if isinstance(x, bool) or x is None:
        return None
    if isinstance(x, str):
        return x
    if isinstance(x, (int, float)):
        return repr(x)
    if isinstance(x, list):
        items = [_as_text(item) for item in x]
        return None if None in items else "(" + ", ".join(items) + ")"  # type: ignore[arg-type]
    return None


def _parse(text: str, parse: Any) -> Any:
    """math-verify's parse; a bare LaTeX or symbolic text is read as math (`$...$`), as a gold often is
    written: without the delimiters math-verify would take `2` from `2\\sqrt{2}`."""
    if not any(mark in text for mark in _DELIMITED) and not _PLAIN_NUMBER.fullmatch(text.strip()):
        text = f"${text}$"
    return parse(text, parsing_timeout=PARSE_TIMEOUT_S)


def _judge_math(value: Any, gold: Any) -> Verdict:
    """math-verify's `verify(parse(gold), parse(value))` under its own timeouts (module docstring)."""
    try:
        import math_verify  # noqa: F401
    except ImportError:
        raise InputError("preset 'math' needs math-verify: pip install 'potrun[math]'") from None
    value_text, gold_text = _as_text(value), _as_text(gold)
    if value_text is None or gold_text is None:
        return Verdict(False, f"math: {shown(value)} or {shown(gold)} is not math-verify's text or number")
    if len(value_text) > MAX_CHARS or len(gold_text) > MAX_CHARS:
        return Verdict(False, f"math: an answer over {MAX_CHARS} characters is not parsed")
    if threading.current_thread() is threading.main_thread():
        return Verdict(*_verify_texts(value_text, gold_text))
    return _verify_in_pool(value_text, gold_text)


MATH_WORKERS = 2  # processes of the pool that judges off the main thread
DEADLINE_S = 2 * PARSE_TIMEOUT_S + VERIFY_TIMEOUT_S + 4  # a judgment's own deadline in the pool
WARM_DEADLINE_S = 120.0  # a worker's start (spawn, then import sympy and math-verify) on a busy machine
_pool_lock = threading.Lock()
_pool: list[ProcessPoolExecutor] = []  # the pool, once made (a list: replaced whole when killed)


def _verify_in_pool(value_text: str, gold_text: str) -> Verdict:
    """`_verify_texts` in a pool process's main thread, within DEADLINE_S; past it the pool is killed
    (a sympy computation in C does not see the alarm) and the verdict is False."""
    pool = _math_pool()
    future = pool.submit(_verify_texts, value_text, gold_text)
    try:
        correct, reason = future.result(timeout=DEADLINE_S)
    except FutureTimeout:
        _kill_pool(pool)
        return Verdict(False, f"math: no verdict within {DEADLINE_S} s")
    except BrokenExecutor:
        _kill_pool(pool)
        return Verdict(False, "math: the judging process died")
    return Verdict(bool(correct), str(reason))


def _math_pool() -> ProcessPoolExecutor:
    with _pool_lock:
        if not _pool:
            # spawned, not forked: the caller is a threaded process (a trainer, a server)
            pool = ProcessPoolExecutor(MATH_WORKERS, mp_context=multiprocessing.get_context("spawn"))
            for warming in [pool.submit(_warm) for _ in range(MATH_WORKERS)]:
                warming.result(timeout=WARM_DEADLINE_S)
            _pool.append(pool)
            atexit.register(pool.shutdown, wait=False, cancel_futures=True)
        return _pool[0]


def _kill_pool(pool: ProcessPoolExecutor) -> None:
    """Kill the pool's processes and forget it: the next judgment starts a fresh one."""
    with _pool_lock:
        if _pool and _pool[0] is pool:
            _pool.clear()
    processes: dict[int, Any] = getattr(pool, "_processes", None) or {}
    for process in list(processes.values()):
        process.kill()
    pool.shutdown(wait=False, cancel_futures=True)


def _warm() -> bool:
    """A pool process's start: math-verify and sympy imported before any deadline runs."""
    import math_verify  # noqa: F401

    return True


def _verify_texts(value_text: str, gold_text: str) -> tuple[bool, str]:
    """The verdict on two texts, as (correct, reason): plain data, what a pool process sends back.
    Runs in a main thread (math-verify's alarm)."""
    from math_verify import parse, verify

    if threading.current_thread() is not threading.main_thread():  # a silent False would be a wrong verdict
        raise UsageError("math-verify runs only in a main thread: it bounds its work with signal.alarm")
    parsed_gold, parsed_value = _parse(gold_text, parse), _parse(value_text, parse)
    if not parsed_gold or not parsed_value:
        side = "gold" if not parsed_gold else "answer"
        return False, f"math: math-verify finds no {side} in {shown(gold_text if side == 'gold' else value_text)}"
    ok = bool(verify(parsed_gold, parsed_value, timeout_seconds=VERIFY_TIMEOUT_S))
    return ok, f"math: {shown(parsed_value[-1])} {'equals' if ok else 'is not'} {shown(parsed_gold[-1])}"


PRESET = Preset(
    "math",
    _judge_math,
    MappingProxyType({}),
    "huggingface math-verify parse + verify (symbolic equivalence)",
)
