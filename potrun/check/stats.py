"""The uncertainty of a reported number: intervals and the paired test a paper needs.

- A proportion (accuracy: k correct of n graded) has its standard error sqrt(p(1-p)/n) and its 95%
  **Wilson score interval**, which stays inside [0, 1] and keeps its coverage near 0 and 1 and for small
  n, where the normal interval p ± 1.96·se does not.
- A mean of scores in [0, 1] that are not all 0 or 1 (a continuous score such as LongDocURL's, pass@k
  over several samples) has a **percentile bootstrap** interval: `BOOTSTRAP_RESAMPLES` resamples drawn
  with numpy's default generator seeded with `BOOTSTRAP_SEED`, so the same scores give the same interval
  in every run and on every machine. It draws BOOTSTRAP_RESAMPLES x n indexes, in chunks of 2 million
  (32 MB): about 5 s for 100,000 scores on a busy 2-core machine, and only for such scores (verdicts
  alone need none: their interval is Wilson's).
- Two runs on the same records are compared with **McNemar's exact test**: under "no difference" each
  record whose verdict changed went either way with probability 1/2, so the p-value is the two-sided
  binomial probability of a split at least as uneven as the one seen among the discordant records.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Z_95 = 1.959963984540054  # the standard normal's 97.5% quantile: a two-sided 95% interval
BOOTSTRAP_SEED = 0
BOOTSTRAP_RESAMPLES = 2000
_BOOTSTRAP_CHUNK = 2_000_000  # indexes drawn at once: bounds the bootstrap's memory whatever n is


@dataclass(frozen=True, slots=True)
class Estimate:
    """A reported number with its standard error and 95% interval, and how the interval was made."""

    value: float
    se: float
    low: float
    high: float
    method: str  # "wilson" or "bootstrap"
    n: int

    def to_json(self) -> dict[str, Any]:
        return {
            "value": round(self.value, 6),
            "se": round(self.se, 6),
            "ci95": [round(self.low, 6), round(self.high, 6)],
            "method": self.method,
            "n": self.n,
        }


def proportion(successes: int, n: int) -> Estimate:
    """successes/n with its standard error and its 95% Wilson score interval (all 0 when n is 0)."""
    if n == 0:
        return Estimate(0.0, 0.0, 0.0, 0.0, "wilson", 0)
    p = successes / n
    low, high = wilson_interval(successes, n)
    return Estimate(p, math.sqrt(p * (1 - p) / n), low, high, "wilson", n)


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (Wilson 1927)."""
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def mean_with_bootstrap(scores: Sequence[float]) -> Estimate:
    """The mean of `scores`, its standard error (sample sd/sqrt(n)) and its 95% percentile bootstrap
    interval (`BOOTSTRAP_RESAMPLES` resamples, seed `BOOTSTRAP_SEED`)."""
    import numpy as np

    values = np.asarray(scores, dtype=np.float64)
    n = len(values)
    if n == 0:
        return Estimate(0.0, 0.0, 0.0, 0.0, "bootstrap", 0)
    mean = float(values.mean())
    se = float(values.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    rows = max(1, _BOOTSTRAP_CHUNK // n)
    means = np.concatenate(
        [
            values[rng.integers(0, n, size=(min(rows, BOOTSTRAP_RESAMPLES - start), n))].mean(axis=1)
            for start in range(0, BOOTSTRAP_RESAMPLES, rows)
        ]
    )
    low, high = np.percentile(means, [2.5, 97.5])
    return Estimate(mean, se, float(low), float(high), "bootstrap", n)


def mcnemar_exact_p(only_a: int, only_b: int) -> float:
    """McNemar's exact two-sided p-value from the discordant pairs: `only_a` records right in run A
    only, `only_b` right in run B only (1.0 when no verdict changed)."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    smaller = min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(smaller + 1)) / 2**n
    return float(min(1.0, 2 * tail))


__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "Estimate",
    "mcnemar_exact_p",
    "mean_with_bootstrap",
    "proportion",
    "wilson_interval",
]
