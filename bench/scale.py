"""Scale benchmark of `potrun check` (issue 8): a large input with flat parent memory, and Ray beside local.

    python bench/scale.py                         # 10,000 and 1,000,000 records, local engine; Ray on 10,000
    python bench/scale.py --big 200000 --no-ray   # a shorter run

The records are the PoT paper's GSM8K and SVAMP generations (../shared/data/pot), repeated. A first
pass drops the few programs that run past --timeout (brute-force loops: left in, they would measure
the timeout, not the runtime). Each copy gets its own id and a `# copy N` comment, so that every
program is distinct and the dedup cache cannot serve it: the runs measure execution (they also pass
--no-cache; `--cached` runs the identical copies with the cache instead).

Each run is a `potrun check` subprocess writing --out and --summary-json; its resident memory is read
from /proc every half second (VmRSS; VmHWM is the peak). Reported: records, programs/s (the summary's,
from when the engine is ready), wall time of the whole command, the parent's peak RSS, and its RSS at
10%, 50% and 90% of the run (flat memory: these stay level). Targets (issue 8): the big run within 10%
of the small run's throughput, the parent under 300 MB; Ray within 25% of local on the same file.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

REPO = Path(__file__).resolve().parents[1]
POT = REPO.parent / "shared" / "data" / "pot"
SOURCES = ("gsm8k_fewshot_codex.jsonl", "svamp_fewshot_codex.jsonl")


def base_records(workdir: Path, timeout: float, workers: int) -> list[dict[str, Any]]:
    """The PoT records that have a program which finishes within `timeout`."""
    records = []
    for name in SOURCES:
        with open(POT / name, encoding="utf-8") as handle:
            records += [json.loads(line) for line in handle if line.strip()]
    records = [r for r in records if r.get("generated")]
    probe = workdir / "base.jsonl"
    probe.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = workdir / "base.out.jsonl"
    command = [
        sys.executable,
        "-m",
        "potrun.cli",
        "check",
        str(probe),
        "--out",
        str(out),
        "--quiet",
        "--timeout",
        str(timeout),
        "--workers",
        str(workers),
    ]
    subprocess.run(command, check=True)
    statuses = [json.loads(line)["status"] for line in out.read_text().splitlines()]
    kept = [r for r, status in zip(records, statuses, strict=True) if status != "timeout"]
    print(f"base: {len(kept)} records ({len(records) - len(kept)} dropped: past {timeout} s)", file=sys.stderr)
    return kept


def write_input(path: Path, base: list[dict[str, Any]], count: int, distinct: bool) -> Path:
    with open(path, "w", encoding="utf-8") as handle:
        for k in range(count):
            record = dict(base[k % len(base)])
            copy = k // len(base)
            record["id"] = k
            if distinct:
                record["generated"] = [f"{text}\n# copy {copy}" for text in record["generated"]]
            handle.write(json.dumps(record) + "\n")
    return path


def rss_kib(pid: int) -> tuple[int, int]:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0, 0
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def run_check(preds: Path, workdir: Path, label: str, extra: list[str]) -> dict[str, Any]:
    out, summary = workdir / f"{label}.out.jsonl", workdir / f"{label}.summary.json"
    command = [
        sys.executable,
        "-m",
        "potrun.cli",
        "check",
        str(preds),
        "--out",
        str(out),
        "--summary-json",
        str(summary),
        "--quiet",
        *extra,
    ]
    started = time.perf_counter()
    process = subprocess.Popen(command)
    samples: list[int] = []
    peak = 0
    while process.poll() is None:
        current, high = rss_kib(process.pid)
        if current:
            samples.append(current)
            peak = max(peak, high)
        time.sleep(0.5)
    wall = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"{label}: potrun check exited {process.returncode}")
    data = json.loads(summary.read_text())
    at = (lambda f: round(samples[int(f * (len(samples) - 1))] / 1024, 1)) if samples else (lambda f: None)
    row = {
        "run": label,
        "records": data["total"],
        "programs_per_s": data["programs_per_s"],
        "elapsed_s": data["elapsed_s"],
        "wall_s": round(wall, 1),
        "peak_rss_mb": round(peak / 1024, 1),
        "rss_mb_at_10_50_90": [at(0.1), at(0.5), at(0.9)],
        "cache_hits": data.get("cache_hits"),
        "accuracy": data["accuracy"],
    }
    print(json.dumps(row), file=sys.stderr)
    out.unlink()
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--big", type=int, default=1_000_000, help="0: skip the big run")
    parser.add_argument("--ray-records", type=int, default=None, help="records for local vs Ray (default: --small)")
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--cached", action="store_true", help="identical copies, served by the cache")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each small measurement (median)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=1.0)
    parser.add_argument("--workdir", default=None, help="where the generated files go (default: a temp dir)")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="potrun-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    base = base_records(workdir, args.timeout, args.workers)
    common = ["--workers", str(args.workers), "--timeout", str(args.timeout)]
    common += [] if args.cached else ["--no-cache"]
    distinct = not args.cached
    rows = []
    small = write_input(workdir / "small.jsonl", base, args.small, distinct)
    small_runs = [run_check(small, workdir, f"local-{args.small}", common) for _ in range(args.repeat)]
    rows += small_runs
    if args.big:
        big = write_input(workdir / "big.jsonl", base, args.big, distinct)
        rows.append(run_check(big, workdir, f"local-{args.big}", common))
        big.unlink()
        small_runs.append(run_check(small, workdir, f"local-{args.small}", common))  # after it too: drift
        rows.append(small_runs[-1])
        ratio = rows[-2]["programs_per_s"] / median(r["programs_per_s"] for r in small_runs)
        print(
            f"big/small throughput: {ratio:.3f} (target >= 0.90; small: median of {len(small_runs)} runs); "
            f"parent peak RSS {rows[-2]['peak_rss_mb']} MB (target < 300)"
        )
    if not args.no_ray:
        count = args.ray_records or args.small
        preds = small if count == args.small else write_input(workdir / "ray.jsonl", base, count, distinct)
        ratios = []
        for _ in range(args.repeat):  # alternated, so that both see the same machine
            local = run_check(preds, workdir, f"local-{count}", common)
            remote = run_check(preds, workdir, f"ray-{count}", [*common, "--engine", "ray"])
            rows += [local, remote]
            ratios.append(remote["programs_per_s"] / local["programs_per_s"])
        print(f"ray/local throughput: median {median(ratios):.3f} of {[round(r, 3) for r in ratios]} (target >= 0.75)")
    Path(workdir / "rows.json").write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
