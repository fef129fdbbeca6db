"""`Preset`: a named comparator, the unit the registry (`potrun.comparators.PRESETS`) holds.

Each preset module (default, pot, docmath, tatqa, longdocurl, mathqa) defines one `PRESET`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from potrun.budget import COMPARE_UNITS_PER_CHAR, OverBudget, charge, record_budget, size
from potrun.comparators.bignum import exact_verdict, overflows_in_text
from potrun.comparators.golds import gsm8k_gold
from potrun.options import check_options
from potrun.types import PotrunError, Value, Verdict

__all__ = ["Preset"]


@dataclass(frozen=True, eq=False)
class Preset:
    """A named comparator: the function that judges, the options it takes, and what it reproduces."""

    name: str
    judge: Callable[..., Verdict]
    defaults: Mapping[str, Any]
    reproduces: str
    # How the preset takes a GSM8K-format gold's answer text (`golds`): as text by default.
    gsm8k_answer: Callable[[str], Any] = str
    # What the preset reads in an answer text (`read_answer`); None: it compares the text as it is.
    read: Callable[..., Value] | None = None
    # The option that tells the judge whether the value is a program's (False) or an answer text's
    # (True), which the pipeline sets from the sample's mode unless the user sets it; None: not needed.
    mode_option: str | None = None
    # It bounds its work with signal.alarm, which works only in the main thread: elsewhere it refuses
    # (a UsageError), never answers False in silence (math-verify's preset).
    main_thread_only: bool = False

    def check_options(self, options: Mapping[str, Any]) -> None:
        """A UsageError naming the first option the preset does not take, with the closest it does."""
        check_options(sorted(options), self.defaults, f"preset {self.name!r}")

    def _judged(self, value: Any, gold: Any, options: Mapping[str, Any]) -> Verdict:
        """The preset's verdict, but where a number is past a float (`bignum`): there a float's reading
        (inf, or a refusal) is not the number, so plain decimals are compared exactly, and a text
        holding such a number is correct only when it is the gold's own text."""
        exact = exact_verdict(value, gold)
        if exact is not None:
            return Verdict(exact, f"{self.name}: compared exactly as decimals (a number past a float)")
        verdict = self.judge(value, gold, **{**self.defaults, **options})
        overflowing = verdict.correct and (overflows_in_text(value) or overflows_in_text(gold))
        if overflowing and not (isinstance(value, str) and isinstance(gold, str) and value.strip() == gold.strip()):
            return Verdict(False, f"{self.name}: a number past a float is read as inf: not compared")
        return verdict

    def __call__(self, value: Any, gold: Any, **options: Any) -> Verdict:
        self.check_options(options)
        try:
            with record_budget():  # the record's, when the caller opened one: extraction and comparison
                charge(COMPARE_UNITS_PER_CHAR * (size(value) + size(gold)))  # before any rule reads them
                if isinstance(gold, str):
                    answer = gsm8k_gold(gold)
                    if answer is not None:
                        gold = self.gsm8k_answer(answer)
                return self._judged(value, gold, options)
        except OverBudget as exc:
            return Verdict(False, f"{self.name}: not judged ({exc})")
        except PotrunError:  # the caller's to act on: a bad option, a missing extra (potrun[math])
            raise
        except Exception as exc:  # any data gives a verdict: a value no rule of the preset could read
            # (an int past str()'s 4,300 digits, say), or a text whose reading ran out of its budget
            # (potrun.budget.OverBudget), is judged wrong, and the run goes on
            return Verdict(False, f"{self.name}: not judged ({type(exc).__name__}: {str(exc)[:200]})")
