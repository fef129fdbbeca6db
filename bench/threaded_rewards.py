"""Per-sample reward calls from many threads against one batched call, on the same completions.

    python bench/threaded_rewards.py [FILE] [--threads 32] [--rounds 3] [--harness loop|executor] [--cached]

FILE: JSON Lines with `generated` (a list of completions; the first is used) and `answer` (the
PoT files in ../shared/data/pot/). Completions whose program runs longer than 0.1 s (a probe run) are
left out, as `potrun bench` leaves out slow programs: they measure the programs, not the calls.
Each round starts a fresh shared sandbox (`potrun.rewards.configure`,
so no round is served by an earlier round's cache), warms it up on other programs, then scores the
completions once batched (`pot_reward(completions, answer=golds)`) and once as one call per completion
from `--threads` threads. `--harness loop`: each thread calls in a loop
over its share (a reward server's handler threads); `executor`: a ThreadPoolExecutor task per call
(its futures' own hand-offs, ~26 us a call here, are counted too). Prints completions/s, the ratios
to batched (median over rounds), the parent's CPU per completion (batched, it is the `--work-us` of
bench/handoff_floor.py's floor for the same hour), and checks that every per-sample reward equals
the batched one.
`--cached`: both are timed with every result already in the sandbox's cache, so no program runs and
no call waits for the pool: what is left is the pipeline's own work and the threads' (a ceiling for
any sandbox under per-sample calls, however fast).
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from potrun import rewards

DEFAULT_FILE = Path(__file__).resolve().parents[1].parent / "shared/data/pot/gsm8k_fewshot_codex.jsonl"


def load(path: Path) -> tuple[list[str], list[float]]:
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r["generated"][0] for r in records], [r["answer"] for r in records]


def quick(completions: list[str], golds: list[float]) -> tuple[list[str], list[float]]:
    probe = rewards.score_records(completions, golds)
    kept = [k for k, result in enumerate(probe) if result.wall_s < 0.1 and result.status != "timeout"]
    return [completions[k] for k in kept], [golds[k] for k in kept]


def timed(function, *args):  # type: ignore[no-untyped-def]
    """(value, wall seconds, this process's CPU seconds) of one call."""
    start, cpu = time.perf_counter(), time.process_time()
    value = function(*args)
    return value, time.perf_counter() - start, time.process_time() - cpu


def per_sample(completions: list[str], golds: list[float], threads: int, harness: str = "loop") -> list[float]:
    """One reward call per completion from `threads` threads: each thread calling in a loop over its
    share (a reward server's handler threads), or tasks of a ThreadPoolExecutor (whose own hand-offs,
    a future per call, cost ~26 us a call here: they are counted too)."""
    pairs = list(zip(completions, golds, strict=True))
    if harness == "executor":
        with ThreadPoolExecutor(threads) as pool:
            futures = [pool.submit(rewards.pot_reward, [c], answer=[g]) for c, g in pairs]
            return [future.result()[0] for future in futures]
    rewarded = [0.0] * len(pairs)

    def share(start: int) -> None:
        for k in range(start, len(pairs), threads):
            rewarded[k] = rewards.pot_reward([pairs[k][0]], answer=[pairs[k][1]])[0]

    workers = [threading.Thread(target=share, args=(start,)) for start in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return rewarded


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("file", nargs="?", type=Path, default=DEFAULT_FILE)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--harness", choices=("loop", "executor"), default="loop")
    parser.add_argument("--cached", action="store_true", help="time both with every result cached")
    args = parser.parse_args()
    completions, golds = quick(*load(args.file))
    warm_up = [f"def solution():\n    return {k} * 3" for k in range(500)]
    ratios, batched_cpu_us, wrong = [], [], 0
    n = len(completions)

    def fresh() -> None:
        rewards.configure(workers=2)  # a fresh sandbox and cache for each measurement
        rewards.pot_reward(warm_up, answer=[3 * k for k in range(500)])
        if args.cached:
            rewards.pot_reward(completions, answer=golds)  # every result in the cache

    for round_number in range(args.rounds):
        fresh()
        batched, batched_s, batched_cpu_s = timed(lambda: rewards.pot_reward(completions, answer=golds))
        fresh()
        threaded, threaded_s, threaded_cpu_s = timed(per_sample, completions, golds, args.threads, args.harness)
        wrong += sum(1 for a, b in zip(batched, threaded, strict=True) if a != b)
        ratios.append(batched_s / threaded_s)
        batched_cpu_us.append(1e6 * batched_cpu_s / n)
        print(
            f"round {round_number + 1}: batched {n / batched_s:,.0f}/s, {args.threads} threads per sample "
            f"{n / threaded_s:,.0f}/s, ratio {batched_s / threaded_s:.2f}, correct {sum(batched):.0f}/{n}; "
            f"the parent's CPU per completion {1e6 * batched_cpu_s / n:.0f} us batched, "
            f"{1e6 * threaded_cpu_s / n:.0f} us per sample"
        )
    rewards.close()
    print(
        json.dumps(
            {
                "completions": len(completions),
                "threads": args.threads,
                "harness": args.harness,
                "cached": args.cached,
                "median_ratio_threaded_to_batched": round(statistics.median(ratios), 3),
                # the work to give bench/handoff_floor.py --work-us for the floor under these calls
                "median_parent_cpu_us_batched": round(statistics.median(batched_cpu_us)),
                "rewards_differing": wrong,
            }
        )
    )


if __name__ == "__main__":
    main()
