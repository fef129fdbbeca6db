"""A worker's memory after many fork-tier programs with names of their own (issue 35, item 4).

From Python 3.12 on, every string the compiler interns (names, identifier-like constants) is immortal
in the process that compiled it: a worker that compiled its forks' programs ahead grew with every new
name (400 programs of 1,500 names each: 148 MB of the worker tree on 3.13 against 42 MB on 3.11). The
worker's memory must not depend on the programs it has seen. This runs PROGRAMS fork-tier programs,
each with NAMES names no other has, through a one-worker sandbox, and prints the resident memory of
the worker's process tree (the worker and its fork server; forks come and go) before and after.

    python bench/worker_names.py [--programs 400] [--names 1500]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        tree.setdefault(int(fields[1]), []).append(int(entry.name))
    return tree


def tree_rss_mb(root: int) -> float:
    """Resident memory of the processes below `root` (not root itself), in MB."""
    tree, total, stack = _children(), 0, list(_children().get(root, []))
    while stack:
        pid = stack.pop()
        stack.extend(tree.get(pid, []))
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        total += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    return total / 1024


def program(index: int, names: int) -> str:
    lines = [f"v{index}_{n} = {n}" for n in range(names)]
    return "class Fork:\n    pass\n" + "\n".join(lines) + f"\nans = v{index}_{names - 1}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=400)
    parser.add_argument("--names", type=int, default=1500)
    args = parser.parse_args()
    from potrun import Sandbox

    with Sandbox(isolation="fork", workers=1, policy="trusted", timeout=10.0) as box:
        box.run("ans = 1")
        before = tree_rss_mb(os.getpid())
        sources = [program(index, args.names) for index in range(args.programs)]
        results = list(box.run_many(sources))
        bad = [result for result in results if result.status.value != "ok"]
        after = tree_rss_mb(os.getpid())
    print(
        f"python {sys.version.split()[0]}: worker tree {before:.1f} MB before, {after:.1f} MB after "
        f"{args.programs} fork programs of {args.names} names each (+{after - before:.1f} MB); "
        f"{len(bad)} not ok"
    )


if __name__ == "__main__":
    main()
