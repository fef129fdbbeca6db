"""`Preset`: a named comparator, the unit the registry (`potrun.comparators.PRESETS`) holds.

Each preset module (default, pot, docmath, tatqa, longdocurl, mathqa) defines one `PRESET`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from potrun.budget import COMPARE_UNITS_PER_CHAR, OverBudget, charge, record_budget, size
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

    def __call__(self, value: Any, gold: Any, **options: Any) -> Verdict:
        self.check_options(options)
        try:
            with record_budget():  # the record's, when the caller opened one: extraction and comparison
                charge(COMPARE_UNITS_PER_CHAR * (size(value) + size(gold)))  # before any rule reads them
                if isinstance(gold, str):
                    answer = gsm8k_gold(gold)
                    if answer is not None:
                        gold = self.gsm8k_answer(answer)
                return self.judge(value, gold, **{**self.defaults, **options})
        except OverBudget as exc:
            return Verdict(False, f"{self.name}: not judged ({exc})")
        except PotrunError:  # the caller's to act on: a bad option, a missing extra (potrun[math])
            raise
        except Exception as exc:  # any data gives a verdict: a value no rule of the preset could read
            # (an int past str()'s 4,300 digits, say), or a text whose reading ran out of its budget
            # (potrun.budget.OverBudget), is judged wrong, and the run goes on
            return Verdict(False, f"{self.name}: not judged ({type(exc).__name__}: {str(exc)[:200]})")
