"""Cost of the warm tier's verifier and of the warm path, on the PoT files, in one process.

    python bench/pure_verifier.py [--rounds R]

1. Every generated program of ../shared/data/pot that compiles: the share `why_not_pure` admits, the
   reasons of the others, and the verification's cost per program (median and p99 over programs, each
   timed over 20 calls).
2. The quick programs (a calibration pass keeps those under 1 ms of CPU; the few endless loops would
   measure nothing): CPU time per program of plain `exec(compile(...))` beside the warm path
   (compile, why_not_pure, pure_globals, exec_pure, end_program), rounds alternating, the minimum and
   median round reported, and their ratio. CPU time, since other processes share the machine.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import gc
import io
import json
import signal
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from potrun.policies import pure

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "pot"
FILES = ("gsm8k_fewshot_codex.jsonl", "svamp_fewshot_codex.jsonl")


class _Slow(Exception):
    pass


def programs() -> list[str]:
    found = []
    for name in FILES:
        for line in (DATA / name).read_text().splitlines():
            for source in json.loads(line).get("generated") or ():
                try:
                    compile(source, "<program>", "exec")
                except SyntaxError:
                    continue
                found.append(source)
    return found


def quick(sources: list[str]) -> list[str]:
    """The programs that finish within 1 ms of CPU (a CPU timer stops the endless ones at 50 ms)."""

    def stop(signum: int, frame: object) -> None:
        raise _Slow

    signal.signal(signal.SIGVTALRM, stop)
    kept = []
    with contextlib.redirect_stdout(io.StringIO()):
        for source in sources:
            start = time.process_time()
            signal.setitimer(signal.ITIMER_VIRTUAL, 0.05)
            try:
                exec(compile(source, "<program>", "exec"), {"__name__": "__main__"})
            except (Exception, _Slow):
                pass
            finally:
                signal.setitimer(signal.ITIMER_VIRTUAL, 0)
            if time.process_time() - start < 0.001:
                kept.append(source)
    return kept


def plain(source: str) -> None:
    namespace = {"__name__": "__main__"}
    try:
        exec(compile(source, "<program>", "exec"), namespace)
    except Exception:
        pass


def warm(source: str) -> None:
    code = compile(source, "<program>", "exec")
    if pure.why_not_pure(code) is None:
        namespace = pure.pure_globals()
        try:
            pure.exec_pure(code, namespace)
        except Exception:
            pass
        pure.end_program(namespace)


def cpu_per_program(run: Callable[[str], None], sources: list[str]) -> float:
    with contextlib.redirect_stdout(io.StringIO()):
        start = time.process_time()
        for source in sources:
            run(source)
        return (time.process_time() - start) / len(sources) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()

    sources = programs()
    codes = [compile(source, "<program>", "exec") for source in sources]
    reasons = collections.Counter(r for r in map(pure.why_not_pure, codes) if r is not None)
    admitted = len(codes) - sum(reasons.values())
    costs = []
    for code in codes:
        start = time.perf_counter_ns()
        for _ in range(20):
            pure.why_not_pure(code)
        costs.append((time.perf_counter_ns() - start) / 20 / 1000)
    costs.sort()
    print(
        f"{len(codes)} programs compile; {admitted} proven pure ({admitted / len(codes):.1%}); others: {dict(reasons)}"
    )
    print(f"why_not_pure: median {costs[len(costs) // 2]:.2f} us, p99 {costs[int(len(costs) * 0.99)]:.2f} us")

    fast = quick(sources)
    pure.prepare_proxies()
    gc.collect()
    gc.freeze()
    rounds: dict[str, list[float]] = {"plain": [], "warm": []}
    for _ in range(args.rounds):
        rounds["plain"].append(cpu_per_program(plain, fast))
        rounds["warm"].append(cpu_per_program(warm, fast))
    for name, values in rounds.items():
        print(
            f"{name}: {len(fast)} quick programs, CPU per program min {min(values):.1f} us, "
            f"median {statistics.median(values):.1f} us"
        )
    ratio = min(rounds["plain"]) / min(rounds["warm"])
    print(f"warm path at {ratio:.2f}x plain exec (min rounds)")


if __name__ == "__main__":
    main()
