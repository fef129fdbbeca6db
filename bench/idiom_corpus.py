"""The share of the idiom corpus the restricted policy refuses (issue 37, item 3).

    python bench/idiom_corpus.py            # the whole corpus: idioms, DocMath, peers' cases, PoT GSM8K+SVAMP
    python bench/idiom_corpus.py --no-pot   # without the 2,320 PoT programs (seconds instead of minutes)

The corpus is `tests/policies/idioms.py`: the idioms written there (everyday Python models write: `__main__` guards,
star imports, typing, dataclasses, f-strings, Decimal contexts...) and the programs of the shared data as
potrun extracts them. Each program runs through the restricted policy in a fork (process backend, the
policy's compile-time rules and run-time guards decide; a refusal is `policy_violation`). Prints the
share refused, overall and per source, and each refused program with the rule that refused it.
Exits 1 when the refused set is not the reviewed one (`IDIOMS` marked refused, `REFUSED_DATA`).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests" / "policies"), str(REPO / "tests")]  # idioms.py, and the paths.py it reads

from idioms import IDIOMS, REFUSED_DATA, data_programs, idiom_programs  # noqa: E402

from potrun import Sandbox  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-pot", action="store_true", help="leave out the PoT GSM8K and SVAMP programs")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    programs = [*idiom_programs(), *data_programs(pot=not args.no_pot)]
    with Sandbox("process", policy="restricted", isolation="fork", workers=args.workers, timeout=5.0) as box:
        results = list(box.run_many([source for _, source in programs]))
    refused = {
        pid: result
        for (pid, _), result in zip(programs, results, strict=True)
        if result.status.value == "policy_violation"
    }
    by_source = Counter(pid.split(":")[0] for pid, _ in programs)
    refused_by_source = Counter(pid.split(":")[0] for pid in refused)
    print(f"idiom corpus: {len(programs)} programs, {len(refused)} refused ({len(refused) / len(programs):.2%})")
    for source, count in sorted(by_source.items()):
        print(f"  {source:10} {refused_by_source[source]:5} / {count:5} refused")
    for pid, result in sorted(refused.items()):
        print(f"  refused {pid}: {result.error_type}: {(result.error or '')[:100]}")
    expected = {f"idiom:{idiom.id}" for idiom in IDIOMS if idiom.expect == "refused"} | set(REFUSED_DATA)
    if not args.no_pot or not any(pid.startswith(("gsm8k:", "svamp:")) for pid in REFUSED_DATA):
        expected = {pid for pid in expected if not (args.no_pot and pid.startswith(("gsm8k:", "svamp:")))}
    if set(refused) != expected:
        print(f"refused but not reviewed: {sorted(set(refused) - expected)}")
        print(f"reviewed as refused but admitted: {sorted(expected - set(refused))}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
