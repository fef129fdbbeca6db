"""The neighbours invariant: a record's result alone equals its result right after any other program
in the same worker (issue 35; DESIGN.md, "Neighbours").

A differential harness over generated pairs. Victims are programs of every tier and kind (pure
arithmetic, numpy, sympy, fork-tier, trusted, and a fork that needs nearly its whole memory limit);
aggressors are programs that leave something behind or try to: memory that stays resident in
fragmenting patterns (sizes drawn by the generator, not only big arrays), CPU burners, output floods,
crashers, forkers, escape attempts, and programs that swallow their own refusal. Each victim runs alone
once, then right after each aggressor in the same one-worker sandbox (the pair goes in one batch, so
the victim follows the aggressor at once, as completions of one RL batch do), and its status, value
and other tier-independent fields must not change. A new pattern comes from a new seed
(POTRUN_NEIGHBOURS_SEED); the failing pair's seed and index are in the assertion message.

Limits are small so that the default run stays cheap: one worker per sandbox, a memory limit that a
fragmenting aggressor can fill, a short CPU limit for the aggressors that burn it.
"""

from __future__ import annotations

import os
import random
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from conftest import describe, same_value

from potrun import ExecResult, Sandbox, Status

SEED = int(os.environ.get("POTRUN_NEIGHBOURS_SEED", "35"))
MEMORY_MB = 384
VICTIM_TIMEOUT_S = 4.0  # far above any victim's CPU time: a victim never nears its limit
AGGRESSOR_TIMEOUT_S = 2.0  # time enough for the fragmenting patterns to be built...
BURNER_TIMEOUT_S = 0.3  # ...where the programs that burn CPU (or may) end
BURNERS = frozenset({"cpu-burner", "output-flood", "swallowed-refusal"})
# Every victim runs after every aggressor: one of each kind in the default run (12 x 12 pairs per
# (backend, policy), 288 per backend), five of each under the slow marker.
SLOW_AGGRESSORS = 60


@dataclass(frozen=True)
class Program:
    kind: str
    source: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.source[:300]!r}"


# -------------------------------------------------------------------------------------------- victims


def _victims(rng: random.Random) -> list[Program]:
    a, b, c = rng.randint(2, 10**6), rng.randint(2, 999), rng.randint(1, 50)
    n = rng.randint(5, 400)
    near_limit_mb = MEMORY_MB - 140  # a fork that needs nearly its whole limit (numpy's own ~100 MB on top)
    return [
        Program("pure", f"ans = {a} * {b} + {c}\n"),
        Program(
            "pure-function",
            f"def solution():\n    total = 0\n    for i in range({n}):\n        total += i * {c}\n    return total\n",
        ),
        Program("pure-printed", f"for i in range({c}):\n    pass\nprint({a} / {b})\n"),
        Program("pure-error", f"xs = [1, 2, 3]\nans = xs[{c + 3}]\n"),
        Program("numpy", f"import numpy as np\nans = float(np.arange({n}).sum() / {b})\n"),
        Program(
            "numpy-warm-large",
            f"import numpy as np\nx = np.ones({(MEMORY_MB // 3) * 131072})\nans = int(x.sum())\n",
        ),
        Program("sympy", f"import sympy\nans = int(sympy.factorial({c}) % {b})\n"),
        Program("fork-class", f"class Box:\n    size = {a}\n\ndef solution():\n    return Box.size + {c}\n"),
        Program(
            "fork-near-limit",
            "import numpy as np\nclass Big:\n    pass\n"
            f"x = np.ones({near_limit_mb * 131072})\nx[::512] = 2.0\nans = int(x[:1024].sum())\n",
        ),
        Program("trusted-scratch", "import os\nans = len(os.listdir('.'))\n"),
        Program("trusted-environment", "import os\nans = sorted(os.environ)\n"),
        Program("trusted-processes", "import os\nans = len([p for p in os.listdir('/proc') if p.isdigit()])\n"),
    ]


# ----------------------------------------------------------------------------------------- aggressors


def _fragmenting_numpy(rng: random.Random) -> str:
    """The issue's pattern, sizes drawn: a large block freed (glibc's mmap threshold rises past it),
    then many mid-sized arrays (on the heap now) and many small ones above them, which pin the heap."""
    count, size = rng.randint(8, 14), rng.randint(8, 16)
    first = size + rng.randint(2, 16)  # larger than each array after it: those then go to the heap
    small = rng.randint(20_000, 150_000)
    return (
        "import numpy as np\n"
        "def solution():\n"
        f"    a = np.ones({first * 131072})\n"
        "    del a\n"
        f"    big = [np.ones({size * 131072}) for _ in range({count})]\n"
        f"    small = [np.ones(k % 50 + 1) for k in range({small})]\n"
        "    del big\n"
        "    return len(small)\n"
    )


def _fragmenting_objects(rng: random.Random) -> str:
    """Python objects kept in a sparse pattern: every `step`-th of many, pinning the arenas they share."""
    many, step = rng.randint(200_000, 900_000), rng.randint(2, 64)
    return f"objs = [[i, i * 2.5] for i in range({many})]\nkeep = objs[::{step}]\nans = len(keep)\n"


def _fragmenting_strings(rng: random.Random) -> str:
    many, width = rng.randint(20_000, 200_000), rng.randint(10, 600)
    return (
        f"words = ['x' * ({width} + i % 97) for i in range({many})]\n"
        "table = {}\n"
        "for i in range(0, len(words), 3):\n"
        "    table[i] = words[i]\n"
        "ans = len(table)\n"
    )


def _near_limit_warm(rng: random.Random) -> str:
    """A pure program that needs most of the limit in small pieces: a warm runner's heap at its peak."""
    rows = rng.randint(300_000, 1_600_000)
    return f"rows = [(i, float(i), str(i)) for i in range({rows})]\nans = len(rows)\n"


def _memory_hog(rng: random.Random) -> str:
    mb = rng.choice([MEMORY_MB // 2, MEMORY_MB - 60, MEMORY_MB + 200])
    return f"class Hog:\n    pass\nx = bytearray({mb} * 1024 * 1024)\nans = len(x)\n"


def _cpu_burner(rng: random.Random) -> str:
    return rng.choice(
        [
            "while True:\n    pass\n",
            "class Spin:\n    pass\nwhile True:\n    pass\n",
            "total = 0\nwhile True:\n    try:\n        total += 1\n    except:\n        pass\n",
        ]
    )


def _output_flood(rng: random.Random) -> str:
    width = rng.randint(10, 5000)
    return rng.choice(
        [
            f"while True:\n    print('x' * {width})\n",
            f"while True:\n    try:\n        print('y' * {width})\n    except:\n        pass\n",
            f"ans = 'z' * {width * 1000}\n",
        ]
    )


def _swallowed_refusal(rng: random.Random) -> str:
    """A warm program that reaches what its proof did not cover, swallows the refusal, then misbehaves."""
    after = rng.choice(["while True:\n    pass\n", "while True:\n    print('flood' * 100)\n", "ans = 7\n"])
    return f"import numpy as np\ntry:\n    f = np.save\nexcept:\n    pass\n{after}"


def _crasher(rng: random.Random) -> str:
    return rng.choice(
        [
            f"import os\nos._exit({rng.randint(1, 200)})\n",
            "import ctypes\nctypes.string_at(0)\n",
            "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
            "import sys\nsys.setrecursionlimit(10**6)\ndef f(n):\n    return f(n + 1)\nf(0)\n",
        ]
    )


def _forker(rng: random.Random) -> str:
    count = rng.randint(1, 6)
    return rng.choice(
        [
            f"import os, time\nfor _ in range({count}):\n    if os.fork() == 0:\n        time.sleep(30)\n        os._exit(0)\nans = 1\n",
            "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(30)\n    os._exit(0)\nans = 2\n",
            f"import subprocess\nps = [subprocess.Popen(['sleep', '30']) for _ in range({count})]\nans = 3\n",
        ]
    )


def _leaver(rng: random.Random) -> str:
    """Leaves state where the next program might look: files, memory outside any address space, the
    environment, module attributes."""
    mb = rng.randint(1, 12)
    return rng.choice(
        [
            f"for i in range(40):\n    open(f'note{{i}}', 'w').write('x' * {mb * 1000})\nans = 1\n",
            f"import os\nfd = os.memfd_create('keep')\nos.write(fd, b'x' * ({mb} << 20))\nans = fd\n",
            "import os\nos.environ['LEAK'] = '1'\nos.putenv('LEAK2', '1')\nans = 1\n",
            "import math, numpy\nmath.pi = 3\nnumpy.pi = 3\nans = 1\n",
            "import sympy\nsympy.factorial = lambda n: 0\nans = 1\n",
            "import numpy as np\nnp.set_printoptions(precision=1)\nnp.seterr(all='raise')\nans = 1\n",
        ]
    )


def _escaper(rng: random.Random) -> str:
    return rng.choice(
        [
            "ans = ().__class__.__bases__[0].__subclasses__()\n",
            "g = (x for x in [1])\nans = g.gi_frame.f_back\n",
            "import numpy as np\nnp.ctypeslib\nans = 1\n",
            "ans = getattr(int, '__subclasses__')()\n",
            "import ctypes\nctypes.memset(0, 0, 8)\n",
            "import gc\nans = len([o for o in gc.get_objects() if type(o) is dict and 'ans' in o])\n",
        ]
    )


AGGRESSORS: dict[str, Callable[[random.Random], str]] = {
    "fragmenting-numpy": _fragmenting_numpy,
    "fragmenting-objects": _fragmenting_objects,
    "fragmenting-strings": _fragmenting_strings,
    "near-limit-warm": _near_limit_warm,
    "memory-hog": _memory_hog,
    "cpu-burner": _cpu_burner,
    "output-flood": _output_flood,
    "swallowed-refusal": _swallowed_refusal,
    "crasher": _crasher,
    "forker": _forker,
    "leaver": _leaver,
    "escaper": _escaper,
}


def generated_aggressors(seed: int, count: int) -> list[Program]:
    """`count` aggressors drawn by a seeded generator: each kind in turn, sizes and variants at random."""
    rng = random.Random(seed)
    kinds = list(AGGRESSORS)
    return [Program(kinds[index % len(kinds)], AGGRESSORS[kinds[index % len(kinds)]](rng)) for index in range(count)]


# ---------------------------------------------------------------------------------------------- runs


def comparable(result: ExecResult) -> tuple[object, ...]:
    """The fields that must not depend on a neighbour (nor on the tier): not timings, attempts, tier. A
    timeout's kind and message are left out too: on a loaded machine the wall-clock safety net may end
    a program before its CPU limit does, whoever ran before it."""
    if result.status is Status.TIMEOUT:
        return (result.status,)
    return (
        result.status,
        result.value_type,
        result.entry,
        result.error_type,
        result.error,
        result.timeout_kind,
        result.stdout,
    )


def same_result(a: ExecResult, b: ExecResult) -> bool:
    return comparable(a) == comparable(b) and same_value(a.value, b.value)


@pytest.fixture(scope="module", params=["restricted", "trusted"])
def neighbours_box(request: pytest.FixtureRequest, backend: str) -> Iterator[Sandbox]:
    with Sandbox(backend, policy=request.param, workers=1, timeout=VICTIM_TIMEOUT_S, memory_mb=MEMORY_MB) as box:
        yield box


def run_pairs(box: Sandbox, seed: int, aggressor_count: int) -> tuple[int, list[str]]:
    """Run every victim alone, then right after each generated aggressor (every victim after every
    aggressor); the number of pairs, and the differences found, described."""
    victims = _victims(random.Random(seed))
    alone = [box.run(victim.source) for victim in victims]
    aggressors = generated_aggressors(seed, aggressor_count)
    requests = []
    for aggressor in aggressors:
        for victim in victims:
            timeout = BURNER_TIMEOUT_S if aggressor.kind in BURNERS else AGGRESSOR_TIMEOUT_S
            requests.append(box.request(aggressor.source, timeout=timeout))
            requests.append(box.request(victim.source))
    results = list(box.run_requests(requests))[1::2]
    failures = []
    pairs = [(aggressor, index) for aggressor in aggressors for index in range(len(victims))]
    for number, ((aggressor, index), after) in enumerate(zip(pairs, results, strict=True)):
        if not same_result(alone[index], after):  # type: ignore[arg-type]
            failures.append(
                f"seed {seed} pair {number}: {victims[index]}\n  alone: {describe(alone[index])}\n"
                f"  after {aggressor}\n  gave:  {describe(after)}"  # type: ignore[arg-type]
            )
    return len(pairs), failures


@pytest.mark.slow
def test_a_victim_alone_equals_the_victim_after_any_aggressor(neighbours_box: Sandbox) -> None:
    pairs, failures = run_pairs(neighbours_box, SEED, len(AGGRESSORS))
    assert pairs >= 100  # per policy: over 200 per backend
    assert not failures, f"{len(failures)} of {pairs} pairs differ:\n" + "\n".join(failures[:8])


@pytest.mark.slow
@pytest.mark.soak
@pytest.mark.parametrize("seed", [SEED + 1, SEED + 2])
def test_more_generated_pairs(neighbours_box: Sandbox, seed: int) -> None:
    pairs, failures = run_pairs(neighbours_box, seed, SLOW_AGGRESSORS)
    assert not failures, f"{len(failures)} of {pairs} pairs differ:\n" + "\n".join(failures[:8])


def test_the_victims_are_what_they_claim(neighbours_box: Sandbox) -> None:
    """The harness tests what it says: the warm victims take the warm tier, the fork victims a fork, and
    the victim that needs nearly its whole limit succeeds alone."""
    victims = {victim.kind: victim for victim in _victims(random.Random(SEED))}
    tiers = {kind: neighbours_box.run(victim.source) for kind, victim in victims.items()}
    for kind in ("pure", "pure-function", "numpy"):
        assert tiers[kind].isolation == "warm", describe(tiers[kind])
    for kind in ("fork-class", "fork-near-limit", "sympy"):
        assert tiers[kind].isolation == "fork", describe(tiers[kind])
    assert tiers["fork-near-limit"].status.value == "ok", describe(tiers["fork-near-limit"])


# ------------------------------------------------------------------ resources per program (class 1)

FRAGMENTING = (
    "import numpy as np\n"
    "def solution():\n"
    "    a = np.ones(3_000_000)\n"
    "    del a\n"
    "    big = [np.ones(2_000_000) for _ in range(12)]\n"
    "    small = [np.ones(k % 50 + 1) for k in range(120_000)]\n"
    "    del big\n"
    "    return len(small)\n"
)
NEEDS_ITS_LIMIT = (
    "import numpy as np\nclass Big:\n    pass\n"
    f"x = np.ones({(MEMORY_MB - 140) * 131072})\nx[::512] = 2.0\nans = int(x[:1024].sum())\n"
)


@pytest.fixture(scope="module")
def small_box(backend: str) -> Iterator[Sandbox]:
    with Sandbox(backend, workers=1, timeout=VICTIM_TIMEOUT_S, memory_mb=MEMORY_MB) as box:
        yield box


def test_a_pure_program_that_fragments_its_heap_leaves_the_next_fork_its_limit(small_box: Sandbox) -> None:
    """Issue 35's case: an admitted numpy program leaves glibc's heap pinned (hundreds of MB); the next
    fork that needs its whole limit must still have it, and the warm runner must not die for it."""
    alone = small_box.run(NEEDS_ITS_LIMIT)
    assert (alone.status.value, alone.isolation) == ("ok", "fork"), describe(alone)
    for _ in range(3):
        results = list(small_box.run_many([FRAGMENTING, NEEDS_ITS_LIMIT, "ans = 6 * 7"]))
        assert results[0].isolation == "warm", describe(results[0])
        assert same_result(alone, results[1]), describe(results[1])
        assert (results[2].status.value, results[2].value, results[2].attempts) == ("ok", 42, 1), describe(results[2])


def _warm_runners(box: Sandbox) -> list[int]:
    from conftest import _workers, pool_tree, process_table

    table = process_table()
    workers = _workers(pool_tree(box).roots, table)
    return [p.pid for p in table.values() if p.ppid in workers and p.sid == p.pid and p.alive]


def test_a_warm_runner_that_dies_between_programs_is_not_blamed(small_box: Sandbox) -> None:
    """The machine kills the warm runner while it is idle (as the OOM killer did): the next program
    sent to it is run again, never `crashed`, and the worker is not replaced for it (one attempt)."""
    for _ in range(3):
        assert small_box.run("ans = 1").isolation == "warm"
        runners = _warm_runners(small_box)
        assert runners, "no warm runner found"
        for pid in runners:
            os.kill(pid, signal.SIGKILL)
        results = list(small_box.run_many([f"ans = {n} * 2" for n in range(5)]))
        assert [(r.status.value, r.value, r.attempts) for r in results] == [("ok", n * 2, 1) for n in range(5)]


# -------------------------------------------------------------- one verdict whatever the tier (class 4)

# Objects whose text shows an address (which depends on the runner's history), as a pure program can make
# or reach them, and ways to turn one into text.
ADDRESS_OBJECTS = {
    "function": "def f():\n    return 1\nthing = f\n",
    "lambda": "thing = lambda: 1\n",
    "generator": "thing = (x for x in [1, 2])\n",
    "map": "thing = map(abs, [1, 2])\n",
    "bound-method": "xs = [1]\nthing = xs.append\n",
    "library-function": "import numpy as np\nthing = np.sum\n",
    "module": "import math\nthing = math\n",
    "list-of-functions": "def f():\n    return 1\nthing = [1, f]\n",
}
AS_TEXT = {
    "str": "ans = str(thing)\n",
    "print": "print(thing)\n",
    "print-in-list": "print([thing])\n",
    "f-string": "ans = f'{thing}'\n",
    "percent": "ans = '%s' % (thing,)\n",
    "error-message": "table = {}\nans = table[thing]\n",
}
# A warm program that reaches a member its proof did not cover (`Unproven`), swallows the refusal,
# then does one of these: its verdict must be a fork's.
AFTER_SWALLOWING = {
    "loop": "while True:\n    pass\n",
    "flood": "while True:\n    print('flood' * 100)\n",
    "answer": "ans = 7\n",
    "printed": "print(41)\n",
    "error": "ans = 1 / 0\n",
}
UNPROVEN_REACH = {
    "bare-except": "import numpy as np\ntry:\n    f = np.save\nexcept:\n    pass\n",
    "finally-continue": "import numpy as np\nfor i in range(2):\n    try:\n        f = np.load\n    finally:\n        continue\n",
}


def tier_cases(seed: int, count: int) -> list[tuple[str, str]]:
    """Generated (name, program) pairs: each way to make text of each address-bearing object, and each
    swallowed refusal followed by each misbehaviour, drawn in a seeded order with drawn fillers."""
    rng = random.Random(seed)
    cases = [(f"{obj}-{text}", ADDRESS_OBJECTS[obj] + AS_TEXT[text]) for obj in ADDRESS_OBJECTS for text in AS_TEXT] + [
        (f"{reach}-{after}", UNPROVEN_REACH[reach] + f"x = {rng.randint(1, 99)}\n" + AFTER_SWALLOWING[after])
        for reach in UNPROVEN_REACH
        for after in AFTER_SWALLOWING
    ]
    rng.shuffle(cases)
    return cases[:count]


@pytest.fixture(scope="module", params=["restricted", "trusted"])
def tier_boxes(request: pytest.FixtureRequest, backend: str) -> Iterator[tuple[Sandbox, Sandbox]]:
    options = {"workers": 1, "timeout": 1.0, "memory_mb": MEMORY_MB, "policy": request.param}
    with Sandbox(backend, **options) as warm, Sandbox(backend, isolation="fork", **options) as fork:  # type: ignore[arg-type]
        yield warm, fork


@pytest.mark.slow
def test_a_program_gets_one_verdict_whatever_the_tier(tier_boxes: tuple[Sandbox, Sandbox]) -> None:
    """A warm program that showed an address, or reached what its proof did not cover, is decided in a
    fork: same status, value, output and error as the fork tier gives it."""
    warm_box, fork_box = tier_boxes
    failures = []
    for name, source in tier_cases(SEED, 100):
        warm, fork = warm_box.run(source), fork_box.run(source)
        # Two forks may place a function apart: where the fork shows an address, the warm box must have
        # forked too; elsewhere the results must be the same.
        shows_address = "0x" in f"{fork.value!r} {fork.stdout} {fork.error}"
        if (warm.isolation != "fork") if shows_address else not same_result(warm, fork):
            failures.append(f"{name}: warm {describe(warm)} isolation={warm.isolation}\n  fork {describe(fork)}")
    assert not failures, "\n".join(failures)


def test_a_proxy_module_shows_as_the_module(small_box: Sandbox) -> None:
    warm = small_box.run("import math\nans = str(math)\n")
    fork = small_box.run("import math\nclass A:\n    pass\nans = str(math)\n")
    assert fork.isolation == "fork" and warm.value == fork.value, (describe(warm), describe(fork))


# ------------------------------------------------ the worker's memory does not follow its programs (item 4)


def _tree_rss_mb(root: int) -> float:
    """Resident memory of the processes below `root` (a sandbox's workers and fork servers), in MB."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(parent, []).append(int(entry))
    total, stack = 0, list(children.get(root, []))
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/status") as status:
                total += next((int(line.split()[1]) for line in status if line.startswith("VmRSS:")), 0)
        except OSError:
            continue
    return total / 1024


def test_the_worker_does_not_grow_with_the_names_its_programs_bring() -> None:
    """From Python 3.12 on, names the compiler interns are immortal where they were compiled: a worker that
    compiled its forks' programs grew ~25 MB over these programs on 3.13 (bench/worker_names.py). Fork-tier
    programs with names of their own each (drawn: 1,200-1,800), on the process backend (a container's
    worker is the same code; its memory is not the test process's to read)."""
    rng = random.Random(SEED)
    sources = []
    for index in range(200):
        names = rng.randint(1200, 1800)
        body = "\n".join(f"v{index}_{n}_{rng.randint(0, 9)} = {n}" for n in range(names))
        sources.append("class Fork:\n    pass\n" + body + "\nans = 1\n")
    with Sandbox("process", isolation="fork", workers=1, policy="trusted", timeout=10.0) as box:
        box.run("ans = 1")
        before = _tree_rss_mb(os.getpid())
        results = list(box.run_many(sources))
        after = _tree_rss_mb(os.getpid())
    assert [result.status.value for result in results] == ["ok"] * len(sources)
    assert after - before < 8, f"the worker tree grew {after - before:.1f} MB over {len(sources)} programs"
