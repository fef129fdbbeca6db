"""The time a small batch takes through a warm pool: what a per-sample caller waits.

    python bench/small_batches.py [--workers 2] [--reps 40]

For each batch size, `--reps` batches of distinct quick programs (`return k * 7`) go through
`Sandbox.run_many` one after another, after a warm-up; prints the median time per batch and per
program. A worker that waited a fixed interval before looking for answers showed here as a jump of
that interval once two programs shared a worker (a batch of 3 on 2 workers).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from itertools import count

from potrun.sandbox.api import Sandbox

SIZES = (1, 2, 3, 4, 8, 16, 64)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--reps", type=int, default=40)
    args = parser.parse_args()
    numbers = count()  # every program distinct: no cache or compile reuse favours a size
    report: dict[str, dict[str, float]] = {}
    with Sandbox(workers=args.workers) as box:
        list(box.run_many(f"def solution():\n    return {next(numbers)}" for _ in range(200)))
        for size in SIZES:
            times = []
            for _ in range(args.reps):
                sources = [f"def solution():\n    return {next(numbers)} * 7" for _ in range(size)]
                start = time.perf_counter()
                results = list(box.run_many(sources))
                times.append(time.perf_counter() - start)
                assert all(result.status == "ok" for result in results), results
            batch_s = statistics.median(times)
            report[str(size)] = {"batch_ms": round(batch_s * 1e3, 3), "per_program_us": round(batch_s / size * 1e6)}
            print(f"batch of {size:>2}: {batch_s * 1e3:6.2f} ms, {batch_s / size * 1e6:5.0f} us per program")
    print(json.dumps({"workers": args.workers, "median_by_batch_size": report}))


if __name__ == "__main__":
    main()
