"""The parent's memory behind a slow record whose followers all return large values (issue 14, class 6).

    python bench/parent_memory.py [--records 400] [--value-bytes 900000] [--slow-s 8]

The first record runs for --slow-s seconds; every other one returns a string of --value-bytes (near the
1 MB output limit). Results must leave `potrun check` in input order, so everything behind the slow one
waits: potrun holds at most MAX_AHEAD_BYTES of answers (sandbox/parent/pool.py) and then reads only the worker
with the slow one, the others waiting on their pipes. Reported: the `potrun check` process's peak RSS
(VmHWM) and its RSS sampled every 0.2 s. Target: under 100 MB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=400)
    parser.add_argument("--value-bytes", type=int, default=900_000)
    parser.add_argument("--slow-s", type=float, default=8.0)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        preds = Path(directory) / "preds.jsonl"
        with preds.open("w") as handle:
            slow = f"import time\nend = time.time() + {args.slow_s}\nwhile time.time() < end:\n    pass\nans = 0"
            handle.write(json.dumps({"id": 0, "code": slow, "answer": 0}) + "\n")
            for index in range(1, args.records):
                code = f"# {index}\nans = 'x' * {args.value_bytes}"
                handle.write(json.dumps({"id": index, "code": code, "answer": "x"}) + "\n")
        command = [
            sys.executable,
            "-m",
            "potrun.cli",
            "check",
            str(preds),
            "--policy",
            "trusted",
            "--out",
            str(Path(directory) / "out.jsonl"),
            "--workers",
            str(args.workers),
            "--timeout",
            str(args.slow_s + 20),
            "--no-cache",
        ]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        samples = []
        peak = 0
        while process.poll() is None:
            status = _status(process.pid)
            if status:
                samples.append(status.get("VmRSS", 0))
                peak = max(peak, status.get("VmHWM", 0))
            time.sleep(0.2)
        with open(Path(directory) / "out.jsonl") as out:
            lines = sum(1 for _ in out)
    print(
        json.dumps(
            {
                "records": args.records,
                "lines_written": lines,
                "exit": process.returncode,
                "peak_rss_mb": round(peak / 1024, 1),
                "rss_mb_max_sampled": round(max(samples, default=0) / 1024, 1),
            }
        )
    )


def _status(pid: int) -> dict[str, int]:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    fields = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(rest.split()[0])
    return fields


if __name__ == "__main__":
    main()
