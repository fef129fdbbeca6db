"""Preset "longdocurl": LongDocURL `utils/utils_score_v3.eval_score` with its Integer/Float/String/List/None
formats, after the `eval()` its pipeline applies to the extracted answer (`safe_eval` stands in).

`longdocurl_score` gives the peer's score in [0, 1], `record_score` the score `calculate_metrics.py`
gives a record ("Fail to extract" scores 0), `eval_concise_answer` the pipeline's `eval()` of the
extracted answer; `_judge_longdocurl` the verdict, and names the leniencies. Text is scored by ANLS on
the Levenshtein distance (`_levenshtein`, used by nothing else).
"""

from __future__ import annotations

import math
import re
from functools import partial
from types import MappingProxyType
from typing import Any

from potrun.budget import charge
from potrun.comparators.common import is_number
from potrun.comparators.golds import gsm8k_number, plain_number
from potrun.comparators.preset import Preset
from potrun.comparators.safe_eval import EvalFailed, safe_eval
from potrun.types import Verdict

__all__ = ["FAIL_TO_EXTRACT", "PRESET", "eval_concise_answer", "longdocurl_score", "record_score"]

# The pred eval_per_record writes when GPT-4o's reply lacks the <concise_answer> tags: it scores 0.
FAIL_TO_EXTRACT = "Fail to extract"

_SUFFIXES = (
    "kg",
    "mm",
    "m",
    "meters",
    "acres",
    "minutes",
    "mile",
    "miles",
    "million",
    "thousand",
    "billion",
)
_UNIT_WORD = re.compile(r"(?:(?<=\d)|\s)(?:" + "|".join(_SUFFIXES) + r")$")
_QUOTES = re.compile(r"^['\"]|['\"]$")
_INT_COMMAS = re.compile(r"(?<!\d)\d+,\s*\d", re.DOTALL)  # the peer's r"\d+,\s*\d+": same matches, linear
_EXACT = (
    re.compile(r"\b\d+(-\d+|\s\d+)?\b"),
    re.compile(r"\b\d{4}[-\s]\d{2}[-\s]\d{2}\b"),
    re.compile(r"\b\d{4}[-\s]\d{2}\b"),
    re.compile(r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}"),
)


def _clean(x: Any, strict: bool = False) -> str:
    """get_clean_string: lower, drop commas, character-set rstrip of unit words, drop (...), $ £ %.

    `strict` drops the parentheses first and a unit word only as a word of its own: the peer's
    character-set rstrip turns the gold "Belgium" into "belgiu" while "Belgium (page 2)" keeps its m."""
    s = str(x).lower().strip().replace(",", "")
    if strict:
        s = _UNIT_WORD.sub("", _drop_parens(s).strip()).strip()
    else:
        for suffix in _SUFFIXES:
            if s.endswith(suffix):
                s = s.rstrip(suffix).strip()  # a character-set strip, as in the peer
    s = _drop_parens(s).strip()
    s = _QUOTES.sub("", s).strip()
    s = s.strip().lstrip("$").strip()
    s = s.strip().lstrip("£").strip()
    return s.strip().rstrip("%").strip()


def _drop_parens(s: str) -> str:
    r"""The peer's `re.sub(r"\s*\([^)]*\)", "", s)` in linear time: the regex retries every start in a
    long run of spaces or after each "(" with no ")" to come (quadratic: minutes on 50,000 spaces)."""
    kept, pos = [], 0
    while (opening := s.find("(", pos)) >= 0 and (closing := s.find(")", opening)) >= 0:
        kept.append(s[pos:opening].rstrip())  # the \s* before it (str.isspace is the pattern's \s)
        pos = closing + 1
    kept.append(s[pos:])
    return "".join(kept)


def _is_exact_match(s: str) -> bool:
    return (
        "https://" in s
        or s.endswith((".py", "ipynb"))
        or s.startswith("page")
        or "a.m." in s
        or "p.m." in s
        or any(p.fullmatch(s) for p in _EXACT)
    )


def _levenshtein(a: str, b: str) -> int:
    if len(a) > len(b):
        a, b = b, a
    charge((len(a) + 1) * len(b))  # the table's cells: `_anls` skips it where the score is 0 anyway
    prev = list(range(len(a) + 1))
    for j, cb in enumerate(b):
        cur = [j + 1]
        for i, ca in enumerate(a):
            cur.append(prev[i] if ca == cb else 1 + min(prev[i], prev[i + 1], cur[-1]))
        prev = cur
    return prev[-1]


def _anls(gt: str, pred: str, threshold: float = 0.5) -> float:
    length = max(len(gt.upper()), len(pred.upper()))
    # The distance is at least the difference in length: where that alone puts the score at or under
    # the threshold (0), the quadratic table is not computed (a 10^5-character answer against a gold).
    if length and 1.0 - abs(len(gt) - len(pred)) / length <= threshold:
        return 0.0
    score = 1.0 - (0.0 if length == 0 else _levenshtein(gt, pred) / length)
    return 0.0 if score <= threshold else score


def _precision(x: Any) -> int:
    text = str(x)
    return len(text.split(".")[-1]) if "." in text else 3


def _is_float_equal(reference: Any, prediction: Any) -> bool:
    """is_float_equal(include_percentage=True, is_close=True); raises where the peer raises."""
    ref = float(str(reference).strip().rstrip("%").strip())
    try:
        pred = float(str(prediction).strip().rstrip("%").strip())
    except Exception:
        return False
    for item in (ref / 100, ref, ref * 100):
        try:
            if math.isclose(item, pred, rel_tol=0.01):
                return True
            precision = max(min(_precision(pred), _precision(item)), 2)
            if round(pred, precision) == round(item, precision):
                return True
        except Exception:
            continue
    return False


def _join_int_commas(s: str) -> str:
    return "".join(part.strip() for part in s.split(",")) if _INT_COMMAS.search(s) else s


def _eval_if_list(x: Any) -> Any:
    if isinstance(x, str) and x.startswith("["):
        try:
            return safe_eval(x)
        except EvalFailed:
            return x
    return x


def longdocurl_score(value: Any, gold: Any, answer_format: str, *, strict: bool = False) -> float:
    """LongDocURL `eval_score(gt, pred, answer_type)` (utils/utils_score_v3.py): a score in [0, 1].
    `strict` strips unit words as words (`_clean`), not as the peer's character sets."""
    gt, pred = gold, value
    clean = partial(_clean, strict=strict)
    if answer_format == "Integer":
        try:
            gt = _join_int_commas(clean(str(gt)))
            gt = int(gt)
        except Exception:
            pass
        try:
            pred = int(_join_int_commas(clean(str(pred))))
        except Exception:
            pred = ""
        return float(gt == pred)
    if answer_format == "Float":
        gt = _join_int_commas(clean(str(gt)))
        pred = _join_int_commas(clean(str(pred)))
        try:
            gt = float(gt)
        except Exception:
            pass
        try:
            pred = float(pred)
        except Exception:
            pred = str(pred)
        try:
            return float(_is_float_equal(gt, pred))
        except Exception:
            return 0.0
    if answer_format in ("String", "None"):
        gt, pred = clean(gt), clean(pred)
        return float(gt == pred) if _is_exact_match(gt) else _anls(gt, pred)
    # List (and any other format name, as in the peer's else branch)
    gt, pred = _eval_if_list(gt), _eval_if_list(pred)
    gts = gt if isinstance(gt, list) else [gt]
    preds = pred if isinstance(pred, list) else [pred]
    if not gts:
        return 0.0  # the peer raises IndexError on an empty gold list
    if not preds:
        preds = [""]
    if isinstance(gts[0], dict):
        gts = ["-".join(str(v) for v in d.values()) for d in gts]
    if isinstance(preds[0], dict):
        preds = ["-".join(str(v) for v in d.values()) for d in preds]
    gts = [clean(a) for a in gts]
    preds = [clean(a) for a in preds]
    if _isfloat(gts[0]) or _is_exact_match(gts[0]):
        return float("-".join(gts) == "-".join(preds))
    greedy = [max(_anls(g, p) for p in preds) for g in gts]
    too_many: float = min(1, len(gts) / len(preds)) ** 0.5  # a penalty for predicting extra items
    return sum(greedy) / len(gts) * too_many


def record_score(pred: Any, answer: Any, answer_format: str, *, strict: bool = False) -> float:
    """The score `utils/calculate_metrics.py` gives one record: 0 for "Fail to extract", else eval_score."""
    return 0.0 if pred == FAIL_TO_EXTRACT else longdocurl_score(pred, answer, answer_format, strict=strict)


def eval_concise_answer(text: str) -> Any:
    """eval_per_record's `pred`: `eval(concise_answer)`, a set made a list, the text itself where eval raises."""
    try:
        evaluated = safe_eval(text)
    except EvalFailed:
        return text
    return list(evaluated) if isinstance(evaluated, set) else evaluated


def _isfloat(x: str) -> bool:
    try:
        float(x)
        return True
    except Exception:
        return False


def _infer_format(gold: Any) -> str:
    """The format LongDocURL's data would give this gold. A string that spells a plain number ("72",
    "3.5") is an Integer or Float there (its data stores such answers as numbers, and eval_score reads
    an Integer or Float gold with int() and float()): a String gold "72" would score 72.0 by ANLS of
    its text, "72.0", and fail."""
    if gold is None:
        return "None"
    if isinstance(gold, str):
        number = plain_number(gold)
        if number is not None:
            gold = number
    if is_number(gold):
        return "Integer" if isinstance(gold, int) else "Float"
    if isinstance(gold, (list, tuple)):
        return "List"
    return "String"


def _judge_longdocurl(
    value: Any,
    gold: Any,
    *,
    answer_format: str | None,
    eval_pred: bool,
    min_score: float,
) -> Verdict:
    """LongDocURL `eval_score(gt, pred, answer_type)` from utils/utils_score_v3.py (score_v3).

    `answer_format`: Integer, Float, String, List or None (the dataset's field; inferred from the
    gold when omitted: None -> "None", int -> Integer, float -> Float, list -> List, else String).
    A gold None means "Not answerable". With `eval_pred` (default, as the pipeline does) a string
    prediction is first eval()'d, a set becoming a list; "Fail to extract" scores 0. LongDocURL
    averages a score in [0, 1] (ANLS for text); the verdict is correct iff score >= min_score
    (default 1.0: exact after cleaning). `longdocurl_score()` gives the score itself.

    Leniencies and defects (PEERS.md 6, 7, 9 4.1.9, 4.2.6): Float uses rel_tol=0.01 and also
    accepts gold/100 and gold*100, and rounds both sides to max(min(decimals), 2); units are
    removed with a character-set rstrip ("5 million" equals "5"); commas are dropped, so "2,50"
    is 250; parenthesised text is deleted, so "(1,234)" is empty; eval() turns "1,234" into the
    tuple (1, 234), which then scores 0; numeric lists are compared in order by "-".join.
    """
    if eval_pred and value == FAIL_TO_EXTRACT:
        return Verdict(False, "longdocurl: extraction failed")
    fmt = answer_format or _infer_format(gold)
    if gold is None:
        gold = "Not answerable"
    if eval_pred and isinstance(value, str):
        value = eval_concise_answer(value)
    score = longdocurl_score(value, gold, fmt)
    ok = score >= min_score
    return Verdict(ok, f"longdocurl {fmt}: score {score:.4g}{'' if ok else f' < {min_score:g}'}")


PRESET = Preset(
    "longdocurl",
    _judge_longdocurl,
    MappingProxyType({"answer_format": None, "eval_pred": True, "min_score": 1.0}),
    "LongDocURL utils/utils_score_v3.eval_score",
    gsm8k_answer=gsm8k_number,
)
