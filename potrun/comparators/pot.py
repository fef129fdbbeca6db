"""Preset "pot": Program-of-Thoughts `tool.finqa_equal` after `tool.floatify_ans`.

The GSM8K/SVAMP/FinQA program runs; `cot=True` takes `run_finqa_cot.py`'s text path instead.
`_judge_pot` names what it reproduces and its leniencies.
"""

from __future__ import annotations

import math
from types import MappingProxyType
from typing import Any

from potrun.comparators.common import shown
from potrun.comparators.golds import gsm8k_float, plain_number
from potrun.comparators.preset import Preset
from potrun.comparators.tatqa import extract_one_num
from potrun.types import Value, Verdict

__all__ = ["PRESET"]


def _floatify(ans: Any) -> Any:
    """tool.floatify_ans: None->None, dict->first value, bool->itself, list->float(first) or str(first)."""
    if ans is None:
        return None
    if isinstance(ans, dict):
        return next(iter(ans.values())) if ans else None  # the peer raises on {}; nothing to score
    if type(ans) is bool:
        return ans
    if isinstance(ans, (list, tuple)):
        if not ans:
            return None
        try:
            return float(ans[0])
        except Exception:
            return str(ans[0])
    try:
        return float(ans)
    except Exception:
        return str(ans)


def _precision(x: Any) -> int:
    text = str(x)
    return len(text.split(".")[-1]) if "." in text else 5


def _finqa_equal(prediction: Any, reference: Any, include_percentage: bool, is_close: bool) -> Verdict:
    if prediction is None:
        return Verdict(False, "no prediction")
    if type(prediction) is bool:
        want = "yes" if prediction else "no"
        ok = reference == want
        return Verdict(ok, f"bool prediction vs {want!r}: {'equal' if ok else 'differs'}")
    if type(reference) is str or type(prediction) is str:
        ok = prediction == reference
        return Verdict(ok, "string equal" if ok else f"string {shown(prediction)} != {shown(reference)}")
    try:
        golds = [reference / 100, reference, reference * 100] if include_percentage else [reference]
    except Exception as e:
        return Verdict(False, f"finqa_equal raises {type(e).__name__} on this gold")
    for item in golds:
        try:
            if is_close and math.isclose(item, prediction, rel_tol=0.001):
                return Verdict(True, "isclose rel_tol=0.001")
            precision = min(_precision(prediction), _precision(item))
            if round(prediction, precision) == round(item, precision):
                return Verdict(True, f"equal rounded to {precision} dp")
        except Exception:
            continue
    return Verdict(False, f"{shown(prediction)} != {shown(reference)} at the shorter precision")


def _cot_prediction(text: str) -> Any:
    """run_finqa_cot.py: the text after the last 'answer is', its last number, else yes/no."""
    r = text.split("answer is")[-1].strip()
    ans: Any = extract_one_num(r)
    if not ans:
        low = r.lower()
        if "yes" in low or "true" in low:
            ans = "yes"
        elif "no" in low or "false" in low:
            ans = "no"
    if ans is None or isinstance(ans, str):
        return ans
    try:
        return float(ans)
    except Exception:
        return None


def _read_pot(text: str, *, cot: bool, **_options: Any) -> Value:
    """What `_judge_pot` compares for an answer text (before abs_value)."""
    read = _cot_prediction(text) if cot else _floatify(text)
    return read if read is None or isinstance(read, (bool, int, float, str)) else text


def _judge_pot(
    value: Any,
    gold: Any,
    *,
    include_percentage: bool | None,
    is_close: bool | None,
    abs_value: bool,
    cot: bool,
) -> Verdict:
    """Program-of-Thoughts `tool.finqa_equal(prediction, reference, include_percentage, is_close)`.

    Program runs (default): the value goes through `tool.floatify_ans` first, and the program runs
    call finqa_equal with include_percentage=False, is_close=False (run_gsm8k.py, run_svamp.py).
    `abs_value=True` applies abs() after floatify_ans, as run_svamp.py does. `cot=True` takes
    run_finqa_cot.py's text path instead: the text after the last "answer is", its last number
    (`extract_one_num_from_str`, which drops $ % , ( ) and reads no exponent), else yes/no; CoT runs
    use include_percentage=True, is_close=True, which are then the defaults.

    Leniencies (PEERS.md 9, 4.1.8): both sides are rounded to the *shorter* of the two precisions
    printed by str() (5 when there is no '.'), so 0.12345678 equals gold 0.12; with
    include_percentage a prediction also matches gold/100 and gold*100; strings must be identical;
    a bool prediction matches only the gold strings 'yes'/'no'. A gold string that spells a plain
    number is the float PoT's data stores for it (`_reference`).
    """
    if cot and isinstance(value, str):
        prediction = _cot_prediction(value)
        incl = True if include_percentage is None else include_percentage
        close = True if is_close is None else is_close
    else:
        prediction = _floatify(value)
        incl = False if include_percentage is None else include_percentage
        close = False if is_close is None else is_close
    if abs_value and prediction is not None:
        if isinstance(prediction, str):
            return Verdict(False, "abs() of a string: the SVAMP runner raises here")
        prediction = abs(prediction)
    return _finqa_equal(prediction, _reference(gold, prediction), bool(incl), bool(close))


def _reference(gold: Any, prediction: Any) -> Any:
    """The gold as PoT's own data holds it: a number is a float there (its GSM8K file stores "answer":
    18.0, its FinQA golds are floats or "yes"/"no"), so a gold string that spells a plain number ("72":
    verl's ground_truth, HF datasets' columns, lm-eval's target; `golds.plain_number`) is that float.
    finqa_equal would compare "72" as a string with the float a program's answer becomes and fail
    every one. A prediction that is itself a string (or a bool) still meets the gold as written, as
    finqa_equal compares them."""
    if type(gold) is not str or isinstance(prediction, (str, bool)):
        return gold
    number = plain_number(gold)
    return gold if number is None else float(number)


PRESET = Preset(
    "pot",
    _judge_pot,
    MappingProxyType({"include_percentage": None, "is_close": None, "abs_value": False, "cot": False}),
    "Program-of-Thoughts tool.finqa_equal after tool.floatify_ans",
    gsm8k_answer=gsm8k_float,
    read=_read_pot,
)
