"""Preset "docmath": DocMath-Eval `utils/evaluation_utils.get_acc` (`normalize` + `compare_two_numbers`).

`_judge_docmath` names what it reproduces and its leniencies; the peer's eval() is `safe_eval`.
"""

from __future__ import annotations

import math
import re
from types import MappingProxyType
from typing import Any

from potrun.comparators.common import shown
from potrun.comparators.preset import Preset
from potrun.comparators.safe_eval import EvalFailed, EvalGaveObject, safe_eval
from potrun.types import Verdict

__all__ = ["GOLD_TYPES", "PRESET"]

# The type names of a gold that get_acc reads (`assert answer_type in [...]`): any other type (numpy.int64,
# float32, Decimal, str) fails the assertion, and get_acc scores 0 for every prediction against that gold.
GOLD_TYPES = ("int", "float", "float64", "bool")

_DROP = ("£", "€", "¥", "million", "billion", "thousand", "US", "USD", "RMB")
# The peer's number r"[\d,]*\.*\d+", written so that it matches the same texts without trying every
# split of a digit run between its two parts (quadratic: a 10^5-digit answer took minutes).
_PEER_NUMBER = r"(?:[\d,]*\.+\d+|[\d,]*\d)"
_UNIT_AFTER = re.compile(rf"([-+]?{_PEER_NUMBER}) [^0-9 ]+$")
_UNIT_BEFORE = re.compile(rf"[^0-9 ]+ ([-+]?{_PEER_NUMBER})$")
_SHORT_AFTER = re.compile(rf"([-+]?{_PEER_NUMBER})[^\d]{{1,2}}$")
_SHORT_BEFORE = re.compile(rf"[^-+\d]{{1,2}}({_PEER_NUMBER})$")
_IS_NUMBER = re.compile(r"^[-+]?(\d{1,3}(,\d{3})*|(\d+))(\.\d+)?$")
_POW10 = re.compile(r"10\^(-?\d+)")
_OPTION = re.compile(r"\([a-d]\)")
_OBJECT = object()  # what the peer's eval gives for a builtin's name: no number, compare_two_numbers raises


def _normalize(prediction: str) -> Any:
    """DocMath `normalize()`: strip units, money words, %, $; map yes/no; then eval (0 if it fails)."""
    p = prediction.strip().rstrip(".")
    for money in _DROP:
        p = p.replace(money, "")
    if "=" in p:
        p = p.split("=")[-1].strip()
    if "≈" in p:
        p = p.split("≈")[-1].strip()
    for ch in ("`", "%", "$", "°"):
        p = p.replace(ch, "")
    if p in ("true", "yes", "false", "no"):
        p = "True" if p in ("true", "yes") else "False"
    if "True" in p or "False" in p:
        p = "True" if "True" in p else "False"
    if "approximately" in p:
        p = p.replace("approximately", "").strip()
    if " or " in p:
        p = p.split(" or ")[0]
    for pattern in (_UNIT_AFTER, _UNIT_BEFORE, _SHORT_AFTER, _SHORT_BEFORE):
        if pattern.match(p):
            p = pattern.search(p).group(1)  # type: ignore[union-attr]
    if "10^" in p:
        p = _POW10.sub(r"math.pow(10, \1)", p)
    p = p.replace(" x ", "*").replace(" × ", "*")
    if _IS_NUMBER.match(p):
        p = p.replace(",", "")
    if any(opt in p for opt in ("(a)", "(b)", "(c)", "(d)")):
        p = '"' + _OPTION.search(p).group(0) + '"'  # type: ignore[union-attr]
    if not p:
        p = "0"
    try:
        result = safe_eval(p)
    except EvalGaveObject:  # eval gave a builtin, a module...: compare_two_numbers raises, get_acc scores 0
        result = _OBJECT
    except EvalFailed:  # eval raised: `normalize` reads 0
        result = 0
    if isinstance(result, (set, tuple)):
        result = list(result)
        if isinstance(result[0], complex):  # IndexError on an empty tuple: get_acc scores 0
            result = [x.real for x in result]
    elif isinstance(result, complex):
        result = result.real
    return result


def _round_up(x: float, decimals: int) -> float:
    factor: int = 10**decimals
    return math.ceil(x * factor) / factor


def _within_eps(pred: float, gt: float) -> bool:
    eps = abs(gt) * 0.0015
    return gt - eps <= pred <= gt + eps


def _compare_two_numbers(p: Any, gt: Any) -> bool:
    """DocMath `compare_two_numbers`; raises where the peer raises (get_acc then scores 0)."""
    if isinstance(p, (int, float)):  # bool too: it is an int
        pass
    elif isinstance(p, (list, bool, str, tuple, complex, dict)):
        return False
    else:
        raise ValueError(p)
    v1, v2 = max(abs(gt), abs(p)), min(abs(gt), abs(p))
    if v1 != 0 and v2 != 0 and int(math.log10(v1 / v2)) == math.log10(v1 / v2):
        return True
    if v2 <= v1 / 50 and _within_eps(v2 * 100, v1):
        return True
    if v2 <= v1 / 500 and _within_eps(v2 * 1000, v1):
        return True
    if v2 <= v1 / 50000 and _within_eps(v2 * 100000, v1):
        return True
    if _round_up(v1, 3) == _round_up(v2, 3):
        return True
    return _within_eps(p, gt)


def _judge_docmath(value: Any, gold: Any, *, cot: bool | None) -> Verdict:
    """DocMath-Eval `get_acc(prediction, gt, cot)` with `compare_two_numbers` (utils/evaluation_utils.py).

    cot=None picks the peer's path from the value: a string is an extracted CoT answer
    (`normalize()`, and evaluation.py scores 0 when it contains "none"); anything else is an executed
    `solution()` result, converted with float(). A string gold is converted with float(), as the
    CoT evaluator does, and on that path a bool gold too (True is 1.0 there: "1000" matches it, by
    the power-of-ten ratio); a gold must be int, float or bool (the peer asserts).

    Leniencies (PEERS.md 9, 4.1.1-2): absolute values are compared, so the sign never matters; any
    exact power-of-ten ratio matches (5 vs 50, 3.5 vs 3500000); x100, x1000, x100000 within 0.15%;
    both sides rounded *up* to 3 dp (1.2341 vs 1.234); 0.15% relative eps; a prediction that does
    not evaluate becomes 0 (so "abc" matches gold 0), one that evaluates to an object (a builtin's
    name: "abs", "dict()", "__import__('os')") matches nothing; any text containing "True"/"False" is a bool;
    million/billion/thousand are deleted, not multiplied; True counts as 1. NaN matches any nonzero
    gold (max/min with NaN keep the gold). eval() is emulated for literals and arithmetic only.
    """
    use_cot = isinstance(value, str) if cot is None else cot
    if isinstance(gold, str) or (use_cot and isinstance(gold, bool)):  # evaluate_cot_pred_file: float(gt)
        try:
            gold = float(gold)
        except ValueError:
            return Verdict(False, "docmath: gold is not a number")
    if not (isinstance(gold, (int, float))):
        return Verdict(False, f"docmath: gold of type {type(gold).__name__} (the peer asserts int/float/bool)")
    if use_cot and isinstance(value, str) and "none" in value.lower():
        return Verdict(False, "docmath: the extracted answer says none")
    try:
        if use_cot:
            if not isinstance(value, str):
                return Verdict(False, "docmath: normalize() needs a string")
            prediction = _normalize(value)
        else:
            prediction = float(value)
        if isinstance(gold, bool):
            ok = prediction == gold
        elif isinstance(prediction, (str, int, float, bool, list)):
            ok = _compare_two_numbers(prediction, gold)
        else:
            ok = False
    except Exception as e:
        return Verdict(False, f"docmath: get_acc catches {type(e).__name__} and scores 0")
    return Verdict(bool(ok), f"docmath: {shown(prediction)} {'matches' if ok else 'does not match'} {shown(gold)}")


PRESET = Preset(
    "docmath",
    _judge_docmath,
    MappingProxyType({"cot": None}),
    "DocMath-Eval utils/evaluation_utils.get_acc + compare_two_numbers",
    mode_option="cot",  # a program's "29.31%" goes through float() (and fails), as evaluation.py does
)
