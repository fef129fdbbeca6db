"""The summary a paper needs: intervals checked against numbers computed here independently, the
breakdowns by --by fields, and the run's record, through `potrun check` itself where it can be."""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
from datetime import datetime
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest

import potrun
from potrun.check.pipeline import RecordResult
from potrun.check.runrecord import _package_digest, file_identity, rules_fingerprint
from potrun.check.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, mcnemar_exact_p, mean_with_bootstrap, proportion
from potrun.cli import main
from potrun.reports.table import MISSING_GROUP, Summary, render

Z = NormalDist().inv_cdf(0.975)


def wilson_by_quadratic(successes: int, n: int) -> tuple[float, float]:
    """Wilson's interval as the two roots p of (p_hat - p)^2 = z^2 p (1 - p) / n (his definition)."""
    p_hat = successes / n
    a = 1 + Z * Z / n
    b = -(2 * p_hat + Z * Z / n)
    c = p_hat * p_hat
    roots = sorted(np.roots([a, b, c]).real)
    return roots[0], roots[1]


@pytest.mark.parametrize(("successes", "n"), [(943, 1318), (43, 60), (1, 10), (9, 10), (500, 1000)])
def test_wilson_interval_is_the_roots_of_wilsons_equation(successes: int, n: int) -> None:
    estimate = proportion(successes, n)
    low, high = wilson_by_quadratic(successes, n)
    assert estimate.low == pytest.approx(low, abs=1e-9) and estimate.high == pytest.approx(high, abs=1e-9)
    assert estimate.se == pytest.approx(math.sqrt(successes / n * (1 - successes / n) / n))
    assert estimate.method == "wilson" and estimate.n == n


@pytest.mark.parametrize(
    ("successes", "n", "expected"),
    # Newcombe (1998), Statistics in Medicine 17:857, Table I, method 3 (Wilson score, no continuity correction)
    [(81, 263, (0.2553, 0.3662)), (15, 148, (0.0624, 0.1605)), (0, 20, (0.0, 0.1611)), (1, 29, (0.0061, 0.1718))],
)
def test_wilson_interval_matches_newcombes_published_table(
    successes: int, n: int, expected: tuple[float, float]
) -> None:
    estimate = proportion(successes, n)
    assert (round(estimate.low, 4), round(estimate.high, 4)) == expected


def test_no_graded_record_gives_an_empty_interval() -> None:
    assert proportion(0, 0).to_json() == {"value": 0.0, "se": 0.0, "ci95": [0.0, 0.0], "method": "wilson", "n": 0}


@pytest.mark.parametrize("n", [50, 6000])  # 6000: past the size drawn in one piece, so drawn in chunks
def test_bootstrap_is_the_percentile_interval_of_seeded_resample_means(n: int) -> None:
    scores = np.random.default_rng(7).uniform(0, 1, n).round(3)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    means = scores[rng.integers(0, n, size=(BOOTSTRAP_RESAMPLES, n))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    estimate = mean_with_bootstrap(list(scores))
    assert estimate.value == pytest.approx(scores.mean())
    assert (estimate.low, estimate.high) == pytest.approx((low, high), abs=1e-12)
    assert estimate.se == pytest.approx(scores.std(ddof=1) / math.sqrt(n))
    assert mean_with_bootstrap(list(scores)) == estimate  # seeded: the same every time


def test_bootstrap_interval_agrees_with_the_normal_one_for_a_large_sample() -> None:
    scores = np.random.default_rng(3).beta(2, 5, 4000)
    estimate = mean_with_bootstrap(list(scores))
    half = Z * scores.std(ddof=1) / math.sqrt(len(scores))
    assert estimate.low == pytest.approx(scores.mean() - half, abs=half * 0.1)
    assert estimate.high == pytest.approx(scores.mean() + half, abs=half * 0.1)


@pytest.mark.parametrize(("only_a", "only_b"), [(0, 0), (0, 8), (1, 6), (5, 5), (30, 12)])
def test_mcnemar_exact_p_is_twice_the_binomial_tail(only_a: int, only_b: int) -> None:
    n, k = only_a + only_b, min(only_a, only_b)
    tail = sum(math.factorial(n) // (math.factorial(i) * math.factorial(n - i)) for i in range(k + 1)) * 0.5**n
    assert mcnemar_exact_p(only_a, only_b) == pytest.approx(min(1.0, 2 * tail))


def result(line: int, correct: bool | None, *, score: float | None = None, **extra: object) -> RecordResult:
    return RecordResult(
        line,
        line,
        "ok",
        correct=correct,
        verdicts=None if correct is None else {"default": correct},
        score=score,
        **extra,
    )


def test_a_continuous_score_gets_a_bootstrap_mean_over_every_graded_record() -> None:
    summary = Summary(("default",))
    scores = [1.0, 0.0, 1.0, 0.25, 0.5, 1.0, 0.0, 0.75]  # 0/1 first: the list starts at 0.25
    for line, score in enumerate(scores, 1):
        summary.add(result(line, score >= 0.5, score=score))
    data = summary.finish().to_json()
    assert data["score_mean"]["value"] == pytest.approx(sum(scores) / len(scores), abs=1e-6)
    assert data["score_mean"]["n"] == len(scores) and data["score_mean"]["method"] == "bootstrap"
    expected = mean_with_bootstrap(sorted(scores))  # the order of the scores does not matter to the mean
    assert data["score_mean"]["value"] == pytest.approx(expected.value, abs=1e-6)
    low, high = data["score_mean"]["ci95"]
    assert low < data["score_mean"]["value"] < high


def test_verdicts_alone_have_no_score_mean_the_accuracy_says_it() -> None:
    summary = Summary(("default",))
    for line, correct in enumerate([True, False, True], 1):
        summary.add(result(line, correct))
    data = summary.finish().to_json()
    assert "score_mean" not in data and data["accuracy_ci95"] == proportion(2, 3).to_json()["ci95"]


def test_metrics_hook_is_written_when_set() -> None:
    summary = Summary(("default",))
    assert "metrics" not in summary.to_json()
    summary.metrics["longdocurl_generalized_accuracy"] = 0.5
    assert summary.to_json()["metrics"] == {"longdocurl_generalized_accuracy": 0.5}


def write_jsonl(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


RECORDS = [
    {"id": "a1", "source": "finance", "meta": {"level": 1}, "output": "ans = 2", "answer": 2},
    {"id": "a2", "source": "finance", "meta": {"level": 2}, "output": "ans = 3", "answer": 2},
    {"id": "a3", "source": "science", "meta": {"level": 1}, "output": "ans = 1 / 0", "answer": 2},
    {"id": "a4", "source": "science", "meta": {"level": 2}, "output": "ans = 2", "answer": 2},
    {"id": "a5", "source": "science", "meta": {"level": 2}, "output": "ans = undefined_name", "answer": 2},
    {"id": "a6", "meta": {"level": 1}, "output": "ans = 2", "answer": 2},
]


def check(tmp_path: Path, preds: Path, *args: str) -> dict[str, object]:
    summary = tmp_path / "summary.json"
    code = main(["check", str(preds), "--summary-json", str(summary), "--quiet", "--workers", "1", *args])
    assert code == 0
    return json.loads(summary.read_text())


def test_check_breaks_the_accuracy_down_by_fields_and_counts_error_types(tmp_path: Path) -> None:
    preds = write_jsonl(tmp_path / "preds.jsonl", RECORDS)
    out = tmp_path / "out.jsonl"
    summary = check(tmp_path, preds, "--by", "source,meta.level", "--out", str(out))
    by = summary["by"]
    assert set(by) == {"source", "meta.level"}
    assert by["source"]["finance"] == {"n": 2, "correct": 1, "accuracy": 0.5, **_interval(1, 2)}
    assert by["source"]["science"] == {"n": 3, "correct": 1, "accuracy": 0.333333, **_interval(1, 3)}
    assert by["source"][MISSING_GROUP]["n"] == 1  # a record without the field is its own group, not dropped
    assert {key: group["n"] for key, group in by["meta.level"].items()} == {"1": 3, "2": 3}
    assert summary["error_type_counts"] == {"ZeroDivisionError": 1, "NameError": 1}
    assert summary["accuracy_ci95"] == proportion(3, 6).to_json()["ci95"]
    assert summary["accuracy_se"] == round(math.sqrt(0.25 / 6), 6)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[0]["fields"] == {"source": "finance", "meta.level": 1}
    for key in ("total", "scored", "accuracy", "status_counts", "isolation_counts", "policy", "timeout_s"):
        assert key in summary  # every key the summary had before stays


def _interval(correct: int, n: int) -> dict[str, object]:
    estimate = proportion(correct, n).to_json()
    return {"se": estimate["se"], "ci95": estimate["ci95"]}


def test_run_record_traces_the_number_to_its_run(tmp_path: Path) -> None:
    preds = write_jsonl(tmp_path / "preds.jsonl", RECORDS)
    golds = write_jsonl(tmp_path / "golds.jsonl", [{"id": r["id"], "answer": 2} for r in RECORDS])
    summary = check(tmp_path, preds, "--gold", str(golds), "--timeout", "3", "--memory", "1024", "--compare", "pot")
    run = summary["run"]
    assert run["potrun_version"] == potrun.__version__
    assert run["rules"] == rules_fingerprint() and set(run["rules"]["parts"]) == {
        "extractors",
        "comparators",
        "benchmarks",
        "policies",
    }
    assert run["command"][:3] == ["potrun", "check", str(preds)]
    content = preds.read_bytes()
    assert run["inputs"]["preds"] == {
        "path": str(preds),
        "absolute_path": str(preds.resolve()),
        "size_bytes": len(content),
        "sha256": hashlib.sha256(content).hexdigest(),
    }
    assert run["inputs"]["gold"]["sha256"] == hashlib.sha256(golds.read_bytes()).hexdigest()
    assert run["check_options"]["presets"] == ["pot"] and run["check_options"]["mode"] == "pot"
    config = run["sandbox_config"]
    assert config["timeout"] == 3.0 and config["memory_mb"] == 1024
    assert config["policy"] == "restricted" and config["backend"] == "process"
    assert config["limits"]["timeout_s"] == 3.0 and config["limits"]["wall_limit_s"] == 15.0
    assert run["tiers_used"] == sorted(summary["isolation_counts"])
    assert run["machine"]["cores"] == os.cpu_count() and run["machine"]["numpy"] == np.__version__
    started = datetime.fromisoformat(run["started_at"])
    ended = datetime.fromisoformat(run["ended_at"])
    assert started.utcoffset() is not None and started <= ended


def test_a_stream_is_recorded_without_a_hash_and_says_why(tmp_path: Path) -> None:
    fifo = tmp_path / "preds.fifo"
    os.mkfifo(fifo)
    identity = file_identity(fifo)  # not opened: a FIFO cannot be read twice
    assert identity["sha256"] is None and identity["size_bytes"] is None and "stream" in identity["reason"]


def test_pass_at_k_has_its_interval(tmp_path: Path) -> None:
    records = [
        {"id": i, "generated": ["ans = 2", "ans = 3"] if i % 2 else ["ans = 3", "ans = 3"], "answer": 2}
        for i in range(8)
    ]
    summary = check(tmp_path, write_jsonl(tmp_path / "preds.jsonl", records), "--k", "1,2")
    samples = summary["samples"]
    assert samples["pass@k"] == {"1": 0.25, "2": 0.5}  # pass@1 is 0.5 on half the records, 0 on the rest
    per_record_pass_at_1 = [0.5 if i % 2 else 0.0 for i in range(8)]
    assert samples["pass@k_ci95"]["1"] == mean_with_bootstrap(per_record_pass_at_1).to_json()["ci95"]
    low, high = samples["pass@k_ci95"]["2"]
    assert low < 0.5 < high


def test_table_shows_the_interval_the_breakdown_and_the_input_hash(tmp_path: Path) -> None:
    preds = write_jsonl(tmp_path / "preds.jsonl", RECORDS)
    summary = Summary(("default",))
    for line, record in enumerate(RECORDS, 1):
        summary.add(result(line, record["output"] == "ans = 2", fields={"source": record.get("source")}))
    summary.run = {"inputs": {"preds": file_identity(preds)}}
    stream = io.StringIO()
    render(summary.finish(), stream)
    text = stream.getvalue()
    estimate = proportion(3, 6)
    assert f"95% CI [{estimate.low:.4f}, {estimate.high:.4f}]" in text
    assert "source = finance" in text and "source = (missing)" in text
    assert hashlib.sha256(preds.read_bytes()).hexdigest()[:16] in text


def test_the_rules_fingerprint_changes_with_any_rule_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "rules_probe"
    (package / "inner").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "inner" / "judge.py").write_text("TOLERANCE = 1e-6\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = _package_digest("rules_probe")
    (package / "inner" / "judge.py").write_text("TOLERANCE = 1e-4\n")  # a rule changed, same version
    changed = _package_digest("rules_probe")
    (package / "inner" / "judge.py").rename(package / "inner" / "judge2.py")  # same bytes, another file
    renamed = _package_digest("rules_probe")
    assert len({before, changed, renamed}) == 3
