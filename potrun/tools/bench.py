"""`potrun bench`: potrun's throughput beside plain in-process `exec` of the same programs, in one run.

In-process exec on one core, with no isolation at all, is the speed limit. Programs that do not finish
quickly (under 1 s in a first sandboxed pass) are left out of both measurements, so that the baseline
can run them without a sandbox and the two runs time the same work. The two alternate for `repeat`
rounds, and the report gives medians.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from potrun.check.records import Record, first_field, read_records
from potrun.extractors import extract_program
from potrun.sandbox.api import Sandbox
from potrun.types import Status

QUICK_S = 1.0
REPEAT = 5  # rounds of each measurement; the report gives medians


def load_programs(path: str, code_fields: tuple[str, ...], limit: int | None = None) -> list[str]:
    programs = []
    for item in read_records(path):
        if not isinstance(item, Record) or (found := first_field(item.data, code_fields)) is None:
            continue
        outputs = found[1]
        for text in outputs if isinstance(outputs, list) else [outputs]:
            source = extract_program(text).source if isinstance(text, str) else None
            if source is not None:
                programs.append(source)
        if limit is not None and len(programs) >= limit:
            return programs[:limit]
    return programs


def exec_in_process(programs: list[str]) -> float:
    """Seconds to compile and exec every program in this process (errors count, as they cost)."""
    started = time.perf_counter()
    for source in programs:
        try:
            exec(compile(source, "<bench>", "exec"), {"__name__": "__bench__"})
        except Exception:
            pass
    return time.perf_counter() - started


def run_bench(
    corpus: str,
    sandbox_factory: Callable[[], Sandbox],
    code_fields: tuple[str, ...],
    limit: int | None = None,
    repeat: int = REPEAT,
) -> dict[str, Any]:
    """Rounds of in-process exec and of potrun, alternating, so that both see the same load; the
    speeds and the ratio are medians over the rounds (this machine's timings are noisy)."""
    programs = load_programs(corpus, code_fields, limit)
    with Sandbox(policy="trusted", timeout=QUICK_S) as probe:
        quick = [p for p, r in zip(programs, probe.run_many(programs), strict=True) if r.status is not Status.TIMEOUT]
    started = time.perf_counter()
    sandbox = sandbox_factory()
    exec_s: list[float] = []
    potrun_s: list[float] = []
    with sandbox:
        startup = time.perf_counter() - started
        list(sandbox.run_many(_marked(quick[: min(200, len(quick))], "warm-up")))
        for round_number in range(max(1, repeat)):
            # New text each round (a leading comment): a runner's compile cache must not make a later
            # round cheaper for potrun than for exec, which compiles every program each time.
            sources = _marked(quick, f"round {round_number}")
            exec_s.append(exec_in_process(sources))
            started = time.perf_counter()
            results = list(sandbox.run_many(sources))
            potrun_s.append(time.perf_counter() - started)
    ratios = [e / p for e, p in zip(exec_s, potrun_s, strict=True)]
    walls = sorted(r.wall_s for r in results)
    return {
        "corpus": corpus,
        "programs": len(quick),
        "left_out_slow": len(programs) - len(quick),
        "backend": sandbox.backend_name,
        "policy": sandbox.policy.name,
        "isolation": str(sandbox.isolation),
        "workers": sandbox.workers,
        "startup_s": round(startup, 3),
        "repeat": len(ratios),
        "potrun_programs_per_s": round(len(quick) / statistics.median(potrun_s), 1),
        "exec_programs_per_s": round(len(quick) / statistics.median(exec_s), 1),
        "ratio_to_exec": round(statistics.median(ratios), 4),
        "ratio_rounds": [round(r, 4) for r in ratios],
        "program_wall_p50_ms": round(statistics.median(walls) * 1000, 3) if walls else None,
        "program_wall_p99_ms": round(walls[int(len(walls) * 0.99) - 1] * 1000, 3) if walls else None,
        "statuses": {s: sum(1 for r in results if r.status.value == s) for s in {r.status.value for r in results}},
        "tiers": dict(Counter(r.isolation for r in results if r.isolation)),  # which tier ran each program
        "warm_share": round(sum(r.isolation == "warm" for r in results) / len(results), 4) if results else None,
    }


def _marked(sources: list[str], mark: str) -> list[str]:
    return [f"# potrun bench {mark}\n{source}" for source in sources]
