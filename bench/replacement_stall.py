"""What a worker's replacement costs its neighbours: throughput while one worker is killed again and again.

A pool of 2 process workers runs streams of 400 trivial programs (`ans = 1`) back to back for
`--seconds`, while another thread SIGKILLs one worker's process (slot 0's) every `--every` seconds, as
a hostile program that kills its worker would. Reported: programs completed per second, for this
version's pool and, with `--compare-with` (another version's pool.py, e.g. `git show
REV:sandbox/parent/pool.py > old_pool.py`), for that one, alternating rounds; and without kills, for
scale. A pool that starts the replacement on its dispatcher's thread stalls every stream for the
start (~0.3 s of a process worker's); one that starts it aside keeps the other worker fed.

    python bench/replacement_stall.py [--seconds 10] [--every 0.5] [--rounds 2] [--compare-with old_pool.py]
"""

from __future__ import annotations

import argparse
import importlib.util
import signal
import sys
import threading
import time
from types import ModuleType
from typing import Any

from potrun import Sandbox
from potrun.sandbox.parent import pool as this_pool

STREAM = 400


def load(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("potrun_previous_pool", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def killer(pool: Any, every: float, done: threading.Event, kills: list[int]) -> None:
    """SIGKILL slot 0's worker every `every` s (a worker being replaced is left alone: its process is
    gone, and Popen.send_signal never signals a reaped pid)."""
    while not done.wait(every):
        slot = pool.slots[0] if pool.slots else None
        if slot is None or getattr(slot, "starting", False):
            continue
        process = slot.conn.process
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            kills.append(process.pid)


def throughput(module: ModuleType, seconds: float, every: float | None) -> tuple[float, int, int]:
    """(programs/s, kills, workers replaced) for `module`'s Pool over `seconds`."""
    box = Sandbox(workers=2, timeout=5)
    pool = module.Pool(box._backend, box.workers)
    pool.start()
    box._pool = pool  # the Sandbox runs on this pool (it builds the requests, the pool runs them)
    done, kills = threading.Event(), []
    try:
        assert [r.value for r in box.run_many(["ans = 1"] * 20)] == [1] * 20
        thread = threading.Thread(target=killer, args=(pool, every, done, kills), daemon=True) if every else None
        if thread is not None:
            thread.start()
        completed, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            results = list(box.run_many(["ans = 1"] * STREAM))
            completed += sum(1 for r in results if r.value == 1)
        elapsed = time.perf_counter() - started
        done.set()
        if thread is not None:
            thread.join()
        return completed / elapsed, len(kills), pool.replaced
    finally:
        done.set()
        box.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--every", type=float, default=0.5, help="seconds between two kills")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--compare-with", help="another version's pool.py")
    args = parser.parse_args()
    versions = {"this pool": this_pool}
    if args.compare_with:
        versions["previous pool"] = load(args.compare_with)
    for name, module in versions.items():
        rate, _, _ = throughput(module, min(args.seconds, 3.0), None)
        print(f"{name:14} no kills:                   {rate:8.0f} programs/s")
    best: dict[str, list[tuple[float, int, int]]] = {name: [] for name in versions}
    for _ in range(args.rounds):
        for name, module in versions.items():
            best[name].append(throughput(module, args.seconds, args.every))
    for name, runs in best.items():
        rates = ", ".join(f"{rate:.0f}" for rate, _, _ in runs)
        kills = sum(k for _, k, _ in runs)
        replaced = sum(r for _, _, r in runs)
        print(
            f"{name:14} a kill every {args.every:g} s:      {max(r for r, _, _ in runs):8.0f} programs/s "
            f"(best of {args.rounds} rounds of {args.seconds:g} s: {rates}; {kills} kills, {replaced} replaced)"
        )


if __name__ == "__main__":
    main()
