"""Preset "tatqa": TAT-QA exact match, as Program-of-Thoughts' eval_tatqa/tatqa_metric.py scores it.

`_judge_tatqa` names what it reproduces and its leniencies. `extract_one_num` (the metric's
`extract_one_num_from_str`) also serves the `pot` preset's chain-of-thought path.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from potrun.comparators.common import shown
from potrun.comparators.preset import Preset
from potrun.types import Verdict

__all__ = ["PRESET", "extract_one_num"]

_EXCLUDE_IN_NUM = "'\"\\$€£¥%(),[]"
_ONE_NUM = re.compile(r"([+-]?\d+(\.\d+)?)|([+-]?\.\d+)")


def _scale_to_num(scale: str) -> float:
    s = scale.lower()
    for word, num in (
        ("hundred", 100),
        ("thousand", 1000),
        ("million", 1000000),
        ("billion", 1000000000),
        ("percent", 0.01),
    ):
        if word in s:
            return num
    return 1


def _clean_num(text: Any) -> str:
    return "".join(ch for ch in str(text) if ch not in _EXCLUDE_IN_NUM)


def _is_number(text: str) -> bool:
    try:
        words = " ".join(_clean_num(w) for w in text.split()).split()
        if not words:
            return False
        num = float(words[0])
        if math.isnan(num):
            return False
        return not (len(words) >= 2 and _scale_to_num(words[1]) == 1)
    except ValueError:
        return False


# The metric's patterns; a match can only start where a run of digits begins (the lookbehinds), as
# every leftmost match of theirs does: the same matches, without retrying each suffix of a long digit
# run that leads nowhere (quadratic: "1 " * 50000 took minutes).
_NEGATIVE = re.compile(r"(\([\d.\s]+\))")
_PERCENT = re.compile(r"(?<![\d.\s])([\d.\s]+%)")
_WORD_SCALE = re.compile(r"(?<![\d.])([\d.]+\s?[a-zA-Z]+)")
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)


def _to_number(text: str) -> float | None:
    num = extract_one_num(text)
    if num is None:
        return None
    m = _WORD_SCALE.search(text)
    scale = _scale_to_num(m.group(0).lower()) if m else 1
    negative = -1 if _NEGATIVE.findall(text.strip()) else 1
    percent = 0.01 if _PERCENT.findall(text.strip()) else 1
    return round(num * scale * negative * percent, 4)


def _normalize_answer(text: str) -> str:
    parts = []
    for token in text.split(" "):
        t = token.lower()
        if not _is_number(t):
            t = "".join(ch for ch in t if ch not in _PUNCT)
        if _is_number(t):
            t = str(_to_number(t))
        t = " ".join(_ARTICLES.sub(" ", t).split())
        if t.strip():
            parts.append(t)
    return " ".join(parts).strip()


def _answer_str(answers: list[Any], scale: str) -> list[str]:
    out = []
    for ans in sorted(answers):
        text = str(ans)
        if _is_number(text):
            num = _to_number(text)
            if num is None:
                if scale:
                    text = f"{text} {scale}"
            elif "%" in text:
                text = f"{num:.4f}"
            else:
                text = f"{round(num, 2) * _scale_to_num(scale):.4f}"
        elif scale:
            text = f"{text} {scale}"
        out.append(text)
    return [" ".join(out)]


def _add_percent_pred(strings: list[str], pred_scale: str, pred: list[Any]) -> list[str]:
    if len(pred) > 1:
        return strings
    text = str(pred[0])
    if not pred_scale and "%" not in text and _is_number(text):
        num = _to_number(text)
        if num is not None:
            strings.append(f"{num:.4f}")
    return strings


def _judge_tatqa(
    value: Any,
    gold: Any,
    *,
    gold_scale: str | None,
    pred_scale: str,
    answer_type: str | None,
) -> Verdict:
    """TAT-QA exact match: `TaTQAEmAndF1.__call__` in Program-of-Thoughts eval_tatqa/tatqa_metric.py.

    The gold is the dataset's `answer` with `gold_scale` ("", thousand, million, billion, percent)
    and `answer_type` (span, multi-span, arithmetic, count; default: span for a list gold, else
    arithmetic), or a dict {"answer": ..., "scale": ..., "answer_type": ...}; options win over the
    dict. `pred_scale` is the scale the model gave (default ""). Numbers are printed '%.4f' after
    round(x, 2) x scale on each side; a bare prediction also gets its unrounded '%.4f' form
    (`add_percent_pred`), so 0.2212 matches 22.12 percent. EM only (F1 is not a verdict).

    Leniencies and defects (PEERS.md 9, 4.2.3): both sides are rounded to 2 dp before scaling, so
    123.201 equals 123.2; multi-span answers are sorted, so order never matters; "(134.12)" is
    negative but "(1,234)" is +1234 (the regex has no comma); a prediction that is falsy (0, "",
    [], None) scores 0 even when the gold is 0; text is compared after lowercasing and dropping
    punctuation and articles; "1e6" reads as 6 (the number regex has no exponent).
    """
    if isinstance(gold, Mapping):
        if "answer" not in gold:
            return Verdict(False, "tatqa: a dict gold needs 'answer'")
        gold_scale = gold.get("scale", "") if gold_scale is None else gold_scale
        answer_type = gold.get("answer_type") if answer_type is None else answer_type
        gold = gold["answer"]
    gold_scale = gold_scale or ""
    pred_scale = pred_scale or ""
    if answer_type is None:
        answer_type = "span" if isinstance(gold, (list, tuple)) else "arithmetic"
    if not value:
        return Verdict(False, "tatqa: an empty or zero prediction scores 0")
    try:
        if answer_type in ("span", "multi-span"):
            if not isinstance(gold, (list, tuple)):
                return Verdict(False, "tatqa: a span gold must be a list (the peer asserts)")
            gold_answers = list(gold)
        elif answer_type == "count":
            gold_answers = [str(int(gold))]
        else:
            gold_answers = [str(gold)]
        if not gold_answers:
            return Verdict(False, "tatqa: empty gold")
        gold_strings = _answer_str(gold_answers, gold_scale)
        preds = value if isinstance(value, list) else [value]
        pred_strings = _add_percent_pred(_answer_str(preds, pred_scale), pred_scale, preds)
    except Exception as e:
        return Verdict(False, f"tatqa: the metric raises {type(e).__name__} here")
    gold_norm = {_normalize_answer(g) for g in gold_strings}
    for p in pred_strings:
        if _normalize_answer(p) in gold_norm:
            return Verdict(True, f"tatqa: EM on {shown(_normalize_answer(p))}")
    normalized = [_normalize_answer(p) for p in pred_strings]
    return Verdict(False, f"tatqa: {shown(normalized)} vs {shown(sorted(gold_norm))}")


def extract_one_num(s: Any) -> int | float | None:
    """The last number in `s` after dropping quotes, currency, %, parentheses, commas and brackets
    (no exponent: "1e6" reads 6)."""
    groups = _ONE_NUM.findall(_clean_num(s))
    if not groups:
        return None
    num = groups[-1][0]
    if num == "":
        return None
    return float(num) if "." in num else int(num)


PRESET = Preset(
    "tatqa",
    _judge_tatqa,
    MappingProxyType({"gold_scale": None, "pred_scale": "", "answer_type": None}),
    "Program-of-Thoughts eval_tatqa/tatqa_metric.TaTQAEmAndF1 (EM)",
)
