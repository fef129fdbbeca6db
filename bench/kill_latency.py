"""How soon a slot is free again after a program hits its time limit (issue 3: within 50 ms).

One worker; a program that busy-loops (or ignores SIGTERM and busy-loops) with a 0.5 s limit, then a
trivial program. Reported: the time from the limit to the trivial program's answer, median of N runs.

    python bench/kill_latency.py [--runs 20]
"""

from __future__ import annotations

import argparse
import statistics
import time

from potrun import Sandbox

LIMIT_S = 0.5
PROGRAMS = {
    "busy loop": "while True:\n    pass",
    "ignores SIGTERM": "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True:\n    pass",
}


def free_after_limit(box: Sandbox, hostile: str) -> float:
    started = time.perf_counter()
    results = list(box.run_many([hostile, "ans = 1"]))
    assert results[0].status.value == "timeout" and results[1].value == 1, results
    return time.perf_counter() - started - LIMIT_S


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    for policy, isolation in (("restricted", "warm"), ("trusted", "fork")):
        with Sandbox(policy=policy, isolation=isolation, workers=1, timeout=LIMIT_S) as box:
            box.run("ans = 0")
            for name, source in PROGRAMS.items():
                if policy == "restricted" and "signal" in source:
                    continue  # the restricted policy refuses `import signal` before it runs
                delays = [free_after_limit(box, source) for _ in range(args.runs)]
                print(
                    f"{policy:10} {isolation:5} {name:16} slot free {statistics.median(delays) * 1000:6.1f} ms "
                    f"after the limit (median of {args.runs}; max {max(delays) * 1000:.1f} ms)"
                )


if __name__ == "__main__":
    main()
