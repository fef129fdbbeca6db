"""Comparators: is a value the gold answer?

`compare(value, gold, *, preset="default", **options) -> Verdict(correct, reason)` is pure: no I/O,
no timeouts, no processes, and it never evaluates a program's or a model's text with `eval`.
`value` is what a program returned after the sandbox turned it into plain data (None, bool, int,
float incl. nan/inf, str, list), or an extracted final-answer string.

Presets (the registry `PRESETS`), one module each
-------------------------------------------------
``default``     potrun's own rules, strict and documented in `potrun.comparators.default`.
``pot``         Program-of-Thoughts `tool.finqa_equal` after `tool.floatify_ans` (the GSM8K/SVAMP/FinQA
                program runs); `cot=True` takes `run_finqa_cot.py`'s text path instead.
``docmath``     DocMath-Eval `utils/evaluation_utils.get_acc` (`normalize` + `compare_two_numbers`).
``tatqa``       TAT-QA exact match (`eval_tatqa/tatqa_metric.TaTQAEmAndF1`, EM only), scale aware.
``longdocurl``  LongDocURL `utils/utils_score_v3.eval_score` with its Integer/Float/String/List/None
                formats, after the `eval()` its pipeline applies to the extracted answer.
``math``        huggingface math-verify `parse` + `verify`: symbolic answers (`\\sqrt{8}` is `2\\sqrt{2}`),
                under its own timeouts (the `math` extra; module `math` says what it costs the parent).
``mathqa-rel``  Qwen2.5-Math `evaluation/grader.math_equal` without sympy (module `mathqa`): string,
                choice, numeric (`numeric_equal`, rel_tol 1e-4, ×100 and ÷100), bracket, list, matrix
                and equation rules; a numeric evaluator (`latex`) stands in for `symbolic_equal`.

Every preset reads a GSM8K-format gold ("...\\n#### 72") as the text after its last marker
(`potrun.comparators.golds`).

Each preset's judge docstring names the peer function it reproduces and its known leniencies.
Peer presets re-implement the peer's own (sometimes buggy) text normalisation; they do not use
potrun's number parser. Where a peer would `eval()` a string, a literal/arithmetic evaluator stands
in (`potrun.comparators.safe_eval`); anything else counts as "eval raised", as in the peer.

Unknown presets and options raise `potrun.types.UsageError`; any data gives a Verdict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from potrun.budget import OverBudget, record_budget
from potrun.comparators import default, docmath, longdocurl, math, mathqa, pot, tatqa
from potrun.comparators.golds import GSM8K_MARKER, GoldRange, gsm8k_gold, parse_range
from potrun.comparators.longdocurl import longdocurl_score
from potrun.comparators.preset import Preset
from potrun.options import unknown_option
from potrun.types import UsageError, Value, Verdict

__all__ = [
    "GSM8K_MARKER",
    "PRESETS",
    "GoldRange",
    "Preset",
    "check_compare_options",
    "compare",
    "compare_many",
    "gsm8k_gold",
    "longdocurl_score",
    "parse_range",
    "read_answer",
]

PRESETS: Mapping[str, Preset] = MappingProxyType(
    {
        p.name: p
        for p in (
            default.PRESET,
            pot.PRESET,
            docmath.PRESET,
            tatqa.PRESET,
            longdocurl.PRESET,
            mathqa.PRESET,
            math.PRESET,
        )
    }
)


def _preset_named(name: str) -> Preset:
    try:
        return PRESETS[name]
    except (KeyError, TypeError):
        raise UsageError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}") from None


def check_compare_options(preset: str, options: Mapping[str, Any], where: str, also: Sequence[str] = ()) -> None:
    """A UsageError for an unknown preset, or for an option `preset` does not take: it names the option
    and the closest one `preset` takes or `also` lists (the caller's own keywords, where the comparator's
    options are passed among them: a misspelt `gold_field` must not read as a comparator option)."""
    chosen = _preset_named(preset)
    for name in options:
        if name not in chosen.defaults:
            raise unknown_option(name, [*chosen.defaults, *also], f"{where} (preset {preset!r})")


def compare(value: Any, gold: Any, *, preset: str = "default", **options: Any) -> Verdict:
    """Judge `value` against `gold` with the named preset (see the module docstring)."""
    return _preset_named(preset)(value, gold, **options)


def compare_many(
    value: Any,
    gold: Any,
    presets: Sequence[str],
    *,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Verdict]:
    """One verdict per preset, in the order given (`potrun check --compare A,B`).

    `options` maps a preset name to the options for that preset only.
    """
    options = options or {}
    return {name: compare(value, gold, preset=name, **options.get(name, {})) for name in presets}


def read_answer(text: str, *, preset: str = "default", **options: Any) -> Value:
    """What `preset` reads in an answer text, before it compares it with a gold.

    default: a yes/no/true/false text is a bool, "(B)"/"b." the letter "B", a number text the number
    as written, without percent or scale ("1{,}234.5" -> 1234.5, "25%" -> 25, "$3.5 million" -> 3.5:
    `percent=True` and `scale=True` apply them when comparing, and abs_value the absolute value);
    anything else stays the text. pot: `tool.floatify_ans` of the text (a float, else the text), or
    with `cot=True` the last number after "answer is" (run_finqa_cot.py's reading). The other presets
    normalise the text their own way when comparing: the text is returned unchanged.
    """
    chosen = _preset_named(preset)
    if chosen.read is None:
        return text
    try:
        with record_budget():
            return chosen.read(text, **{**chosen.defaults, **options})
    except OverBudget:  # a text too costly to read: read as nothing but itself
        return text
