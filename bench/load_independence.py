"""Load independence (issue 15): the published PoT figures, record by record, idle and under a CPU hog.

    python bench/load_independence.py                 # GSM8K and SVAMP, default limits (20 s of CPU)
    python bench/load_independence.py --hogs 8        # a heavier hog

Runs `potrun check` on ../shared/data/pot as docs/benchmarks.md's reproduction does (GSM8K with `--compare
pot`, SVAMP with `--compare pot --abs`), first on the machine as it is, then again while HOGS busy-loop
processes (default: twice the cores this process may use) compete for every core; the hog processes
are started and killed here. Then compares the two runs record by record (status, value, correct) and
prints both accuracies, the number of records that differ (the target: none), the timeouts of each
run, and the records that used the most CPU time (how close the slowest real programs come to the
limit). Exits 1 if any record differs.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
POT = REPO.parent / "shared" / "data" / "pot"
FILES = (("gsm8k_fewshot_codex.jsonl", ()), ("svamp_fewshot_codex.jsonl", ("--abs",)))
COMPARED = ("status", "value", "correct")


def _busy() -> None:
    while True:
        pass


class Hog:
    """`count` busy-loop processes, for the duration of a `with` block."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.processes: list[multiprocessing.Process] = []

    def __enter__(self) -> Hog:
        context = multiprocessing.get_context("fork")
        self.processes = [context.Process(target=_busy, daemon=True) for _ in range(self.count)]
        for process in self.processes:
            process.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for process in self.processes:
            process.kill()
        for process in self.processes:
            process.join()


def check(
    path: Path, options: tuple[str, ...], out: Path, extra: list[str]
) -> tuple[list[dict[str, Any]], dict[str, Any], float]:
    """One `potrun check` run: its records, its summary, its wall time."""
    summary = out.with_suffix(".summary.json")
    command = [
        sys.executable,
        "-m",
        "potrun.cli",
        "check",
        str(path),
        "--compare",
        "pot",
        *options,
        "--quiet",
        "--out",
        str(out),
        "--summary-json",
        str(summary),
        *extra,
    ]
    started = time.perf_counter()
    subprocess.run(command, check=True)
    elapsed = time.perf_counter() - started
    records = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    return records, json.loads(summary.read_text()), elapsed


def differences(idle: list[dict[str, Any]], busy: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """(line, idle's fields, busy's fields) for every record whose status, value or correctness differs."""
    if len(idle) != len(busy):
        raise SystemExit(f"the runs wrote {len(idle)} and {len(busy)} records")
    found = []
    for a, b in zip(idle, busy, strict=True):
        first, second = tuple(a.get(k) for k in COMPARED), tuple(b.get(k) for k in COMPARED)
        if first != second:
            found.append((a.get("line"), first, second))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cores = len(os.sched_getaffinity(0))
    parser.add_argument("--hogs", type=int, default=2 * cores, help=f"busy processes (default {2 * cores})")
    parser.add_argument("--workers", type=int, default=None, help="potrun's --workers (default: its own)")
    args, extra = parser.parse_known_args(argv)
    if args.workers:
        extra += ["--workers", str(args.workers)]
    differing = 0
    with tempfile.TemporaryDirectory(prefix="potrun-load-") as directory:
        for name, options in FILES:
            path = POT / name
            idle, idle_summary, idle_s = check(path, options, Path(directory) / f"idle-{name}", extra)
            with Hog(args.hogs):
                busy, busy_summary, busy_s = check(path, options, Path(directory) / f"busy-{name}", extra)
            found = differences(idle, busy)
            differing += len(found)
            finished = [r for r in idle if r["status"] != "timeout"]
            slowest = sorted(finished, key=lambda r: r.get("cpu_s") or 0.0, reverse=True)[:3]
            print(
                f"{name}: accuracy idle {idle_summary['accuracy']:.4f} ({idle_s:.1f} s), under {args.hogs} busy "
                f"processes {busy_summary['accuracy']:.4f} ({busy_s:.1f} s); {len(found)} of {len(idle)} "
                f"records differ; timeouts idle {idle_summary['timeouts']}, busy {busy_summary['timeouts']}"
            )
            print(
                "  most CPU among those that finished (idle): "
                + ", ".join(
                    f"line {r['line']} {r['status']} {r['cpu_s']:.2f} s cpu / {r['wall_s']:.2f} s wall" for r in slowest
                )
            )
            for line, first, second in found[:20]:
                print(f"  line {line}: idle {first}, busy {second}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
