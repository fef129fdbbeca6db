"""What the seccomp filter (sandbox/kernel/seccomp.py) costs: a system call (getppid in a loop) and a fork (fork,
the child exits, wait), in forked children without a filter, with this filter, and with another
version's (`--compare-with`: a seccomp.py file, e.g. `git show REV:sandbox/kernel/seccomp.py > old.py`), in
rounds that alternate the kinds, the same run. Reported: the minimum over the rounds of each kind (the
least disturbed by the machine's load), and the differences.

    python bench/seccomp_cost.py [--rounds 8] [--calls 300000] [--forks 300] [--compare-with old.py]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time
from collections.abc import Callable
from types import ModuleType

from potrun.sandbox.kernel import seccomp


def load(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("previous_seccomp", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(install: Callable[[], bool] | None, calls: int, forks: int) -> tuple[float, float]:
    """In a fresh fork (a filter, once installed, cannot be removed): ns per getppid, us per fork."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        if install is not None and not install():
            os._exit(1)
        call = os.getppid
        started = time.perf_counter()
        for _ in range(calls):
            call()
        per_call = (time.perf_counter() - started) / calls * 1e9
        started = time.perf_counter()
        for _ in range(forks):
            child = os.fork()
            if child == 0:
                os._exit(0)
            os.waitpid(child, 0)
        per_fork = (time.perf_counter() - started) / forks * 1e6
        os.write(write, repr((per_call, per_fork)).encode())
        os._exit(0)
    os.close(write)
    answer = os.read(read, 128)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise SystemExit("the filter could not be installed here")
    per_call, per_fork = (float(part) for part in answer.decode().strip("()").split(","))
    return per_call, per_fork


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=300_000)
    parser.add_argument("--forks", type=int, default=300)
    parser.add_argument("--compare-with", help="another version's seccomp.py")
    args = parser.parse_args()
    kinds: dict[str, tuple[Callable[[], bool] | None, int]] = {"plain": (None, 0)}
    kinds["this filter"] = (seccomp.install, len(seccomp.filter_program() or b"") // 8)
    if args.compare_with:
        previous = load(args.compare_with)
        kinds["previous filter"] = (previous.install, len(previous.filter_program() or b"") // 8)
    best: dict[str, tuple[float, float]] = {}
    for _ in range(args.rounds):
        for name, (install, _size) in kinds.items():
            call, fork = measure(install, args.calls, args.forks)
            seen = best.get(name, (call, fork))
            best[name] = (min(seen[0], call), min(seen[1], fork))
    plain_call, plain_fork = best["plain"]
    for name, (call, fork) in best.items():
        size = kinds[name][1]
        print(
            f"{name:16} getppid {call:6.0f} ns ({call - plain_call:+5.0f}), fork+exit+wait {fork:7.1f} us "
            f"({fork - plain_fork:+6.1f})" + (f"  [{size} instructions]" if size else "")
        )


if __name__ == "__main__":
    main()
