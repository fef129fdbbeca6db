"""Which system calls a worker and its runners make, measured: the basis of seccomp.py's allow-list.

Runs programs through a process-backend sandbox under `strace -f` (one trace file per process), then
keeps the processes of the worker's tree from the moment its seccomp filter is installed (the worker
after its `seccomp(2)`/`prctl(PR_SET_SECCOMP)`, and every process forked after it), and counts their
system calls. Two corpora: everyday programs (GSM8K's PoT programs, numpy, sympy, pandas, trusted
programs that write files, start threads and processes), whose calls the allow-list must hold, and the
hostile corpus (/work/shared/data/hostile or --hostile), whose extra calls are listed for review: those
are refused unless a reason says otherwise.

    python bench/syscalls.py [--gsm8k N] [--hostile FILE]      # needs strace, root
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GSM8K = ROOT.parent.parent / "shared/data/pot/gsm8k_fewshot_codex.jsonl"
HOSTILE = ROOT.parent.parent / "shared/data/hostile/hostile_programs.jsonl"

EVERYDAY_TRUSTED = [
    "import numpy as np\nans = float(np.linalg.solve(np.eye(3) * 2, np.ones(3)).sum())\n",
    "import numpy as np\nx = np.random.default_rng(1).random((300, 300))\n"
    "ans = float(np.linalg.eigvals(x).real.max())\n",
    "import numpy as np\nans = float(np.fft.fft(np.arange(64)).real.sum())\n",
    "import sympy\nx = sympy.Symbol('x')\nans = int(sympy.solve(x**2 - 4, x)[-1])\n",
    "import sympy\nans = float(sympy.integrate(sympy.sin(sympy.Symbol('t')), (sympy.Symbol('t'), 0, 1)))\n",
    "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3], 'b': [4.0, 5.0, 6.0]})\nans = float(df.b.mean())\n",
    "import pandas as pd, io\nans = int(pd.read_csv(io.StringIO('a,b\\n1,2\\n3,4')).a.sum())\n",
    "import decimal, fractions, statistics, datetime\n"
    "ans = float(statistics.median([decimal.Decimal(1), 2, 3]) + fractions.Fraction(1, 3))\n",
    "import datetime\nans = datetime.datetime(2020, 1, 1).toordinal()\n",
    "with open('data.txt', 'w') as f:\n    f.write('12')\nans = int(open('data.txt').read())\n",
    "import os, tempfile\nd = tempfile.mkdtemp(dir='.')\nos.rmdir(d)\nans = len(os.listdir('.'))\n",
    "import threading\nout = []\nt = threading.Thread(target=lambda: out.append(1))\n"
    "t.start()\nt.join()\nans = len(out)\n",
    "import subprocess, sys\n"
    "ans = int(subprocess.run([sys.executable, '-c', 'print(3)'], capture_output=True, text=True).stdout)\n",
    "import multiprocessing as mp\nwith mp.get_context('fork').Pool(2) as pool:\n"
    "    ans = sum(pool.map(abs, [-1, -2]))\n",
    "import concurrent.futures as cf\nwith cf.ThreadPoolExecutor(2) as ex:\n    ans = sum(ex.map(abs, [-1, -2]))\n",
    "import os\nr, w = os.pipe()\nos.write(w, b'x')\nans = len(os.read(r, 1))\n",
    "import time\ntime.sleep(0.01)\nans = int(time.time() > 0)\n",
    "import random\nans = random.Random(1).randint(1, 9)\n",
    "import sys\nprint('x', file=sys.stderr)\nans = len(sys.argv)\n",
    "import json, re, math\nans = len(json.dumps({'a': math.pi})) + len(re.findall('a', 'aa'))\n",
    "ans = input()\n",
    "import platform, socket\nans = platform.node() + socket.gethostname()\n",
    "import resource\nans = resource.getrlimit(resource.RLIMIT_AS)[0]\n",
    "x = bytearray(50 * 1024 * 1024)\nans = len(x)\n",
    "while True:\n    pass\n",
    "import os\nos._exit(3)\n",
    "raise MemoryError\n",
]
EVERYDAY_RESTRICTED = [
    "import numpy as np\nclass A:\n    pass\nans = float(np.linalg.det(np.eye(3) * 2))\n",
    "import sympy\nans = int(sympy.factorial(20))\n",
    "import math\nans = math.comb(30, 7)\n",
    "def solution():\n    return sum(i * i for i in range(1000))\n",
    "print(1 / 3)\n",
    "ans = [1, 2][5]\n",
    "x = [0] * (40 * 1024 * 1024)\nans = len(x)\n",
    "while True:\n    pass\n",
]


def gsm8k_programs(count: int) -> list[str]:
    programs = []
    with open(GSM8K, encoding="utf-8") as lines:
        for line in lines:
            programs.append(json.loads(line)["generated"][0])
            if len(programs) >= count:
                break
    return programs


def run_corpus(corpus: str, gsm8k: int, hostile: Path) -> None:
    """In the traced process: run the corpus's programs through sandboxes of both policies and tiers."""
    from potrun import Sandbox

    for policy in ("restricted", "trusted"):
        for isolation in ("warm", "fork"):
            with Sandbox(policy=policy, isolation=isolation, workers=1, timeout=1.0, memory_mb=1024) as box:
                if corpus == "everyday":
                    programs = gsm8k_programs(gsm8k) + EVERYDAY_RESTRICTED
                    if policy == "trusted":
                        programs += EVERYDAY_TRUSTED
                    requests = [box.request(source, stdin="5\n" if "input" in source else None) for source in programs]
                else:
                    with open(hostile, encoding="utf-8") as lines:
                        programs = [json.loads(line)["code"] for line in lines]
                    requests = [box.request(source) for source in programs]
                for _ in box.run_requests(requests):
                    pass


_CALL = re.compile(r"^(?:\[pid\s+\d+\]\s+)?(?:\d+\.\d+\s+)?([a-z_0-9]+)\(")
# (a worker is init of its own PID namespace: --decode-pids=pidns gives strace's pid beside its own)
_FORKED = re.compile(r"^(?:clone3?|fork|vfork)\(.*\)\s+=\s+(\d+)(?: /\* (\d+) in strace's PID NS \*/)?")


def worker_calls(directory: Path) -> collections.Counter[str]:
    """The system calls of the worker's processes after its filter was installed, from `strace -ff`'s
    files (trace.PID): the worker is the process whose trace runs potrun.sandbox.inside.worker and installs
    the filter; its descendants are followed through the pids that its clone calls returned."""
    traces = {int(path.suffix[1:]): path.read_text(errors="replace").splitlines() for path in directory.iterdir()}
    children: dict[int, list[tuple[int, int]]] = collections.defaultdict(list)  # pid -> (line index, child)
    for pid, lines in traces.items():
        for index, line in enumerate(lines):
            forked = _FORKED.match(line)
            if forked:
                children[pid].append((index, int(forked.group(2) or forked.group(1))))
    counts: collections.Counter[str] = collections.Counter()
    filtered: list[int] = []  # processes with the filter from their first line
    for pid, lines in traces.items():
        for index, line in enumerate(lines):
            if "SECCOMP_MODE_FILTER" in line or "PR_SET_SECCOMP" in line:
                _count(lines[index + 1 :], counts)
                filtered.extend(child for at, child in children[pid] if at > index)
    seen = set()
    while filtered:
        pid = filtered.pop()
        if pid in seen or pid not in traces:
            continue
        seen.add(pid)
        _count(traces[pid], counts)
        filtered.extend(child for _, child in children[pid])
    return counts


def _count(lines: list[str], counts: collections.Counter[str]) -> None:
    for line in lines:
        match = _CALL.match(line)
        if match and not line.startswith("+++") and not line.startswith("---"):
            counts[match.group(1)] += 1


def traced(corpus: str, gsm8k: int, hostile: Path) -> collections.Counter[str]:
    with tempfile.TemporaryDirectory(prefix="potrun-strace-") as directory:
        command = [
            "strace", "-f", "-ff", "-qq", "--decode-pids=pidns", "-o", f"{directory}/trace",
            sys.executable, __file__, "--run", corpus, "--gsm8k", str(gsm8k), "--hostile", str(hostile),
        ]  # fmt: skip
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        return worker_calls(Path(directory))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gsm8k", type=int, default=200)
    parser.add_argument("--hostile", type=Path, default=HOSTILE)
    parser.add_argument("--run", choices=["everyday", "hostile"])
    args = parser.parse_args()
    if args.run:
        run_corpus(args.run, args.gsm8k, args.hostile)
        return
    from potrun.sandbox.kernel import seccomp

    allowed = set(getattr(seccomp, "ALLOWED", ()))
    everyday = traced("everyday", args.gsm8k, args.hostile)
    print(f"everyday programs: {len(everyday)} system calls")
    for name, count in sorted(everyday.items()):
        print(f"  {name:24} {count:8}  {'allowed' if name in allowed else 'REFUSED'}")
    hostile = traced("hostile", args.gsm8k, args.hostile)
    extra = {name: count for name, count in hostile.items() if name not in everyday}
    print(f"hostile corpus: {len(hostile)} system calls, {len(extra)} that everyday programs do not make:")
    for name, count in sorted(extra.items()):
        print(f"  {name:24} {count:8}  {'allowed' if name in allowed else 'refused'}")
    print(f"allowed but not seen: {sorted(allowed - set(everyday) - set(hostile))}")
    os.sys.stdout.flush()


if __name__ == "__main__":
    main()
