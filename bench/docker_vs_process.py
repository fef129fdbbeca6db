"""Throughput of the process and docker backends on the quick GSM8K programs, in one run.

    python bench/docker_vs_process.py [--corpus FILE] [--workers N] [--rounds R] [--starts S] [--json]

1. The programs: the first sample of each record (`generated`, or `code`/`output`/`prediction`); a
   calibration pass on the process backend keeps the quick ones (finished, under 50 ms): the few that
   run for seconds or never end would measure the time limit, not the backend.
2. Start-up: a pool of N workers started and closed S times per backend (for docker: N containers,
   created in parallel); the median is reported.
3. Throughput: one warm pool of N workers per backend runs the quick programs R times over
   (restricted policy, warm isolation: what `potrun check` does by default), the rounds alternating
   between the backends; programs per second of the median round.

Prints both backends and the ratio docker / process. The docker backend needs the engine and the
sandbox image (`potrun image build`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from potrun.sandbox.api import Sandbox
from potrun.types import Status

DEFAULT_CORPUS = Path("/work/shared/data/pot/gsm8k_fewshot_codex.jsonl")
QUICK_S = 0.05
CODE_FIELDS = ("generated", "code", "output", "prediction")
BACKENDS = ("process", "docker")


def load_programs(path: Path) -> list[str]:
    programs = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if not line.strip():
                continue
            record = json.loads(line)
            for name in CODE_FIELDS:
                value = record.get(name)
                if isinstance(value, list):
                    value = value[0] if value else None
                if isinstance(value, str) and value.strip():
                    programs.append(value)
                    break
    return programs


def quick_programs(programs: list[str], workers: int) -> list[str]:
    with Sandbox("process", workers=workers, timeout=1.0) as box:
        results = list(box.run_many(programs))
    return [p for p, r in zip(programs, results, strict=True) if r.status is not Status.TIMEOUT and r.wall_s < QUICK_S]


def start_up(backend: str, workers: int, starts: int) -> float:
    times = []
    for _ in range(starts):
        box = Sandbox(backend, workers=workers)
        began = time.perf_counter()
        box.start()
        times.append(time.perf_counter() - began)
        box.close()
    return statistics.median(times)


def throughput(programs: list[str], workers: int, rounds: int) -> dict[str, dict[str, object]]:
    """Both backends' warm pools side by side; the rounds alternate between them (process, docker,
    process, ...) so that a change in the machine's load hits both alike. Median over the rounds."""
    boxes = {backend: Sandbox(backend, workers=workers).start() for backend in BACKENDS}
    times: dict[str, list[float]] = {backend: [] for backend in BACKENDS}
    statuses: dict[str, dict[str, int]] = {backend: {} for backend in BACKENDS}
    try:
        for box in boxes.values():
            list(box.run_many(programs))  # warm: runners forked, compile caches filled
        for _ in range(rounds):
            for backend, box in boxes.items():
                began = time.perf_counter()
                results = list(box.run_many(programs))
                times[backend].append(time.perf_counter() - began)
                for result in results:
                    statuses[backend][result.status.value] = statuses[backend].get(result.status.value, 0) + 1
    finally:
        for box in boxes.values():
            box.close()
    report = {}
    for backend in BACKENDS:
        median = statistics.median(times[backend])
        report[backend] = {
            "programs_per_round": len(programs),
            "rounds": rounds,
            "median_round_s": round(median, 4),
            "programs_per_s": round(len(programs) / median, 1),
            "ms_per_program": round(1000 * median / len(programs), 4),
            "statuses": statuses[backend],
        }
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=10, help="times the quick programs are run per backend")
    parser.add_argument("--starts", type=int, default=3, help="pool start-ups timed per backend")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)

    programs = load_programs(args.corpus)
    quick = quick_programs(programs, args.workers)
    report: dict[str, object] = {
        "corpus": str(args.corpus),
        "programs": len(programs),
        "quick_programs": len(quick),
        "workers": args.workers,
        "rounds": args.rounds,
    }
    rates = throughput(quick, args.workers, args.rounds)
    for backend in BACKENDS:
        report[backend] = {"start_up_s": round(start_up(backend, args.workers, args.starts), 3), **rates[backend]}
    process, docker = report["process"], report["docker"]  # type: ignore[assignment]
    report["ratio_docker_over_process"] = round(docker["programs_per_s"] / process["programs_per_s"], 3)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"corpus {args.corpus.name}: {len(quick)} quick programs of {len(programs)}, "
        f"{args.workers} workers, {args.rounds} rounds"
    )
    for backend in BACKENDS:
        row = report[backend]  # type: ignore[index]
        print(
            f"  {backend:8s} {row['programs_per_s']:9.1f} programs/s  {row['ms_per_program']:7.3f} ms/program  "
            f"pool start-up {row['start_up_s']:.2f} s  {row['statuses']}"
        )
    print(f"  docker / process throughput: {report['ratio_docker_over_process']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
