"""Preset "mathqa-rel": Qwen2.5-Math `evaluation/grader.math_equal` without sympy.

String, choice, numeric (`numeric_equal`, rel_tol 1e-4, ×100 and ÷100), bracket, list, matrix and
equation rules; `latex_number` stands in for `symbolic_equal`. `_judge_mathqa_rel` names what it
reproduces and its leniencies.
"""

from __future__ import annotations

import math
import re
from types import MappingProxyType
from typing import Any

from potrun.comparators.common import shown
from potrun.comparators.latex import latex_number
from potrun.comparators.preset import Preset
from potrun.types import Verdict

__all__ = ["PRESET"]


def _parse_digits(num: Any) -> float | None:
    text = str(num).replace(",", "")
    try:
        return float(text)
    except ValueError:
        if text.endswith("%"):
            text = text[:-1]
            if text.endswith("\\"):
                text = text[:-1]
            try:
                return float(text) / 100
            except ValueError:
                pass
    return None


def _choice_clean(pred: str) -> str:
    pred = pred.strip("\n").rstrip(".").rstrip("/").strip(" ").lstrip(":")
    letters = re.findall(r"\b(A|B|C|D|E)\b", pred.upper())
    last = letters[-1] if letters else pred.strip().strip(".")
    return last.rstrip(".").rstrip("/")


def _numeric_equal(prediction: float, reference: float) -> bool:
    # Qwen's own tolerance, not potrun's default (DefaultOptions.rel_tol): they are equal by chance.
    return math.isclose(reference, prediction, rel_tol=1e-4)


def _numerical_equal(prediction: str, reference: str, include_percentage: bool, is_close: bool) -> bool:
    pred, ref = _parse_digits(prediction), _parse_digits(reference)
    if pred is None or ref is None:
        return False
    for item in [ref / 100, ref, ref * 100] if include_percentage else [ref]:
        if _numeric_equal(pred, item) if is_close else item == pred:
            return True
    return False


_LIST = re.compile(r"(\(|\[).+(\)|\])")
_PMATRIX_START = "\\begin{pmatrix}"
_PMATRIX_END = "\\end{pmatrix}"


def _is_matrix(s: str) -> bool:
    starts = s.startswith(("\\begin{pmatrix}", "\\begin{bmatrix}"))
    return starts and s.endswith(("\\end{pmatrix}", "\\end{bmatrix}"))


def _str_to_pmatrix(s: str) -> str:
    rows = re.findall(r"\{.*,.*\}", s.strip())
    return ", ".join(_PMATRIX_START + m.strip("{}").replace(",", "\\") + _PMATRIX_END for m in rows)


def _math_equal(prediction: str, reference: str, incl: bool, close: bool, depth: int = 0) -> bool:
    """Qwen2.5-Math `math_equal`, with `latex_number` standing in for sympy's symbolic_equal."""
    if depth > 20:
        return False
    if prediction.strip().lower() == reference.strip().lower():
        return True
    if reference in ("A", "B", "C", "D", "E") and _choice_clean(prediction) == reference:
        return True
    if _numerical_equal(prediction, reference, incl, close):
        return True
    if not prediction:
        return False
    reference, prediction = reference.strip(), prediction.strip()
    if "pmatrix" in prediction and "pmatrix" not in reference:
        reference = _str_to_pmatrix(reference)
    pred_str, ref_str = prediction, reference

    def wrapped(x: str, left: str, right: str) -> bool:
        return x.startswith(left) and x.endswith(right)

    if (wrapped(pred_str, "[", "]") and not wrapped(ref_str, "(", ")")) or (
        wrapped(pred_str, "(", ")") and not wrapped(ref_str, "[", "]")
    ):
        pred_str, ref_str = pred_str.strip("[]()"), ref_str.strip("[]()")
    for bracket in "{}()":
        pred_str, ref_str = pred_str.replace(bracket, ""), ref_str.replace(bracket, "")
    if pred_str.lower() == ref_str.lower():
        return True
    if _LIST.match(prediction) and _LIST.match(reference):
        pred_parts, ref_parts = prediction[1:-1].split(","), reference[1:-1].split(",")
        return len(pred_parts) == len(ref_parts) and all(
            _math_equal(p, r, incl, close, depth + 1) for p, r in zip(pred_parts, ref_parts, strict=True)
        )
    if _is_matrix(prediction) and _is_matrix(reference):
        return _matrices_equal(prediction, reference, incl, close, depth)
    if prediction.count("=") == 1 and reference.count("=") == 1:
        p_left, p_right = prediction.split("=")
        r_left, r_right = reference.split("=")
        pe, re_ = f"{p_left.strip()} - ({p_right.strip()})", f"{r_left.strip()} - ({r_right.strip()})"
        return _symbolic_equal(pe, re_) or _symbolic_equal(f"-({pe})", re_)
    if prediction.count("=") == 1 and len(prediction.split("=")[0].strip()) <= 2 and "=" not in reference:
        return _math_equal(prediction.split("=")[1], reference, incl, close, depth + 1)
    if reference.count("=") == 1 and len(reference.split("=")[0].strip()) <= 2 and "=" not in prediction:
        return _math_equal(prediction, reference.split("=")[1], incl, close, depth + 1)
    return _symbolic_equal(prediction, reference)


def _matrices_equal(prediction: str, reference: str, incl: bool, close: bool, depth: int) -> bool:
    def rows(s: str) -> list[str]:
        inner = s[len(_PMATRIX_START) : -len(_PMATRIX_END)]
        return [line.strip() for line in inner.split("\\\\") if line.strip()]

    pred_rows, ref_rows = rows(prediction), rows(reference)
    if len(pred_rows) != len(ref_rows):
        return False
    for p_row, r_row in zip(pred_rows, ref_rows, strict=True):
        p_cells, r_cells = p_row.split("&"), r_row.split("&")
        if len(p_cells) != len(r_cells):
            return False
        if not all(_math_equal(p, r, incl, close, depth + 1) for p, r in zip(p_cells, r_cells, strict=True)):
            return False
    return True


def _symbolic_equal(a: str, b: str) -> bool:
    x, y = latex_number(a), latex_number(b)
    return x is not None and y is not None and _numeric_equal(x, y)


def _text(x: Any) -> str:
    return x if isinstance(x, str) else str(x)


def _judge_mathqa_rel(value: Any, gold: Any, *, include_percentage: bool, is_close: bool) -> Verdict:
    """Qwen2.5-Math `evaluation/grader.math_equal(prediction, reference, include_percentage, is_close)`.

    Reproduced: case-insensitive string equality; choice letters A-E via `choice_answer_clean`;
    `is_numerical_equal` with `parse_digits` (commas dropped, a trailing % or \\% is /100) and
    `numeric_equal` = math.isclose(rel_tol=1e-4, abs_tol=0); include_percentage (default True)
    also tries gold/100 and gold*100; bracket stripping; element-wise lists and pmatrices;
    `x = 5` against 5. Not reproduced: sympy's `symbolic_equal`; a numeric evaluator stands in for
    it (\\frac, \\sqrt, ^, \\times, \\cdot, \\pi and arithmetic), so expressions with variables fail.
    Non-string values are compared as str(value), as the pipeline compares printed output.

    Leniencies (PEERS.md 6, 7, 9 4.1.5): ×100 and ÷100 ("2,50" reads 250, which is 2.5×100); no
    absolute tolerance (1e-9 vs 0 is wrong); bracket types are ignored ("[0,1]" equals "(0,1)").
    The strip_string/extraction steps of Qwen's pipeline (w2n, unit removal) are not part of it.
    """
    if value is None or gold is None:
        return Verdict(False, "mathqa-rel: None never matches")
    ok = _math_equal(_text(value), _text(gold), bool(include_percentage), bool(is_close))
    return Verdict(ok, f"mathqa-rel: {shown(value)} {'equals' if ok else 'differs from'} {shown(gold)}")


PRESET = Preset(
    "mathqa-rel",
    _judge_mathqa_rel,
    MappingProxyType({"include_percentage": True, "is_close": True}),
    "Qwen2.5-Math evaluation/grader.math_equal (numeric rules; no sympy)",
)
