"""The run's summary: counts as results stream by, then the JSON a CI reads (potrun.reports.table
draws the table a person reads)."""

from __future__ import annotations

import heapq
import json
import time
from array import array
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from potrun.check.pipeline import BAD_RECORD, NO_GOLD, SKIPPED, RecordResult
from potrun.check.runrecord import utc_now
from potrun.check.stats import Estimate, mean_with_bootstrap, proportion

SLOWEST = 5


MAX_GROUPS = 1000  # distinct values a --by field is broken down into; the rest count as OTHER_GROUP


OTHER_GROUP = "(other)"


MISSING_GROUP = "(missing)"


@dataclass
class Rate:
    """The mean of per-record values in [0, 1] with its interval: while every value is 0 or 1 only the
    counts are kept (Wilson interval); the first other value starts the list a bootstrap needs."""

    n: int = 0
    ones: int = 0
    total: float = 0.0
    values: array[float] | None = None

    def add(self, value: float) -> None:
        self.n += 1
        self.total += value
        if self.values is None and value in (0.0, 1.0):
            self.ones += value == 1.0
            return
        if self.values is None:  # the first fraction: the 0/1 values so far, in any order
            self.values = array("d", [1.0] * self.ones + [0.0] * (self.n - 1 - self.ones))
        self.values.append(value)

    @property
    def mean(self) -> float | None:
        return self.total / self.n if self.n else None

    def estimate(self) -> Estimate:
        return proportion(self.ones, self.n) if self.values is None else mean_with_bootstrap(self.values)


def pass_at_1(samples: Mapping[str, Any] | None, preset: str, verdict: bool, first_preset: bool) -> float:
    """A graded record's pass@1: the share of its samples `preset` judges correct (the unbiased estimate
    of one sample's accuracy), or its verdict when it has one sample. A line from a file is anyone's: a
    count that is not one of the record's samples is ignored."""
    if not samples:
        return float(verdict)
    n = samples.get("n")
    by_preset = samples.get("correct_by_preset")
    correct = by_preset.get(preset) if isinstance(by_preset, Mapping) else None
    if correct is None and first_preset:
        correct = samples.get("correct")
    if type(n) is int and type(correct) is int and 0 <= correct <= n and n > 0:
        return correct / n
    return float(verdict)


@dataclass
class Summary:
    """Accumulates RecordResults; `to_json()` is `--summary-json`.

    The headline accuracy is each graded record's pass@1 averaged (`pass_at_1`): with one sample a
    record, the share of records judged correct; with several, the unbiased estimate over all of them
    (a record's verdict, `correct`, is its first sample's: `first_sample_accuracy`). Nothing graded: the
    accuracy is None (null), never a 0 that reads as a result."""

    presets: tuple[str, ...]
    settings: dict[str, Any] = field(default_factory=dict)
    total: int = 0
    skipped: int = 0
    bad_record: int = 0
    no_gold: int = 0  # records whose id the --gold file lacks: not run, not in the accuracy's denominator
    graded: int = 0
    correct: Counter[str] = field(default_factory=Counter)
    status_counts: Counter[str] = field(default_factory=Counter)
    extraction_counts: Counter[str] = field(default_factory=Counter)
    timeouts: Counter[str] = field(default_factory=Counter)
    isolation_counts: Counter[str] = field(default_factory=Counter)  # records by the tier that ran them
    slowest: list[tuple[float, int, Any, str]] = field(default_factory=list)
    sample_records: int = 0
    pass_at_k: Counter[str] = field(default_factory=Counter)
    majority_correct: int = 0
    samples_total: int = 0
    samples_executed: int = 0
    bad_lines: list[tuple[int, str]] = field(default_factory=list)
    checklist_records: int = 0  # records with a checklist (potrun.check.process_golds)
    checklist_passed: int = 0
    checklist_correct: int = 0  # correct AND checklist passed
    error_type_counts: Counter[str] = field(default_factory=Counter)
    # Scores of graded records (RecordResult.score, else correct as 1/0): while every one is 0 or 1 only
    # their count is kept (their mean is the accuracy); the first other score starts the list a bootstrap
    # needs, so a run of verdicts keeps its memory flat.
    score_ones: int = 0
    scores: array[float] | None = None
    pass_at_k_values: dict[str, array[float]] = field(default_factory=dict)  # per record, for its interval
    pass1: dict[str, Rate] = field(default_factory=dict)  # preset -> the graded records' pass@1
    by: dict[str, dict[str, list[int]]] = field(default_factory=dict)  # field -> value -> [graded, correct]
    metrics: dict[str, Any] = field(default_factory=dict)  # a benchmark's own metrics (potrun.benchmarks)
    run: dict[str, Any] = field(default_factory=dict)  # the run's record (potrun.check.runrecord), written as `run`
    started_at: str = field(default_factory=utc_now)
    ended_at: str | None = None
    started: float = field(default_factory=time.perf_counter)
    elapsed_s: float = 0.0

    def add(self, result: RecordResult) -> None:
        self.total += 1
        self.status_counts[result.status] += 1
        if result.status == SKIPPED:
            self.skipped += 1
            return
        if result.status == NO_GOLD:
            self.no_gold += 1
            return
        if result.status == BAD_RECORD:
            self.bad_record += 1
            if len(self.bad_lines) < 20:
                self.bad_lines.append((result.line, result.error or ""))
            return
        if result.extraction:
            self.extraction_counts[result.extraction] += 1
        if result.timeout_kind:
            self.timeouts[result.timeout_kind] += 1
        if result.isolation:
            self.isolation_counts[result.isolation] += 1
        if result.error_type:
            self.error_type_counts[result.error_type] += 1
        if result.correct is not None:
            self.graded += 1
            for preset, verdict in (result.verdicts or {self.presets[0]: result.correct}).items():
                self.correct[preset] += bool(verdict)
                first = preset == self.presets[0]
                self.pass1.setdefault(preset, Rate()).add(pass_at_1(result.samples, preset, bool(verdict), first))
            self._add_score(result.score if result.score is not None else float(result.correct))
            self._add_groups(result.fields or {}, result.correct)
        entry = (result.wall_s, result.line, result.id, result.status)
        if len(self.slowest) < SLOWEST:
            heapq.heappush(self.slowest, entry)
        elif entry > self.slowest[0]:
            heapq.heapreplace(self.slowest, entry)
        if result.samples:
            self._add_samples(result.samples)
        if result.checklist_passed is not None:
            self.checklist_records += 1
            self.checklist_passed += result.checklist_passed
            self.checklist_correct += result.checklist_passed and result.correct is True

    def _add_score(self, score: float) -> None:
        if self.scores is None and score in (0.0, 1.0):
            self.score_ones += score == 1.0
            return
        if self.scores is None:  # the first continuous score: the 0/1 scores so far, in any order
            self.scores = array("d", [1.0] * self.score_ones + [0.0] * (self.graded - 1 - self.score_ones))
        self.scores.append(score)

    def _add_groups(self, fields: Mapping[str, Any], correct: bool) -> None:
        for name, value in fields.items():
            groups = self.by.setdefault(name, {})
            key = _group_key(value)
            if key not in groups and len(groups) >= MAX_GROUPS:
                key = OTHER_GROUP
            counts = groups.setdefault(key, [0, 0])
            counts[0] += 1
            counts[1] += correct

    def _add_samples(self, samples: Mapping[str, Any]) -> None:
        self.sample_records += 1
        self.samples_total += samples["n"]
        self.samples_executed += samples["executed"]
        for k, value in samples.get("pass@k", {}).items():
            self.pass_at_k[k] += value
            self.pass_at_k_values.setdefault(k, array("d")).append(value)
        self.majority_correct += bool(samples.get("majority_correct"))

    def finish(self) -> Summary:
        self.elapsed_s = time.perf_counter() - self.started
        self.ended_at = utc_now()
        return self

    @property
    def scored(self) -> int:
        return self.total - self.skipped - self.bad_record - self.no_gold

    def accuracy(self, preset: str | None = None) -> float | None:
        """The headline: the graded records' mean pass@1 under `preset` (the first when None); None when
        nothing was graded."""
        rate = self.pass1.get(preset or self.presets[0])
        return rate.mean if rate is not None and self.graded else None

    def first_sample_accuracy(self, preset: str | None = None) -> float | None:
        """The share of graded records whose first sample is correct (their `correct`)."""
        return self.correct[preset or self.presets[0]] / self.graded if self.graded else None

    def accuracy_estimate(self, preset: str | None = None) -> Estimate | None:
        """The accuracy with its standard error and 95% interval (Wilson while every record's pass@1 is
        0 or 1, else bootstrap); None when nothing was graded."""
        rate = self.pass1.get(preset or self.presets[0])
        return rate.estimate() if rate is not None and self.graded else None

    def score_estimate(self) -> Estimate | None:
        """The mean score with its bootstrap interval, when some score is not 0 or 1 (else None: the
        mean is the accuracy)."""
        return mean_with_bootstrap(self.scores) if self.scores is not None else None

    def pass_at_k_estimates(self) -> dict[str, Estimate]:
        """pass@k over the records with several samples, each with its bootstrap interval."""
        return {k: mean_with_bootstrap(values) for k, values in self.pass_at_k_values.items()}

    def breakdowns(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Accuracy by each --by field's value: n graded, correct, accuracy, se and 95% interval."""
        return {
            name: {key: _group_json(*counts) for key, counts in sorted(groups.items())}
            for name, groups in self.by.items()
        }

    def checklist_accuracy(self) -> float:
        return self.checklist_correct / self.checklist_records if self.checklist_records else 0.0

    @property
    def execution_rate(self) -> float:
        return self.status_counts["ok"] / self.scored if self.scored else 0.0

    def to_json(self) -> dict[str, Any]:
        estimate = self.accuracy_estimate()
        accuracy = estimate.to_json() if estimate is not None else {"se": None, "ci95": None, "method": None}
        data: dict[str, Any] = {
            "total": self.total,
            "scored": self.scored,
            "skipped": self.skipped,
            "bad_record": self.bad_record,
            "no_gold": self.no_gold,
            "graded": self.graded,
            "ungraded": self.scored - self.graded,
            "correct": self.correct[self.presets[0]],
            "accuracy": _rounded(self.accuracy()),
            "accuracy_measure": "pass@1 over all samples" if self.sample_records else "verdict",
            "preset": self.presets[0],
            "accuracy_by_preset": {p: _rounded(self.accuracy(p)) for p in self.presets},
            "accuracy_ci95_by_preset": {p: _ci95(self.accuracy_estimate(p)) for p in self.presets},
            "execution_rate": round(self.execution_rate, 6),
            "status_counts": dict(self.status_counts),
            "timeouts": dict(self.timeouts),
            "isolation_counts": dict(self.isolation_counts),
            "extraction_counts": dict(self.extraction_counts),
            "accuracy_se": accuracy["se"],
            "accuracy_ci95": accuracy["ci95"],
            "accuracy_interval": accuracy["method"],
            "error_type_counts": dict(self.error_type_counts.most_common()),
            "slowest": [
                {"id": i, "line": line, "wall_s": round(w, 4), "status": s}
                for w, line, i, s in sorted(self.slowest, reverse=True)
            ],
            "elapsed_s": round(self.elapsed_s, 3),
            "programs_per_s": round(self.scored / self.elapsed_s, 1) if self.elapsed_s else 0.0,
            **self.settings,
        }
        if self.metrics:
            data["metrics"] = self.metrics
        if self.checklist_records:
            data["checklist_accuracy"] = round(self.checklist_accuracy(), 6)
            data["checklist_records"] = self.checklist_records
            data["checklist_pass_rate"] = round(self.checklist_passed / self.checklist_records, 6)
        if self.sample_records:  # a record's verdict is its first sample's: that accuracy, named so
            data["first_sample_accuracy"] = _rounded(self.first_sample_accuracy())
            data["first_sample_accuracy_by_preset"] = {p: _rounded(self.first_sample_accuracy(p)) for p in self.presets}
            data["samples"] = {
                "records": self.sample_records,
                "pass@k": {k: round(v / self.sample_records, 6) for k, v in self.pass_at_k.items()},
                "pass@k_ci95": {k: e.to_json()["ci95"] for k, e in self.pass_at_k_estimates().items()},
                "majority_accuracy": round(self.majority_correct / self.sample_records, 6),
                "executed_fraction": round(self.samples_executed / self.samples_total, 6),
            }
        score = self.score_estimate()
        if score is not None:
            data["score_mean"] = score.to_json()
        if self.by:
            data["by"] = self.breakdowns()
        data["run"] = {
            **self.run,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "tiers_used": sorted(self.isolation_counts),
        }
        return data


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _ci95(estimate: Estimate | None) -> Any:
    return None if estimate is None else estimate.to_json()["ci95"]


def _group_key(value: Any) -> str:
    """A --by field's value as a group's name: a string as it is, anything else as JSON."""
    if value is None:
        return MISSING_GROUP
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _group_json(graded: int, correct: int) -> dict[str, Any]:
    estimate = proportion(correct, graded).to_json()
    return {
        "n": graded,
        "correct": correct,
        "accuracy": estimate["value"],
        "se": estimate["se"],
        "ci95": estimate["ci95"],
    }
