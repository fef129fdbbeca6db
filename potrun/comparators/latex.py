"""The value of a purely numeric LaTeX (or plain) expression: "\\frac{3}{4}", "2\\sqrt{2}", "3^{2} \\cdot \\pi".

The `mathqa-rel` preset's stand-in for sympy's `symbolic_equal`: \\frac (and \\dfrac, \\tfrac,
\\cfrac), \\sqrt, ^, \\times, \\cdot, \\div, \\pi, braces and arithmetic become a Python expression
that `safe_eval` computes without calls; anything with a variable or another command is None.
"""

from __future__ import annotations

import math

from potrun.comparators.safe_eval import EvalFailed, safe_eval

__all__ = ["latex_number"]

_PLAIN = (
    ("\\left", ""),
    ("\\right", ""),
    ("\\!", ""),
    ("\\,", ""),
    ("\\;", ""),
    ("\\dfrac", "\\frac"),
    ("\\tfrac", "\\frac"),
    ("\\cfrac", "\\frac"),
    ("\\times", "*"),
    ("\\cdot", "*"),
    ("\\div", "/"),
    ("\\pi", "(3.141592653589793)"),
    ("$", ""),
)


def _group(s: str, i: int) -> tuple[str, int] | None:
    """The `{...}` group (or single character) at s[i]: (content, index after it)."""
    while i < len(s) and s[i] == " ":
        i += 1
    if i >= len(s):
        return None
    if s[i] != "{":
        return s[i], i + 1
    depth = 0
    for j in range(i, len(s)):
        depth += {"{": 1, "}": -1}.get(s[j], 0)
        if depth == 0:
            return s[i + 1 : j], j + 1
    return None


# The commands that take arguments: (name, how many `{...}` arguments, the Python they become).
_COMMANDS = (("\\frac", 2, "(({})/({}))"), ("\\sqrt", 1, "(({})**0.5)"), ("^", 1, "**({})"))


def _to_python(s: str, depth: int = 0) -> str | None:
    if depth > 20:
        return None
    out, i = [], 0
    while i < len(s):
        command = next((c for c in _COMMANDS if s.startswith(c[0], i)), None)
        if command is not None:
            name, arity, template = command
            i += len(name)
            args = []
            for _ in range(arity):
                arg = _converted_group(s, i, depth)
                if arg is None:
                    return None
                args.append(arg[0])
                i = arg[1]
            out.append(template.format(*args))
        elif s[i] in "{}":
            out.append("(" if s[i] == "{" else ")")
            i += 1
        elif s[i] == "\\":
            return None
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def _converted_group(s: str, i: int, depth: int) -> tuple[str, int] | None:
    """The `{...}` group at s[i] as Python: (expression, index after the group), or None."""
    group = _group(s, i)
    if group is None:
        return None
    expr = _to_python(group[0], depth + 1)
    return None if expr is None else (expr, group[1])


def latex_number(text: str) -> float | None:
    """The value of a purely numeric expression (LaTeX or plain), or None."""
    s = text.strip()
    if len(s) > 500:
        return None
    for old, new in _PLAIN:
        s = s.replace(old, new)
    expr = _to_python(s)
    if expr is None or any(c.isalpha() and c not in "eE" for c in expr):
        return None
    try:
        result = safe_eval(expr, calls=False)
    except EvalFailed:
        return None
    if isinstance(result, bool) or not isinstance(result, (int, float)):
        return None
    try:
        result = float(result)
    except OverflowError:
        return None
    return result if math.isfinite(result) else None
