"""Contamination: whatever program A does, program B run after A in the same worker gives exactly
what B gives alone (issue 13, "Done when", second item; classes 5 and 6).

Each pair is run as the issue says it must hold. With one worker (so A and B meet):

1. B alone, in a fresh sandbox, twice: the baseline, and proof that B does not affect itself (a B
   whose run changes what its next run gives could not tell A's damage from its own);
2. in another fresh sandbox, A, then B three times (state may leak late: a parked generator, a cache
   that fills, a registry that only the second warning reads).

B's outcome (status, value, error type, last line of stdout, and stderr where results carry it) must
be the baseline's each time. The baseline is computed once per (B, policy, isolation, backend) and
shared by every A tried against that B (one fresh sandbox per B, not per pair): B is checked not to
affect itself, so sharing it weakens nothing. A fresh sandbox costs ~0.3 s of CPU; the file starts
~400 (one per pair and setting, one per B and setting, two per RNG case).

Every A is written as a determined attacker would write it: under the trusted policy it may import
anything and walk `gc.get_objects()` or `sys.modules`; under the restricted policy it uses what the
policy lets through today (library item writes, attribute writes on library instances, calls that
change a library's global state, `functools.update_wrapper` as a setattr and a globals copier). An A
the policy refuses is still a valid pair (B must be unaffected); under the trusted policy every A is
checked to have done its damage in its own process (it ends with `ans = "armed"`), so the pair has
teeth: only the tier decides whether B sees it.

Parametrized over policy (restricted, trusted), isolation (the Sandbox default, None, and explicit
"fork") and backend (process always; docker marked, skipped without an engine or image).

`test_own_rng_is_reproducible`: a program that makes its own RNG (random.Random(), numpy's
default_rng(), sympy's) gives the same value every time it runs, in the same sandbox and in a fresh
one (issue 14, class 8).
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from typing import Any

import pytest
from conftest import describe

from potrun import ExecResult, Sandbox, Status

POLICIES = ("restricted", "trusted")
ISOLATIONS = [pytest.param(None, id="default"), pytest.param("fork", id="fork")]
TIMEOUT_S = 5.0  # wall: no program here needs a second; only a runaway hits it
MEMORY_MB = 512
B_RUNS_AFTER_A = 3
B_RUNS_ALONE = 2
ARMED = "armed"


def program(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


# ------------------------------------------------------------------------------------ B: probes
# Each B is an ordinary program that the restricted policy accepts and that reads state an A can
# change; it is deterministic once every RNG a program can reach is seeded per program (issue 14:
# B_NP_LEGACY_HIDDEN and B_NORMAL_SAMPLES_UNSEEDED draw from the shared RNGs without seeding them).
# Some reach the state without naming it (`getattr` with a computed name), because warm reuse today
# resets state by the words in the next program's source.

B_NP_DIVIDE = program("""
    import numpy as np
    def solution():
        x = np.array([1.0]) / np.array([0.0])
        return float(x[0])
""")
B_NP_STATE = program("""
    import numpy as np
    ans = [
        str(np.array([1 / 3, 2 / 3])),
        float(np.finfo(np.float64).eps),
        str(np.array([1.5, 2.5], dtype='float')),
        float(np.polynomial.Polynomial([1, 2, 3])(2.0)),
    ]
""")
B_NP_LEGACY_HIDDEN = program("""
    import numpy as np
    gen = getattr(np, 'ran' + 'dom')
    ans = float(gen.rand())
""")
B_NP_DEFAULT_RNG = program("""
    import numpy as np
    ans = float(np.random.default_rng(12345).random())
""")
B_NP_MEAN_EMPTY = program("""
    import numpy as np
    def solution():
        return float(np.mean(np.array([])))
""")
B_DECIMAL = program("""
    from decimal import Decimal
    ans = str(Decimal(1) / Decimal(7))
""")
B_DECIMAL_HIDDEN = program("""
    import fractions
    D = getattr(fractions, 'Dec' + 'imal')
    ans = str(D(1) / D(7))
""")
B_DECIMAL_ZERO = program("""
    from decimal import Decimal
    def solution():
        return str(Decimal(1) / Decimal(0))
""")
B_DECIMAL_FLAGS = program("""
    import decimal
    quarter = decimal.Decimal(1) / decimal.Decimal(4)
    ans = [str(quarter), decimal.getcontext().flags[decimal.Inexact]]
""")
B_FRACTION = program("""
    import numbers
    from fractions import Fraction
    ans = [str(Fraction(0.5) + Fraction(1, 3)), isinstance(1.5, numbers.Rational)]
""")
B_NORMAL_SAMPLES = program("""
    from statistics import NormalDist
    ans = NormalDist(0, 1).samples(2, seed=3)
""")
B_NORMAL_SAMPLES_UNSEEDED = program("""
    from statistics import NormalDist
    ans = NormalDist(0, 1).samples(2)
""")
B_STATS_MEAN = program("""
    import statistics
    ans = statistics.mean([1, 2, 3, 4])
""")
B_CALENDAR = program("""
    import calendar
    ans = [list(calendar.monthrange(2023, 2)), calendar.month_name[3], calendar.weekheader(3)]
""")
B_COPY = program("""
    import copy, datetime
    ans = [str(copy.deepcopy(datetime.date(2020, 1, 2))), copy.deepcopy([1, [2, 3]])]
""")
B_RANDOM = program("""
    import random
    ans = [random.random(), random.Random(7).random()]
""")
B_SYMPY = program("""
    import sympy
    x = sympy.Symbol('x')
    ans = [str(x + x), str(sympy.ask(sympy.Q.positive(x))), str(sympy.factorint(360)), str(sympy.Integer(2) + 1)]
""")
B_BUILTINS = program("""
    ans = sum([1, 2, 3]) + len([4, 5]) + max(1, 2)
""")
B_MATH = program("""
    import math
    ans = [math.pi, math.sqrt(2.0)]
""")
B_RE = program("""
    import re
    ans = len(re.findall(r'[0-9]+', 'a12b345c6'))
""")
B_MEMORY = program("""
    def solution():
        block = [0] * (32 * 1000 * 1000)
        return len(block)
""")
B_PLAIN = program("""
    def solution():
        return 7
""")
B_PRINTED = program("""
    print(6 * 7 + 1)
""")


# ----------------------------------------------------------------------------------- A: attacks

# Restricted today: `functools.update_wrapper(f, g, updated=('__globals__',))` copies the globals of
# a library function (statistics imports sys) into the program's, the real builtins included; a
# function defined afterwards takes them as its own (its builtins are fixed when it is made).
ESCAPE = """
import functools, statistics
def here():
    pass
functools.update_wrapper(here, statistics.mean, assigned=(), updated=('__globals__',))
"""


def escaped(body: str) -> str:
    """A restricted-policy A: the escape above, then `body` run in a function made after it."""
    return program(ESCAPE) + "def attack():\n" + textwrap.indent(program(body), "    ") + "attack()\nans = 'armed'\n"


def armed(text: str) -> str:
    """An A that answers ARMED only if every line of its attack ran."""
    return program(text) + "ans = 'armed'\n"


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    arms: bool = True  # False: the attack also destroys A's own answer, so A cannot report ARMED


def pair(a: str, b: str, name: str, *, arms: bool = True) -> Any:
    return pytest.param(Pair(a, b, arms), id=name)


PAIRS = [
    # -- numpy error state and callback (a contextvar in numpy 2: the runner's thread keeps it)
    pair(armed("import numpy as np\nnp.seterr(all='raise')"), B_NP_DIVIDE, "np-seterr-raise"),
    pair(armed("import numpy as np\nnp.seterr(all='ignore')"), B_NP_DIVIDE, "np-seterr-ignore"),
    pair(
        armed("""
        import numpy as np
        def spy(kind, flag):
            raise ValueError('program A ran inside B')
        np.seterrcall(spy)
        np.seterr(all='call')
    """),
        B_NP_DIVIDE,
        "np-seterrcall-raises",
    ),
    pair(
        armed("""
        import numpy as np
        def spy(kind, flag):
            print('A was here')
        np.seterrcall(spy)
        getattr(np, 'set' + 'err')(all='call')
    """),
        B_NP_DIVIDE,
        "np-seterrcall-prints",
    ),
    pair(
        armed("""
        import numpy as np, copy
        def parked():
            with np.errstate(all='raise'):
                yield 1
        g = parked()
        next(g)
        copy.dispatch_table[g] = g
    """),
        B_NP_DIVIDE,
        "np-errstate-generator-parked",
    ),
    # -- numpy print options, finfo, sctypeDict, class-level arrays
    pair(armed("import numpy as np\nnp.set_printoptions(precision=2)"), B_NP_STATE, "np-printoptions"),
    pair(
        armed("""
        import numpy as np
        np.set_printoptions(formatter={'float': lambda v: 'A'})
    """),
        B_NP_STATE,
        "np-printoptions-program-formatter",
    ),
    pair(
        armed("""
        import numpy as np, copy
        def parked():
            with np.printoptions(precision=1):
                yield 1
        g = parked()
        next(g)
        copy.dispatch_table[g] = g
    """),
        B_NP_STATE,
        "np-printoptions-generator-parked",
    ),
    pair(
        armed("""
        import numpy as np
        info = np.finfo(np.float64)
        info.eps = 1.0
    """),
        B_NP_STATE,
        "np-finfo-write",
    ),
    pair(armed("import numpy as np\nnp.sctypeDict['float'] = np.int8"), B_NP_STATE, "np-sctypedict"),
    pair(
        armed("import numpy as np\nnp.polynomial.Polynomial.window[1] = 3.0"), B_NP_STATE, "np-polynomial-class-array"
    ),
    # Mutations with no attribute or item write in sight: an out= argument, an augmented assignment
    # to a name bound to a library array, a list method called on a library list.
    pair(
        armed("""
        import numpy as np
        domain = np.polynomial.Polynomial.domain
        np.multiply(domain, 2, out=domain)
    """),
        B_NP_STATE,
        "np-out-argument-writes-library-array",
    ),
    pair(
        armed("""
        import numpy as np
        window = np.polynomial.Polynomial.window
        window *= 3
    """),
        B_NP_STATE,
        "np-inplace-operator-on-library-array",
    ),
    pair(armed("import calendar\ncalendar.mdays.reverse()"), B_CALENDAR, "calendar-mdays-method-mutates"),
    # -- numpy RNGs
    pair(
        armed("""
        import numpy as np
        rnd = getattr(np, 'ran' + 'dom')
        rnd.seed(99)
    """),
        B_NP_LEGACY_HIDDEN,
        "np-random-seed-hidden",
    ),
    pair(
        armed("""
        import numpy as np
        np.random.seed = lambda seed=None: None
        np.random.rand = lambda *shape: 0.25
    """),
        B_NP_LEGACY_HIDDEN,
        "np-random-patched",
    ),
    pair(
        armed("""
        import numpy as np
        real = np.random.default_rng
        np.random.default_rng = lambda seed=None: real(1)
    """),
        B_NP_DEFAULT_RNG,
        "np-default-rng-patched",
    ),
    pair(
        escaped("""
        import numpy.random  # (its template holds it: the bare fork server never imports numpy)
        rnd = sys.modules['numpy.random']
        setattr(rnd, 'default_rng', lambda seed=None: rnd.Generator(rnd.PCG64(1)))
    """),
        B_NP_DEFAULT_RNG,
        "np-default-rng-escaped",
    ),
    # -- warnings: shown once per registry, and numpy's own module keeps the registry
    pair(armed("import numpy as np\nnp.mean(np.array([]))"), B_NP_MEAN_EMPTY, "warning-once-numpy-registry"),
    pair(armed("import warnings\nwarnings.simplefilter('error')"), B_NP_DIVIDE, "warnings-filter-error"),
    pair(escaped("sys.modules['warnings'].simplefilter('error')"), B_NP_DIVIDE, "warnings-filter-error-escaped"),
    pair(
        armed("""
        import warnings, numpy as np
        warnings.simplefilter('once')
        np.array([1.0]) / np.array([0.0])
    """),
        B_NP_DIVIDE,
        "warnings-once-registry",
    ),
    # -- decimal
    pair(armed("import decimal\ndecimal.getcontext().prec = 3"), B_DECIMAL, "decimal-prec"),
    pair(armed("import decimal\ndecimal.getcontext().prec = 3"), B_DECIMAL_HIDDEN, "decimal-prec-hidden"),
    pair(
        armed("import decimal\ndecimal.setcontext(decimal.Context(prec=5))"),
        B_DECIMAL_HIDDEN,
        "decimal-setcontext-hidden",
    ),
    pair(armed("import decimal\ndecimal.DefaultContext.prec = 4"), B_DECIMAL, "decimal-defaultcontext-prec"),
    pair(
        armed("""
        import decimal
        decimal.DefaultContext.traps[decimal.DivisionByZero] = False
        decimal.getcontext().traps[decimal.DivisionByZero] = False
    """),
        B_DECIMAL_ZERO,
        "decimal-traps",
    ),
    pair(
        armed("""
        import decimal
        decimal.getcontext().traps[decimal.Inexact] = True
        decimal.DefaultContext.traps[decimal.Inexact] = True
    """),
        B_DECIMAL,
        "decimal-trap-inexact",
    ),
    pair(
        armed("""
        import decimal
        decimal.DefaultContext.flags[decimal.Inexact] = True
        decimal.getcontext().flags[decimal.Inexact] = True
    """),
        B_DECIMAL_FLAGS,
        "decimal-defaultcontext-flags",
    ),
    pair(
        armed("""
        import decimal, copy
        def parked():
            with decimal.localcontext() as context:
                context.prec = 2
                yield 1
        g = parked()
        next(g)
        copy.dispatch_table[g] = g
    """),
        B_DECIMAL_HIDDEN,
        "decimal-localcontext-generator-parked",
    ),
    # -- fractions and numbers' ABC registries
    pair(armed("import numbers\nnumbers.Rational.register(float)"), B_FRACTION, "numbers-register"),
    pair(
        armed("""
        import fractions
        fractions.Fraction.__str__ = lambda self: '42'
    """),
        B_FRACTION,
        "fractions-class-patched",
    ),
    # -- statistics (NormalDist().samples draws from the random module's shared RNG)
    pair(
        armed("from statistics import NormalDist\nNormalDist(0, 1).samples(5)"),
        B_NORMAL_SAMPLES_UNSEEDED,
        "statistics-normaldist-shared-rng",
    ),
    pair(armed("import random\nrandom.seed(1)"), B_NORMAL_SAMPLES_UNSEEDED, "statistics-normaldist-seeded-by-a"),
    pair(
        armed("""
        import random
        random.Random.random = lambda self: 0.5
        random.Random.seed = lambda self, *a, **k: None
    """),
        B_NORMAL_SAMPLES,
        "statistics-normaldist-random-class",
    ),
    pair(
        armed("""
        import statistics
        statistics.mean = lambda data: 42
    """),
        B_STATS_MEAN,
        "statistics-module-write",
    ),
    # -- calendar
    pair(armed("import calendar\ncalendar.mdays[2] = 30"), B_CALENDAR, "calendar-mdays"),
    pair(
        armed("""
        import calendar
        calendar.month_name = ['x'] * 13
        calendar._localized_month.__getitem__ = lambda self, i: 'Smarch'
    """),
        B_CALENDAR,
        "calendar-month-name",
    ),
    pair(armed("import calendar\ncalendar.setfirstweekday(6)"), B_CALENDAR, "calendar-setfirstweekday"),
    # -- copy and copyreg
    pair(
        armed("""
        import copy, datetime
        copy.dispatch_table[datetime.date] = lambda d: (int, (42,))
    """),
        B_COPY,
        "copy-dispatch-table",
    ),
    pair(
        armed("""
        import copy
        copy._deepcopy_dispatch[list] = lambda x, memo: [42]
    """),
        B_COPY,
        "copy-deepcopy-dispatch",
    ),
    pair(
        armed("""
        import copyreg, datetime
        copyreg.pickle(datetime.date, lambda d: (str, ('forged',)))
    """),
        B_COPY,
        "copyreg-pickle",
    ),
    # -- random
    pair(
        armed("import random\nrandom.seed(5)\nrandom.setstate(random.Random(1).getstate())"),
        B_RANDOM,
        "random-seed-setstate",
    ),
    pair(
        armed("""
        import random
        random.seed = lambda *a, **k: None
        random.random = lambda: 0.25
    """),
        B_RANDOM,
        "random-module-patched",
    ),
    pair(armed("import random\nrandom.Random.random = lambda self: 0.5"), B_RANDOM, "random-class-patched"),
    pair(
        escaped("""
        module = sys.modules['random']
        setattr(module, 'seed', lambda *a, **k: None)
        setattr(module, 'random', lambda: 0.25)
    """),
        B_RANDOM,
        "random-module-patched-escaped",
    ),
    # -- sympy
    pair(
        armed("""
        import sympy, copy
        def parked():
            with sympy.evaluate(False):
                yield 1
        g = parked()
        next(g)
        copy.dispatch_table[g] = g
    """),
        B_SYMPY,
        "sympy-evaluate-generator-parked",
    ),
    pair(
        armed("""
        import sympy
        x = sympy.Symbol('x')
        x.name = 'pwned'
        sympy.Integer(2).p = 3
    """),
        B_SYMPY,
        "sympy-cached-objects-written",
    ),
    pair(
        armed("""
        import sympy
        from sympy.assumptions import global_assumptions
        global_assumptions.add(sympy.Q.positive(sympy.Symbol('x')))
    """),
        B_SYMPY,
        "sympy-global-assumptions",
    ),
    pair(
        armed("""
        import sympy
        sympy.factorint = lambda n, *a, **k: {2: 99}
        from sympy.core import cache
        cache.clear_cache()
    """),
        B_SYMPY,
        "sympy-function-patched",
    ),
    # -- builtins and sys.modules
    pair(armed("import builtins\nbuiltins.sum = lambda *a, **k: 40"), B_BUILTINS, "builtins-module-write"),
    pair(armed("__builtins__.max = lambda *a, **k: 40"), B_BUILTINS, "builtins-name-write"),
    # The runner frames its answer with len(): A's own answer goes out with a wrong length, and
    # whatever that does to the worker must not reach B.
    pair(armed("import builtins\nbuiltins.len = lambda obj: 40"), B_PLAIN, "builtins-len-breaks-framing", arms=False),
    pair(
        escaped("setattr(sys.modules['builtins'], 'len', lambda obj: 40)"),
        B_PLAIN,
        "builtins-len-breaks-framing-escaped",
        arms=False,
    ),
    pair(
        escaped("""
        import_gc = sys.modules['gc']
        for obj in import_gc.get_objects():
            if type(obj) is dict and 'zip' in obj and 'sorted' in obj and 'sum' in obj:
                obj['sum'] = lambda *a, **k: 40
                obj['max'] = lambda *a, **k: 40
    """),
        B_BUILTINS,
        "builtins-shared-dict-escaped",
    ),
    pair(
        armed("""
        import sys, types
        fake = types.ModuleType('statistics')
        fake.mean = lambda data: 42
        sys.modules['statistics'] = fake
    """),
        B_STATS_MEAN,
        "sys-modules-replaced",
    ),
    pair(
        escaped("""
        class Fake:
            pass
        fake = Fake()
        fake.mean = lambda data: 42
        sys.modules['statistics'] = fake
    """),
        B_STATS_MEAN,
        "sys-modules-replaced-escaped",
    ),
    pair(
        armed("""
        import statistics
        class Fake:
            pass
        fake = Fake()
        fake.mean = lambda data: 42
        statistics.sys.modules['statistics'] = fake
    """),
        B_STATS_MEAN,
        "sys-modules-via-module-attribute",
    ),
    # -- module attribute writes, and a library's module-level cache
    pair(armed("import math\nmath.pi = 3\nmath.sqrt = lambda x: 1.0"), B_MATH, "math-pi-write"),
    pair(
        armed("""
        import functools, math
        class Source:
            pass
        source = Source()
        source.pi = 3
        functools.update_wrapper(math, source, assigned=('pi',), updated=())
    """),
        B_MATH,
        "math-pi-update-wrapper",
    ),
    pair(
        armed("""
        import re
        re._cache.clear()
        re._cache[(str, '[0-9]+', 0)] = re.compile('[0-9]')
    """),
        B_RE,
        "re-cache-poisoned",
    ),
    # -- functools.lru_cache on a library function, its cache poisoned by a colliding key
    pair(
        armed("""
        import functools, math
        class Collide:  # hashes and compares as 2.0, and is 42 squared as a float
            def __hash__(self):
                return hash(2.0)
            def __eq__(self, other):
                return True
            def __float__(self):
                return 1764.0
        cached = functools.lru_cache(maxsize=None)(math.sqrt)
        cached(Collide())  # the cache now answers sqrt(2.0) with 42.0
        math.sqrt = cached
    """),
        B_MATH,
        "functools-lru-cache-poisoned",
    ),
    # -- a large object kept alive by a library (B then runs out of memory)
    pair(
        armed("""
        import calendar
        calendar.mdays.append([1] * (32 * 1000 * 1000))
    """),
        B_MEMORY,
        "large-object-in-module-list",
    ),
    pair(
        armed("""
        import copy
        copy.dispatch_table[len] = [1] * (32 * 1000 * 1000)
    """),
        B_MEMORY,
        "large-object-in-library-dict",
    ),
    # A pure program (literals, a list, arithmetic): its garbage is a reference cycle, which outlives
    # its namespace until the cyclic collector happens to run.
    pair(
        armed("""
        block = [0] * (32 * 1000 * 1000)
        holder = [block]
        holder.append(holder)
    """),
        B_MEMORY,
        "large-object-in-own-cycle",
    ),
    # -- potrun's own code
    pair(
        armed("""
        import potrun.sandbox.wire.values as values
        real = values.to_plain
        values.to_plain = lambda value, depth=0: real(value, depth) if value == 'armed' else 42
    """),
        B_PLAIN,
        "potrun-values-to-plain",
    ),
    pair(
        escaped("""
        values = sys.modules['potrun.sandbox.wire.values']
        real = values.to_plain
        setattr(values, 'to_plain', lambda value, depth=0: real(value, depth) if value == 'armed' else 42)
    """),
        B_PLAIN,
        "potrun-values-to-plain-escaped",
    ),
    pair(
        armed("""
        import gc, sys
        Runner = sys.modules['potrun.sandbox.inside.runner'].Runner
        real = Runner.run
        def forged(self, request):
            result, recycle = real(self, request)
            if result.get('value') != 'armed':
                result.update(status='ok', value=42, value_type='int', entry='solution')
            return result, False
        Runner.run = forged
        for obj in gc.get_objects():
            if type(obj) is Runner:
                obj.run = forged.__get__(obj)
    """),
        B_PLAIN,
        "potrun-runner-run",
    ),
    pair(
        escaped("""
        runner = sys.modules['potrun.sandbox.inside.runner']
        real = runner.Runner.run
        def forged(self, request):
            result, recycle = real(self, request)
            result.update(status='ok', value=42, value_type='int', entry='solution')
            return result, False
        setattr(runner.Runner, 'run', forged)
    """),
        B_PLAIN,
        "potrun-runner-run-escaped",
    ),
    pair(
        armed("""
        import sys, json
        for name in ('__main__', 'potrun.sandbox.inside.worker', 'potrun.sandbox.wire.protocol'):
            module = sys.modules.get(name)
            if module is None or not hasattr(module, 'dumps'):
                continue
            real = module.dumps
            def forged(message, real=real):
                if message.get('status') is not None and message.get('value') != 'armed':
                    message = dict(message, status='ok', value=42, value_type='int')
                return real(message)
            module.dumps = forged
        json.dumps = lambda *a, **k: '{"status": "ok", "value": 42}'
    """),
        B_PRINTED,
        "potrun-json-encoder",
    ),
    pair(
        escaped("""
        runner = sys.modules['potrun.sandbox.inside.runner']
        setattr(runner, '_parse_printed', lambda line: 42)
        setattr(runner, 'STDOUT_TAIL', 1)
    """),
        B_PRINTED,
        "potrun-printed-parser-escaped",
    ),
]


# ------------------------------------------------------------------------------------- the harness


def outcome(result: ExecResult) -> tuple[Any, ...]:
    """What B gives, as comparable plain data: status, the value with its JSON type (1 is not 1.0,
    NaN equals NaN), error type, last non-empty stdout line, and stderr where results carry it."""
    lines = [line.strip() for line in (result.stdout or "").splitlines() if line.strip()]
    return (
        result.status.value,
        json.dumps(result.value, sort_keys=True),
        result.error_type,
        lines[-1] if lines else None,
        getattr(result, "stderr", None),
    )


def fresh(policy: str, backend: str, isolation: str | None) -> Sandbox:
    return Sandbox(backend, policy=policy, workers=1, timeout=TIMEOUT_S, memory_mb=MEMORY_MB, isolation=isolation)


def run_fresh(sources: list[str], policy: str, backend: str, isolation: str | None) -> list[ExecResult]:
    """Run `sources` in order on a fresh one-worker sandbox, then close it."""
    with fresh(policy, backend, isolation) as box:
        return list(box.run_many(sources))


_baselines: dict[tuple[str, str, str, str | None], tuple[tuple[Any, ...], list[ExecResult]]] = {}


def baseline(b: str, policy: str, backend: str, isolation: str | None) -> tuple[tuple[Any, ...], list[ExecResult]]:
    """B alone in a fresh sandbox, run twice; the first outcome and all the results."""
    key = (b, policy, backend, isolation)
    if key not in _baselines:
        results = run_fresh([b] * B_RUNS_ALONE, policy, backend, isolation)
        _baselines[key] = outcome(results[0]), results
    return _baselines[key]


@pytest.mark.slow
@pytest.mark.parametrize("isolation", ISOLATIONS)
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", PAIRS)
def test_b_after_a_gives_what_b_gives_alone(case: Pair, policy: str, isolation: str | None, backend: str) -> None:
    """B alone gives the same outcome twice; after A in a fresh one-worker sandbox, three times more."""
    alone, alone_results = baseline(case.b, policy, backend, isolation)
    for index, result in enumerate(alone_results):
        assert outcome(result) == alone, f"B alone is not reproducible (run {index + 1}): {describe(result)}"
    results = run_fresh([case.a] + [case.b] * B_RUNS_AFTER_A, policy, backend, isolation)
    a_result, b_results = results[0], results[1:]
    if policy == "trusted" and case.arms:  # the attack must have done its damage in its own process
        assert a_result.status is Status.OK and a_result.value == ARMED, f"A did not arm: {describe(a_result)}"
    for index, result in enumerate(b_results):
        assert outcome(result) == alone, (
            f"B's run {index + 1} after A differs from B alone: alone={alone} after={outcome(result)}; "
            f"A: {describe(a_result)}; B: {describe(result)}"
        )


def test_pairs_cover_the_issue() -> None:
    """At least 40 pairs (issue 13), each with a distinct id."""
    ids = [param.id for param in PAIRS]
    assert len(ids) >= 40 and len(set(ids)) == len(ids)


# ---------------------------------------------------------------------- reproducibility (class 8)

OWN_RNG_PROGRAMS = [
    pytest.param(
        program("""
        import random
        ans = random.Random().random()
    """),
        id="random-Random",
    ),
    pytest.param(
        program("""
        import numpy as np
        ans = float(np.random.default_rng().random())
    """),
        id="numpy-default_rng",
    ),
    pytest.param(
        program("""
        import sympy
        ans = int(sympy.randprime(10**6, 10**7))
    """),
        id="sympy-randprime",
    ),
]


@pytest.mark.parametrize("isolation", ISOLATIONS)
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("source", OWN_RNG_PROGRAMS)
def test_own_rng_is_reproducible(source: str, policy: str, isolation: str | None, backend: str) -> None:
    """Twice in one sandbox and once in another: the same value each time."""
    first = run_fresh([source, source], policy, backend, isolation)
    second = run_fresh([source], policy, backend, isolation)
    results = first + second
    assert results[0].status is Status.OK, describe(results[0])
    for result in results[1:]:
        assert outcome(result) == outcome(results[0]), f"{describe(results[0])} then {describe(result)}"
