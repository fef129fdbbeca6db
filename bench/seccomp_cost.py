"""What the seccomp filter (sandbox/seccomp.py) costs a system call: getppid in a loop, in forked
children with and without the filter, the same run. Reported: ns per call, the minimum over N children
of each kind (the least disturbed by the machine's load), and the difference.

    python bench/seccomp_cost.py [--children 8] [--calls 300000]
"""

from __future__ import annotations

import argparse
import os
import time

from potrun.sandbox import seccomp


def ns_per_call(filtered: bool, calls: int) -> float:
    """In a fresh fork (the filter, once installed, cannot be removed), ns per getppid."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        if filtered and not seccomp.install():
            os._exit(1)
        call = os.getppid
        started = time.perf_counter()
        for _ in range(calls):
            call()
        os.write(write, repr((time.perf_counter() - started) / calls * 1e9).encode())
        os._exit(0)
    os.close(write)
    answer = os.read(read, 64)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise SystemExit("the filter could not be installed here")
    return float(answer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--children", type=int, default=8)
    parser.add_argument("--calls", type=int, default=300_000)
    args = parser.parse_args()
    plain = min(ns_per_call(False, args.calls) for _ in range(args.children))
    filtered = min(ns_per_call(True, args.calls) for _ in range(args.children))
    instructions = len(seccomp.filter_program() or b"") // 8
    print(f"getppid: {plain:.0f} ns plain, {filtered:.0f} ns filtered ({instructions} instructions)")
    print(f"the filter costs a system call {filtered - plain:+.0f} ns")


if __name__ == "__main__":
    main()
