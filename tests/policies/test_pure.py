"""The warm tier's verifier (policies/pure.py): which programs it proves pure, and what they run with.

- A table of programs with their verdict: real program-of-thought generations and plain-Python idioms
  that must be admitted, and every way found to reach shared mutable state, which must be refused with
  the reason named. Programs with over 256 names or constants, or long jumps (EXTENDED_ARG), on both
  sides, including one built so that a decoder reading only the low byte would check the wrong name.
- The data itself: every opcode of this release reviewed (3.11, 3.13); every listed member exists; a proxy hides nothing that an
  allowed attribute name would find on the real module (else warm and fork would disagree); every
  attribute name allowed, read on every kind of value a pure program can hold, gives no module, frame,
  code or shared mutable container; nothing the restricted policy forbids is admitted.
- Execution: admitted programs give in `pure_globals()` what they give under plain exec; proxies are
  read-only and hold only pure members; the import hook refuses what the verifier refuses, even when a
  program reaches it without the verifier.
- Every program of the PoT files that the verifier admits gives the same `ans` in `pure_globals()` as
  under plain exec (status and value).
"""

from __future__ import annotations

import contextlib
import dis
import importlib
import io
import json
import math
import signal
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from paths import SHARED

from potrun.policies import pure
from potrun.policies.pure import PURE_BUILTINS, PURE_MODULES, pure_globals, why_not_pure

pytestmark = pytest.mark.skipif(
    pure.warm_tier_refusal() is not None, reason=f"no warm tier here: {pure.warm_tier_refusal()}"
)

DATA = SHARED / "pot"
POT_FILES = ["gsm8k_fewshot_codex.jsonl", "svamp_fewshot_codex.jsonl"]
FILENAME = "<program>"
RUN_LIMIT_S = 2.0  # CPU seconds per program in the property test (a few PoT programs never finish)


def check(source: str) -> str | None:
    return why_not_pure(compile(source, FILENAME, "exec"))


def pot_programs() -> Iterator[tuple[str, int, str]]:
    """(file, line, program) for every generated program of the PoT files."""
    for name in POT_FILES:
        for line_number, line in enumerate((DATA / name).read_text().splitlines(), 1):
            record = json.loads(line)
            for program in record.get("generated") or ():
                yield name, line_number, program


# ------------------------------------------------------------------------------- the verdict table
PURE = None
# (id, program, expected): None when it must be proven pure, else a word its reason must contain.
TABLE: list[tuple[str, str, str | None]] = [
    # --- real PoT generations (GSM8K, SVAMP), as published
    (
        "gsm8k-ducks",
        "total_eggs = 16\neaten_eggs = 3\nbaked_eggs = 4\nsold_eggs = total_eggs - eaten_eggs - "
        "baked_eggs\ndollars_per_egg = 2\nans = sold_eggs * dollars_per_egg",
        PURE,
    ),
    (
        "gsm8k-house",
        "cost_of_original_house = 80000\nincrease_rate = 150 / 100\nvalue_of_house = (1 + "
        "increase_rate) * cost_of_original_house\ncost_of_repair = 50000\nans = value_of_house - cost_of_repair - "
        "cost_of_original_house",
        PURE,
    ),
    (
        "gsm8k-undefined-name",
        "bolts_of_blue_fiber = 2\nbolts_of_white_fiber = num_of_blue_fiber / 2\n"
        "ans = bolts_of_blue_fiber + bolts_of_white_fiber",
        PURE,
    ),
    ("pot-loop", "total = 0\nfor i in range(1, 11):\n    total += i * 2\nans = total", PURE),
    ("pot-while", "n = 0\nmoney = 100\nwhile money > 0:\n    money -= 7\n    n += 1\nans = n", PURE),
    ("pot-builtins", "prices = [3, 5, 2]\nans = max(prices) - min(prices) + sum(prices) / len(prices)", PURE),
    ("pot-round", "ans = round(17 / 3, 2)", PURE),
    (
        "pot-brute-force",
        "for a in range(10):\n    for b in range(10):\n        if a + b == 12 and a - b == 2:\n            ans = a",
        PURE,
    ),
    ("pot-function", "def solution():\n    apples = 5\n    return apples * 3\nans = solution()", PURE),
    ("pot-print", "ans = 3 * 4\nprint(ans)", PURE),
    # --- plain Python that stays inside the program
    ("lambda-closure", "def make(k):\n    return lambda x: x * k\nans = make(3)(4)", PURE),
    (
        "nonlocal",
        "def f():\n    n = 0\n    def g():\n        nonlocal n\n        n += 1\n    g(); g()\n    return n\nans = f()",
        "nonlocal",
    ),
    ("global-in-function", "count = 0\ndef bump():\n    global count\n    count += 1\nbump()\nans = count", PURE),
    (
        "comprehensions",
        "ans = [x * x for x in range(5)] + sorted({x % 3 for x in range(9)})\nd = {k: v for k, v in zip('ab', (1, 2))}",
        PURE,
    ),
    (
        "generator-no-try",
        "def g(n):\n    for i in range(n):\n        yield i\nans = sum(g(5))\nleft = g(3)\nnext(left)",
        PURE,
    ),
    ("genexpr", "ans = sum(x for x in range(10) if x % 2)", PURE),
    (
        "yield-from",
        "def inner():\n    yield 1\n    yield 2\ndef outer():\n    yield from inner()\nans = list(outer())",
        PURE,
    ),
    ("underscore-names", "_x = 2\nfor _ in range(3):\n    _x += 1\nans = _x", "name '_x'"),
    ("single-underscore-loop", "total = 0\nfor _ in range(3):\n    total += 1\nans = total", PURE),
    ("underscore-local", "def solution():\n    _y = 2\n    return _y", "name '_y'"),
    ("try-except", "try:\n    ans = 1 / 0\nexcept ZeroDivisionError as e:\n    ans = len(e.args)", PURE),
    ("try-finally", "try:\n    ans = 1\nfinally:\n    ans += 1", PURE),
    (
        "raise-assert",
        "assert 1 + 1 == 2, 'math'\ntry:\n    raise ValueError('x')\nexcept ValueError:\n    ans = 1",
        PURE,
    ),
    ("fstring", "x = 3.14159\nans = f'{x:.2f} and {x!r:>10} {\"a\"!s}'", PURE),
    ("percent-format", "ans = '%d apples, %.1f%%' % (3, 12.5)", PURE),
    ("str-methods", "ans = ' A,b '.strip().lower().split(',')\nans.append('c')\nans.sort()\nans = '-'.join(ans)", PURE),
    ("dict-methods", "d = {}\nd.setdefault('a', []).append(1)\nans = sorted(d.items()) + list(d.keys())", PURE),
    ("item-writes-own", "a = [0] * 3\na[1] = 5\ndel a[0]\nm = {}\nm['k'] = a\nans = m", PURE),
    (
        "unpack-star-call",
        "def f(*args, **kw):\n    return len(args) + len(kw)\nxs = [1, 2]\n"
        "ans = f(*xs, **{'a': 1}), [*xs, *xs], {**{'a': 1}}",
        PURE,
    ),
    ("walrus-ternary", "ans = [y for x in range(5) if (y := x * 2) > 3] if True else None", PURE),
    ("slice-chain-compare", "a = list(range(10))\nans = a[1:8:2], 1 < a[3] <= 3, a[::-1][0]", PURE),
    ("int-float-methods", "ans = (10).bit_length(), (2.5).as_integer_ratio(), (3.0).is_integer(), (1+2j).real", PURE),
    ("exception-name-only", "try:\n    x = [][1]\nexcept (IndexError, KeyError):\n    ans = 0", PURE),
    ("bare-except", "try:\n    ans = int('x')\nexcept:\n    ans = -1", PURE),
    ("str-one-argument", "n = 1234\nans = sum(int(d) for d in str(n)) + len(str(n).zfill(6))", PURE),
    ("str-of-attribute", "def f(x):\n    return str(x.real)\nans = f(3)", PURE),
    ("deep-iterator-chain", "x = iter([1])\nfor i in range(10):\n    x = enumerate(x)\nans = 1", PURE),
    ("print-file-own-object", "print(1, file=[])", PURE),
    (
        "numpy-object-loops",
        "import numpy as np\nans = np.gcd(np.array([4, 6], dtype='O'), 2).tolist(), "
        "np.floor(np.array([1.5], dtype='O')).tolist()",
        PURE,
    ),
    (
        "decorator-own",
        "def twice(f):\n    return lambda x: f(f(x))\n@twice\ndef inc(x):\n    return x + 1\nans = inc(1)",
        PURE,
    ),
    # --- pure modules
    ("math", "import math\nans = math.sqrt(16) + math.floor(2.5) + math.pi + math.comb(5, 2)", PURE),
    ("from-math", "from math import sqrt, ceil as c\nans = sqrt(4) + c(1.2)", PURE),
    ("cmath", "import cmath\nans = cmath.sqrt(-1)", PURE),
    (
        "fractions",
        "from fractions import Fraction\nf = Fraction(3, 4) + Fraction(1, 4)\n"
        "ans = f.numerator, f.denominator, Fraction(1, 3).limit_denominator(10)",
        PURE,
    ),
    ("statistics", "import statistics\nans = statistics.mean([1, 2, 3]), statistics.median([3, 1, 2])", PURE),
    (
        "itertools",
        "import itertools\nans = list(itertools.permutations([1, 2, 3], 2)), "
        "list(itertools.chain.from_iterable([[1], [2]]))",
        PURE,
    ),
    (
        "functools",
        "from functools import reduce, lru_cache\n@lru_cache(maxsize=None)\ndef fib(n):\n"
        "    return n if n < 2 else fib(n - 1) + fib(n - 2)\nans = reduce(lambda a, b: a * b, [1, 2, 3]), fib(20)",
        PURE,
    ),
    (
        "collections",
        "from collections import Counter, defaultdict, deque\nc = Counter('abca')\n"
        "d = defaultdict(int)\nd['x'] += 1\nq = deque([1, 2])\nq.appendleft(0)\nans = c.most_common(1), d, list(q)",
        PURE,
    ),
    ("operator", "import operator\nfrom functools import reduce\nans = reduce(operator.mul, [1, 2, 3, 4])", PURE),
    (
        "heapq-bisect",
        "import heapq, bisect\nh = [5, 1, 3]\nheapq.heapify(h)\nans = heapq.heappop(h), "
        "bisect.bisect_left([1, 2, 4], 3)",
        PURE,
    ),
    ("string-constants", "import string\nans = string.ascii_lowercase.index('c')", PURE),
    (
        "numpy",
        "import numpy as np\na = np.array([1.0, 2.0, 3.0])\nans = float(a.sum() + a.mean() + np.sqrt(a).max())"
        "\nb = a.reshape(3, 1).T.tolist()",
        PURE,
    ),
    (
        "numpy-linalg",
        "import numpy as np\nans = np.linalg.solve(np.array([[2., 1.], [1., 3.]]), np.array([3., 5.])).tolist()",
        PURE,
    ),
    (
        "numpy-linalg-import",
        "import numpy.linalg as la\nfrom numpy.linalg import det\nimport numpy\n"
        "ans = float(la.inv(numpy.eye(2))[0, 0] + det(numpy.eye(2)))",
        PURE,
    ),
    ("module-as-value", "import math\ndef use(m):\n    return m.sqrt(9)\nx = math\nans = use(x), [math][0].pi", PURE),
    ("ufunc-methods", "import numpy as np\nans = int(np.add.reduce(np.arange(5)))", PURE),
    # --- modules and members that reach shared state
    ("import-os", "import os\nos.system('true')", "import of 'os'"),
    ("import-sys", "import sys\nsys.modules['x'] = 1", "import of 'sys'"),
    ("import-builtins", "import builtins\nbuiltins.len([])", "import of 'builtins'"),
    ("import-random", "import random\nrandom.seed(1)", "import of 'random'"),
    ("import-numpy-random", "import numpy.random", "import of 'numpy.random'"),
    ("numpy-random-attr", "import numpy as np\nnp.random.seed(0)", "attribute 'random'"),
    ("from-numpy-random", "from numpy import random", "attribute 'random'"),
    ("import-decimal", "import decimal\ndecimal.getcontext()", "import of 'decimal'"),
    ("from-decimal", "from decimal import Decimal\nans = Decimal(1) / 3", "import of 'decimal'"),
    ("calendar-mdays", "import calendar\ncalendar.mdays[2] = 1", "import of 'calendar'"),
    ("numbers-register", "import numbers\nnumbers.Rational.register(float)", "import of 'numbers'"),
    ("copy-dispatch", "import copy\ncopy._deepcopy_dispatch[int] = print", "import of 'copy'"),
    ("sympy", "import sympy\nsympy.evaluate(False)", "import of 'sympy'"),
    ("datetime-now", "import datetime\nans = datetime.datetime.now()", "import of 'datetime'"),
    ("re-cache", "import re\nre.sub('a', 'b', 'a')", "import of 're'"),
    ("np-seterr", "import numpy as np\nnp.seterr(all='raise')", "attribute 'seterr'"),
    ("np-seterrcall", "import numpy as np\nnp.seterrcall(print)", "attribute 'seterrcall'"),
    (
        "np-errstate-parked",
        "import numpy as np\ndef g():\n    with np.errstate(all='ignore'):\n        yield 1\npark = g()\nnext(park)",
        "opcode BEFORE_WITH",
    ),
    ("np-errstate-enter", "import numpy as np\nnp.errstate(all='ignore').__enter__()", "name '__enter__'"),
    ("np-printoptions", "import numpy as np\nnp.set_printoptions(precision=1)", "attribute 'set_printoptions'"),
    ("np-finfo", "import numpy as np\nnp.finfo(float).eps", "attribute 'finfo'"),
    ("np-sctypeDict", "import numpy as np\nnp.sctypeDict['x'] = 1", "attribute 'sctypeDict'"),
    ("np-ndarray", "import numpy as np\nnp.ndarray((4,), buffer=b'abcd')", "attribute 'ndarray'"),
    ("np-lib", "from numpy import lib", "attribute 'lib'"),
    ("np-lib-attr", "import numpy as np\nnp.lib.stride_tricks.as_strided", "attribute 'lib'"),
    ("np-core", "import numpy as np\nnp._core", "attribute '_core'"),
    ("np-empty", "import numpy as np\nans = np.empty(10)", "attribute 'empty'"),
    ("np-load", "import numpy as np\nnp.load('x.npy', allow_pickle=True)", "attribute 'load'"),
    ("np-frombuffer", "import numpy as np\nnp.frombuffer(b'abcd', dtype='u1')", "attribute 'frombuffer'"),
    ("arr-ctypes", "import numpy as np\nnp.array([1]).ctypes.data", "attribute 'ctypes'"),
    ("arr-base", "import numpy as np\nans = np.arange(4).reshape(2, 2).base", "attribute 'base'"),
    ("arr-data", "import numpy as np\nans = np.arange(4).data", "attribute 'data'"),
    ("arr-flags", "import numpy as np\na = np.arange(3)\na.flags.writeable = True", "opcode STORE_ATTR"),
    ("arr-flags-read", "import numpy as np\nans = np.arange(3).flags", "attribute 'flags'"),
    ("arr-view", "import numpy as np\nans = np.arange(3).view('u1')", "attribute 'view'"),
    ("arr-tofile", "import numpy as np\nnp.arange(3).tofile('/tmp/x')", "attribute 'tofile'"),
    ("arr-dump", "import numpy as np\nnp.arange(3).dump('/tmp/x')", "attribute 'dump'"),
    ("arr-dtype", "import numpy as np\nans = np.arange(3).dtype", "attribute 'dtype'"),
    ("statistics-normaldist", "import statistics\nstatistics.NormalDist().samples(3)", "attribute 'NormalDist'"),
    ("namedtuple", "import collections\ncollections.namedtuple('P', 'x y')", "attribute 'namedtuple'"),
    ("attrgetter", "import operator\noperator.attrgetter('__class__')(1)", "attribute 'attrgetter'"),
    ("methodcaller", "import operator\noperator.methodcaller('format')('{0.__class__}')", "attribute 'methodcaller'"),
    ("string-formatter", "import string\nstring.Formatter().format('{0.__class__}', 1)", "attribute 'Formatter'"),
    ("string-template", "import string\nstring.Template('$x').substitute(x=1)", "attribute 'Template'"),
    (
        "functools-wraps",
        "import functools\ndef f():\n    pass\ng = functools.wraps(len, updated=('__globals__',))(f)",
        "attribute 'wraps'",
    ),
    ("functools-update-wrapper", "from functools import update_wrapper", "attribute 'update_wrapper'"),
    ("functools-singledispatch", "import functools\nfunctools.singledispatch(len)", "attribute 'singledispatch'"),
    ("heapq-merge", "import heapq\nm = heapq.merge([1], [2])", "attribute 'merge'"),
    ("relative-import", "from . import math", "relative import"),
    ("relative-import-named", "from .math import sqrt", "relative import"),
    ("star-import", "from math import *", "opcode IMPORT_STAR"),
    ("module-dict", "import math\nans = math.__dict__", "name '__dict__'"),
    ("module-loader", "import math\nans = math.__loader__", "name '__loader__'"),
    # --- builtins and names
    ("builtins-name", "ans = __builtins__['open']", "name '__builtins__'"),
    ("import-hook", "ans = __import__('os')", "name '__import__'"),
    ("build-class", "ans = __build_class__", "name '__build_class__'"),
    ("dunder-name-main", "if __name__ == '__main__':\n    ans = 1", "name '__name__'"),
    ("open", "open('/etc/passwd').read()", "name 'open'"),
    ("print-file", "print('x', file=open('/tmp/f', 'w'))", "name 'open'"),
    ("eval", "ans = eval('1 + 1')", "name 'eval'"),
    ("exec", "exec('ans = 1')", "name 'exec'"),
    ("compile", "compile('1', 'f', 'eval')", "name 'compile'"),
    ("globals", "globals()['__builtins__']", "name 'globals'"),
    ("locals", "ans = locals()", "name 'locals'"),
    ("vars", "ans = vars()", "name 'vars'"),
    ("dir", "ans = dir()", "name 'dir'"),
    ("getattr", "ans = getattr(1, '__class__')", "name 'getattr'"),
    ("setattr", "import math\nsetattr(math, 'pi', 3)", "name 'setattr'"),
    ("hasattr", "ans = hasattr(1, 'real')", "name 'hasattr'"),
    ("type-three-args", "A = type('A', (), {'__eq__': lambda s, o: True})", "name 'type'"),
    ("object", "ans = object.__subclasses__()", "name 'object'"),
    ("super", "ans = super", "name 'super'"),
    ("id", "ans = id(1)", "name 'id'"),
    ("hash", "ans = hash(len)", "name 'hash'"),
    ("repr", "ans = repr(len)", "name 'repr'"),
    ("memoryview", "ans = memoryview(b'x')", "name 'memoryview'"),
    ("input", "ans = input()", "name 'input'"),
    ("breakpoint", "breakpoint()", "name 'breakpoint'"),
    ("help", "help(len)", "name 'help'"),
    ("exit", "exit()", "name 'exit'"),
    ("system-exit", "raise SystemExit(0)", "name 'SystemExit'"),
    ("catch-base-exception", "try:\n    pass\nexcept BaseException:\n    pass", "name 'BaseException'"),
    ("shadow-refused-builtin", "id = 3\nans = id", "name 'id'"),
    # --- attributes that lead out
    ("class-attr", "ans = [].__class__", "name '__class__'"),
    ("subclasses", "ans = ().__class__.__bases__[0].__subclasses__()", "name '__class__'"),
    ("mro", "ans = int.mro()", "attribute 'mro'"),
    ("func-globals", "f = lambda: 0\nans = f.__globals__['__builtins__']", "name '__globals__'"),
    ("func-code", "f = lambda: 0\nans = f.__code__", "name '__code__'"),
    ("builtin-self", "ans = len.__self__", "name '__self__'"),
    ("gi-frame", "g = (i for i in [1])\nans = g.gi_frame", "attribute 'gi_frame'"),
    ("gi-code", "g = (i for i in [1])\nans = g.gi_code", "attribute 'gi_code'"),
    ("gen-send", "g = (i for i in [1])\ng.send(None)", "attribute 'send'"),
    (
        "traceback-frame",
        "try:\n    1 / 0\nexcept Exception as e:\n    ans = e.__traceback__.tb_frame",
        "name '__traceback__'",
    ),
    (
        "with-traceback",
        "try:\n    1 / 0\nexcept Exception as e:\n    ans = e.with_traceback(None)",
        "attribute 'with_traceback'",
    ),
    ("attribute-error-obj", "try:\n    [].nope\nexcept AttributeError as e:\n    ans = e.obj", "attribute 'nope'"),
    (
        "stopiteration-value",
        "try:\n    next(iter([]))\nexcept StopIteration as e:\n    ans = e.value",
        "attribute 'value'",
    ),
    ("private-attr", "ans = (1).__add__", "name '__add__'"),
    (
        "single-underscore-attr",
        "from fractions import Fraction\nans = Fraction._operator_fallbacks",
        "attribute '_operator_fallbacks'",
    ),
    ("str-format", "ans = '{0.__class__}'.format(1)", "attribute 'format'"),
    ("str-format-on-class", "ans = str.format('{0.__globals__}', len)", "name 'str'"),
    ("str-format-on-literal", "ans = ''.format('{0.__globals__}', len)", "attribute 'format'"),
    ("format-map", "ans = '{a.real}'.format_map({'a': 1})", "attribute 'format_map'"),
    ("fstring-dunder", "x = 1\nans = f'{x.__class__}'", "name '__class__'"),
    ("encode-codec", "ans = 'abc'.encode('rot13')", "attribute 'encode'"),
    ("decode-codec", "ans = b'abc'.decode('utf-8')", "attribute 'decode'"),
    ("partial-func", "import functools\nans = functools.partial(len).func", "attribute 'func'"),
    ("str-encoding", "ans = str(b'a', 'no-such-codec')", "name 'str'"),
    ("str-encoding-keyword", "ans = str(b'a', encoding='x1')", "name 'str'"),
    ("str-star-args", "args = (b'a', 'x1')\nans = str(*args)", "name 'str'"),
    ("str-as-value", "s = str\nans = s(b'a', 'x1')", "name 'str'"),
    ("str-in-map", "ans = list(map(str, [b'a'], ['x1']))", "name 'str'"),
    ("str-in-defaultdict", "import collections\nd = collections.defaultdict(str)\nf = d.default_factory", "name 'str'"),
    ("str-isinstance", "ans = isinstance(1, str)", "name 'str'"),
    ("str-in-function", "def f(a, b):\n    return str(a, b)\nans = f(b'a', 'x1')", "name 'str'"),
    ("str-method-arg", "def f(a):\n    return g(str, a)", "name 'str'"),
    # --- statements and opcodes
    ("class", "class A:\n    pass", "opcode LOAD_BUILD_CLASS"),
    (
        "class-dunder",
        "class A:\n    def __eq__(self, other):\n        return True\nans = A() == 1",
        "opcode LOAD_BUILD_CLASS",
    ),
    ("attr-write-module", "import math\nmath.pi = 3", "opcode STORE_ATTR"),
    ("attr-write-func", "def f():\n    pass\nf.x = 1", "opcode STORE_ATTR"),
    ("attr-delete", "import math\ndel math.pi", "opcode DELETE_ATTR"),
    ("with", "with open('x') as f:\n    pass", "opcode BEFORE_WITH"),
    ("async-def", "async def f():\n    return 1", "async code"),
    ("async-await", "async def f():\n    await g()", "opcode GET_AWAITABLE"),
    ("async-gen", "async def f():\n    yield 1", "opcode ASYNC_GEN_WRAP"),
    ("match-class", "match 1:\n    case int(real=r):\n        ans = r", "opcode MATCH_CLASS"),
    ("match-sequence", "match [1]:\n    case [x]:\n        ans = x", "opcode MATCH_SEQUENCE"),
    ("except-star", "try:\n    pass\nexcept* ValueError:\n    pass", "opcode CHECK_EG_MATCH"),
    ("annotations", "x: int = 5", "opcode SETUP_ANNOTATIONS"),
    (
        "generator-finally",
        "def g():\n    try:\n        yield 1\n    finally:\n        print('later')\n"
        "park = g()\nnext(park)\ncycle = [park]\ncycle.append(cycle)",
        "try block in generator 'g'",
    ),
    (
        "generator-except",
        "def g():\n    try:\n        yield 1\n    except GeneratorExit:\n        pass\npark = g()\nnext(park)",
        "try block in generator 'g'",
    ),
    (
        "nested-generator-try",
        "def outer():\n    def inner():\n        try:\n            yield\n        finally:\n"
        "            pass\n    return inner",
        "try block in generator 'inner'",
    ),
    # Forms that 3.12 and 3.13 compile differently from 3.11 (intrinsics, the method form of LOAD_ATTR,
    # superinstructions, inlined comprehensions, the generators' implicit handler, the NULL after a
    # callee, f-string conversions): the same verdict on every reviewed release.
    ("unary-plus", "x = 2\nans = +x", PURE),
    ("star-args-call", "def f(a, b):\n    return a + b\nans = f(*[1, 2])", PURE),
    ("keyword-call", "def f(a, b=2, *, c=3):\n    return a + b + c\nans = f(1, c=4)", PURE),
    ("generator-plain", "def g(n):\n    for i in range(n):\n        yield i * i\nans = sum(g(4))", PURE),
    (
        "generator-comprehension",
        "def g(xs):\n    ys = [x * 2 for x in xs]\n    yield sum(ys)\nans = next(g([1, 2]))",
        PURE,
    ),
    ("generator-yield-from", "def g():\n    yield from range(3)\nans = list(g())", PURE),
    (
        "generator-except-yield",
        "def g():\n    try:\n        yield 1\n    except ValueError:\n        yield 2\nans = 1",
        "try block in generator 'g'",
    ),
    (
        "generator-finally-print",
        "def g():\n    try:\n        yield 1\n    finally:\n        print(1)\nans = 1",
        "try block in generator 'g'",
    ),
    (
        "genexpr-except-inside",
        "def g():\n    try:\n        return (x for x in range(3))\n    except ValueError:\n        return None\nans = sum(g())",
        PURE,
    ),
    ("method-form-pure", "xs = [3, 1]\nxs.sort()\nans = xs.count(1) + len(xs)", PURE),
    ("method-form-refused", "def g():\n    yield 1\nans = g().throw(ValueError)", "attribute 'throw'"),
    ("method-form-dunder", "ans = (1).__add__(2)", "name '__add__'"),
    (
        "superinstructions",
        "def f(a, b):\n    c, d = a, b\n    e = c\n    return a + b + c + d + e\nans = f(1, 2)",
        PURE,
    ),
    ("fstring-conversions", "x = 1.5\nans = f'{x!r} {x!s} {x!a} {x:.2f} {x:>{5}}'", PURE),
    ("str-call-module", "n = 3\nans = str(n) + str(n.real) + str(7)", PURE),
    ("str-call-function", "def f(n):\n    return str(n) + str(n.imag)\nans = f(2)", PURE),
    ("str-call-local-maybe-unbound", "def f(k):\n    if k:\n        m = 1\n    return str(m)\nans = f(1)", PURE),
    ("str-codec", "ans = str(b'x', 'ascii')", "name 'str' other than in str(value)"),
    (
        "str-codec-in-function",
        "def f(b):\n    return str(b, 'ascii')\nans = f(b'x')",
        "name 'str' other than in str(value)",
    ),
    ("str-keyword", "ans = str(object=3)", "name 'str' other than in str(value)"),
    ("str-of-method-call", "x = 1\nans = str(x.conjugate())", "name 'str' other than in str(value)"),
    ("comprehension-cell", "fs = [lambda: i for i in range(3)]\nans = [f() for f in fs]", PURE),
    ("comprehension-nested", "ys = [1, 2]\nans = [[x + y for y in ys] for x in ys]", PURE),
    ("comprehension-walrus", "ans = [y for x in range(3) if (y := x * 2)]\nans = ans + [y]", PURE),
    ("comprehension-in-function", "def f(n):\n    return {k: k * k for k in range(n)}\nans = f(3)[2]", PURE),
    ("assert", "x = 1\nassert x == 1, 'one'\nans = x", PURE),
    ("slices", "xs = [1, 2, 3, 4]\nxs[1:3] = [9]\nans = xs[::2] + xs[1:]", PURE),
]


# Refusals whose reason names a 3.11 opcode that 3.12 folded into another instruction: the same refusal,
# named by what this release compiles.
REASONS_SINCE_312 = {
    "opcode IMPORT_STAR": "intrinsic INTRINSIC_IMPORT_STAR",
    "opcode ASYNC_GEN_WRAP": "async code",
}


def expected_here(expected: str) -> str:
    return REASONS_SINCE_312.get(expected, expected) if sys.version_info >= (3, 12) else expected


@pytest.mark.parametrize(("source", "expected"), [pytest.param(s, e, id=i) for i, s, e in TABLE])
def test_verdict(source: str, expected: str | None) -> None:
    reason = check(source)
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and expected_here(expected) in reason, reason


def test_table_is_large_and_ids_unique() -> None:
    assert len(TABLE) >= 60
    assert len({row[0] for row in TABLE}) == len(TABLE)


# ---------------------------------------------------------------------------------- EXTENDED_ARG
def many_names(count: int) -> str:
    return "\n".join(f"v{i} = {i}" for i in range(count))


def low_byte_trap(attribute: str, apart: int = 256) -> str:
    """A program whose `attribute` read has a name index of `apart` + k where name k is 'real'
    (allowed): a decoder that drops EXTENDED_ARG would check 'real' instead. From 3.12 on LOAD_ATTR's
    argument is the index shifted left by one, so names 128 apart make the same trap."""
    for filler in range(300):
        source = f"{many_names(filler)}\nw = v0.real\n{many_names(300)}\nans = v0.{attribute}"
        names = compile(source, FILENAME, "exec").co_names
        if names.index(attribute) == names.index("real") + apart:
            return source
    raise AssertionError(f"no filler puts the names {apart} apart")


def long_if_body(lines: int) -> str:
    return "x = 1\nif x:\n" + "\n".join(f"    y{i} = x + {i}" for i in range(lines)) + "\nans = x"


EXTENDED = [
    ("names-300-pure", many_names(300) + "\nans = v299.real + v298.bit_length()", PURE),
    ("names-300-attack", many_names(300) + "\nans = v299.gi_frame", "attribute 'gi_frame'"),
    ("low-byte-trap-attack", low_byte_trap("gi_frame"), "attribute 'gi_frame'"),
    ("low-byte-trap-pure", low_byte_trap("imag"), PURE),
    ("shifted-low-byte-trap-attack", low_byte_trap("gi_frame", 128), "attribute 'gi_frame'"),
    ("shifted-low-byte-trap-method", low_byte_trap("gi_frame", 128) + "()", "attribute 'gi_frame'"),
    ("shifted-low-byte-trap-pure", low_byte_trap("imag", 128), PURE),
    ("names-300-import-pure", many_names(300) + "\nimport math\nans = math.sqrt(v299)", PURE),
    ("names-300-import-os", many_names(300) + "\nimport os", "import of 'os'"),
    ("names-300-dunder", many_names(300) + "\nans = __builtins__", "name '__builtins__'"),
    (
        "consts-300-relative",
        "\n".join(f"c = {i}.5" for i in range(300)) + "\nfrom .math import sqrt",
        "relative import",
    ),
    ("long-jump-pure", long_if_body(300), PURE),
    ("long-loop-pure", "t = 0\nfor i in range(3):\n" + "\n".join(f"    t += i * {k}" for k in range(300)), PURE),
    ("long-jump-class", long_if_body(300) + "\nclass A:\n    pass", "opcode LOAD_BUILD_CLASS"),
    ("long-jump-attr", long_if_body(300) + "\nans = x.gi_frame", "attribute 'gi_frame'"),
]


@pytest.mark.parametrize(("source", "expected"), [pytest.param(s, e, id=i) for i, s, e in EXTENDED])
def test_verdict_with_extended_args(source: str, expected: str | None) -> None:
    code = compile(source, FILENAME, "exec")
    assert dis.opmap["EXTENDED_ARG"] in code.co_code[::2]  # the case is what it says
    reason = why_not_pure(code)
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and expected in reason, reason


def test_other_python_versions_prove_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pure, "_REVIEWED", False)
    assert "not reviewed" in (check("ans = 1") or "")


# ------------------------------------------------------------------------------------- the data
def test_every_opcode_is_reviewed() -> None:
    reviewed = pure.ALLOWED_OPCODES.keys() | pure.REFUSED_OPCODES.keys()
    assert set(dis.opmap) == reviewed
    assert not pure.ALLOWED_OPCODES.keys() & pure.REFUSED_OPCODES.keys()
    # Pseudo-instructions (3.12 on) are numbered past 255 and never in co_code: none may be allowed.
    assert [name for name in pure.ALLOWED_OPCODES if dis.opmap[name] > 255] == []
    assert bytes(sorted(pure._ALLOWED_OPS)) == bytes(sorted(dis.opmap[name] for name in pure.ALLOWED_OPCODES))


def test_each_release_has_its_own_review() -> None:
    """The tables of every reviewed release are complete and disjoint on their own; this interpreter
    uses its release's."""
    assert pure.REVIEWED_VERSIONS == ((3, 11), (3, 13))
    for version, (allowed, refused) in pure._OPCODE_REVIEWS.items():
        assert not allowed.keys() & refused.keys(), version
        assert all(reason.strip() for reason in (*allowed.values(), *refused.values())), version
    assert pure._OPCODE_REVIEWS[sys.version_info[:2]] == (pure.ALLOWED_OPCODES, pure.REFUSED_OPCODES)
    assert pure.warm_tier_refusal() is None


def test_an_unreviewed_release_says_why_it_has_no_warm_tier(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pure, "_REVIEWED", False)
    reason = pure.warm_tier_refusal() or ""
    assert "not reviewed" in reason and "3.11, 3.13" in reason and "every program forks" in reason


@pytest.mark.skipif(sys.version_info < (3, 12), reason="CALL_INTRINSIC_1 exists from 3.12 on")
def test_intrinsics_are_the_reviewed_ones() -> None:
    descriptions = dis._intrinsic_1_descs  # type: ignore[attr-defined]
    for number, reason in pure.ALLOWED_INTRINSICS.items():
        assert reason.startswith(descriptions[number] + ":"), (number, descriptions[number])


def with_bytecode(source: str, instructions: list[tuple[str, int]]) -> types.CodeType:
    """`source`'s code with `instructions` put before its last one (the final return): a code object the
    compiler would not make, to check that the verifier reads what the interpreter would run."""
    code = compile(source, FILENAME, "exec")
    extra = b"".join(bytes((dis.opmap[name], arg)) for name, arg in instructions)
    return code.replace(co_code=code.co_code[:-2] + extra + code.co_code[-2:])


@pytest.mark.skipif(sys.version_info < (3, 12), reason="CALL_INTRINSIC_1 exists from 3.12 on")
@pytest.mark.parametrize(
    ("instructions", "expected"),
    [
        ([("LOAD_CONST", 0), ("CALL_INTRINSIC_1", 1), ("POP_TOP", 0)], "intrinsic INTRINSIC_PRINT"),
        ([("LOAD_CONST", 0), ("CALL_INTRINSIC_1", 2), ("POP_TOP", 0)], "intrinsic INTRINSIC_IMPORT_STAR"),
        ([("LOAD_CONST", 0), ("CALL_INTRINSIC_1", 4), ("POP_TOP", 0)], "intrinsic INTRINSIC_ASYNC_GEN_WRAP"),
        ([("LOAD_CONST", 0), ("CALL_INTRINSIC_1", 11), ("POP_TOP", 0)], "intrinsic INTRINSIC_TYPEALIAS"),
        # An allowed low byte widened by EXTENDED_ARG: 261, past the interpreter's table.
        ([("LOAD_CONST", 0), ("EXTENDED_ARG", 1), ("CALL_INTRINSIC_1", 5), ("POP_TOP", 0)], "intrinsic 261"),
        ([("LOAD_CONST", 0), ("CALL_INTRINSIC_2", 1), ("POP_TOP", 0)], "opcode CALL_INTRINSIC_2"),
        ([("LOAD_CONST", 0), ("CALL_INTRINSIC_1", 5), ("POP_TOP", 0)], PURE),
    ],
    ids=["print", "import-star", "async-gen-wrap", "typealias", "extended", "intrinsic-2", "unary-plus"],
)
def test_intrinsics_are_checked_by_argument(instructions: list[tuple[str, int]], expected: str | None) -> None:
    reason = why_not_pure(with_bytecode("ans = 1", instructions))
    assert reason == expected


SINCE_312_ONLY = [
    ("type-alias", "type X = int\nans = 1"),
    ("generic-function", "def f[T](x: T) -> T:\n    return x\nans = f(1)"),
    ("generic-class", "class C[T]:\n    pass\nans = 1"),
    ("type-param-default", "def f[T = int](x):\n    return x\nans = f(1)"),
]


@pytest.mark.skipif(sys.version_info < (3, 13), reason="syntax of 3.12 and 3.13 (type parameters and their defaults)")
@pytest.mark.parametrize("source", [pytest.param(s, id=i) for i, s in SINCE_312_ONLY])
def test_type_parameter_syntax_is_refused(source: str) -> None:
    reason = check(source) or ""
    assert reason.startswith(("opcode ", "intrinsic ")), reason


def test_every_listed_member_and_builtin_exists() -> None:
    import builtins

    for module_name, members in PURE_MODULES.items():
        module = importlib.import_module(module_name)
        assert [m for m in members if not hasattr(module, m)] == [], module_name
    assert [name for name in pure.PURE_BUILTIN_REASONS if not hasattr(builtins, name)] == []
    assert not pure.PURE_BUILTIN_REASONS.keys() & pure.REFUSED_BUILTINS.keys()


def test_proxies_hide_nothing_an_allowed_name_finds() -> None:
    """An allowed attribute name that the real module has is either a pure member or makes the program
    unproven (the fork tier decides): never an AttributeError in the warm tier and a value in a fork."""
    for module_name, members in PURE_MODULES.items():
        module = importlib.import_module(module_name)
        hidden = sorted(a for a in pure.ALLOWED_ATTRIBUTE_NAMES if a not in members and hasattr(module, a))
        proxy = pure._proxy(module_name)
        for attribute in hidden:
            pure.pure_globals()  # a fresh record
            with pytest.raises(pure.Unproven):
                getattr(proxy, attribute)
            assert pure.unproven() is not None


def test_what_the_warm_tier_admits_the_restricted_policy_admits() -> None:
    """The verdict does not depend on the tier: every pure member is on the restricted policy's member
    allowlist, and every program the verifier admits compiles under RestrictedPython."""
    from potrun.policies.members import MEMBERS
    from potrun.policies.restricted import compile_restricted_program

    for module_name, members in PURE_MODULES.items():
        assert set(members) <= set(MEMBERS.get(module_name, {})), (
            module_name,
            set(members) - set(MEMBERS[module_name]),
        )
    for _name, source, expected in ((row[0], row[1], row[2]) for row in TABLE):
        if expected is None:
            compile_restricted_program(source)  # raises PolicyViolation if the policy refused it


def test_allowed_names_are_not_refused_by_the_restricted_policy() -> None:
    from potrun.policies import ALLOWED_MODULES, DENIED_ATTRIBUTES, DENIED_NAMES, get_policy
    from potrun.policies.restricted import Guards

    allowed = pure.ALLOWED_ATTRIBUTE_NAMES
    assert not [name for name in allowed if name.startswith("_")]
    assert not allowed & DENIED_NAMES
    for root, denied in DENIED_ATTRIBUTES.items():
        if any(name.partition(".")[0] == root for name in PURE_MODULES):
            assert not allowed & denied, root
    assert set(PURE_MODULES) <= ALLOWED_MODULES
    restricted_builtins = Guards(get_policy("restricted")).builtins
    assert set(pure.PURE_BUILTIN_REASONS) <= set(restricted_builtins)
    refused_there = {"format", "format_map", "getattr", "hasattr"} & allowed
    assert refused_there == set()


FORBIDDEN_ATTRIBUTES = {
    "base",
    "data",
    "ctypes",
    "flags",
    "view",
    "tofile",
    "dump",
    "dumps",
    "dtype",
    "format",
    "format_map",
    "encode",
    "decode",
    "obj",
    "gi_frame",
    "gi_code",
    "gi_yieldfrom",
    "f_back",
    "f_globals",
    "f_locals",
    "f_builtins",
    "tb_frame",
    "tb_next",
    "cr_frame",
    "ag_frame",
    "mro",
    "register",
    "seterr",
    "errstate",
    "setflags",
    "resize",
    "getfield",
    "setfield",
    "itemset",
    "byteswap",
    "newbyteorder",
    "strides",
    "send",
    "throw",
    "close",
    "with_traceback",
    "func",
    "keywords",
    "cache_clear",
    "flat",
    "fget",
    "empty",
    "empty_like",
    "random",
    "lib",
    "load",
    "save",
    "fromfile",
    "frombuffer",
    "ndarray",
}


def test_refused_attributes_are_not_allowed() -> None:
    assert pure.ALLOWED_ATTRIBUTE_NAMES.isdisjoint(FORBIDDEN_ATTRIBUTES)


def probe_values() -> dict[str, Callable[[], Any]]:
    """A fresh instance of every kind of value a pure program can hold, by a name for the report."""
    import collections
    import fractions
    import functools
    import itertools
    import statistics

    import numpy as np

    def own_function() -> int:
        return 1

    def own_generator() -> Iterator[int]:
        yield 1

    probes: dict[str, Callable[[], Any]] = {
        "int": lambda: 12345678901,
        "float": lambda: 1.5,
        "complex": lambda: 1j,
        "bool": lambda: True,
        "str": lambda: "text",
        "bytes": lambda: b"bytes",
        "list": lambda: [1],
        "tuple": lambda: (1, [2]),
        "dict": lambda: {1: 2},
        "set": lambda: {1},
        "frozenset": lambda: frozenset({1}),
        "range": lambda: range(3),
        "slice": lambda: slice(1, 2),
        "iterator": lambda: iter([1]),
        "enumerate": lambda: enumerate([1]),
        "zip": lambda: zip([1]),
        "map": lambda: map(abs, [1]),
        "filter": lambda: filter(None, [1]),
        "reversed": lambda: reversed([1]),
        "generator": own_generator,
        "genexpr": lambda: (x for x in [1]),
        "function": lambda: own_function,
        "lambda": lambda: lambda: 0,
        "bound-method": lambda: [].append,
        "dict-view": lambda: {1: 2}.items(),
        "exception": lambda: ValueError(1),
        "caught-attribute-error": _caught_attribute_error,
        "fraction": lambda: fractions.Fraction(1, 3),
        "counter": lambda: collections.Counter("ab"),
        "defaultdict": lambda: collections.defaultdict(list),
        "deque": lambda: collections.deque([1]),
        "ordereddict": lambda: collections.OrderedDict(a=1),
        "count": lambda: itertools.count(),
        "chain": lambda: itertools.chain([1]),
        "groupby": lambda: itertools.groupby([1]),
        "partial": lambda: functools.partial(abs),
        "lru": lambda: functools.lru_cache(None)(own_function),
        "cmp-key": lambda: functools.cmp_to_key(lambda a, b: 0)(1),
        "regression": lambda: statistics.linear_regression([1, 2, 3], [2, 4, 6]),
        "ndarray": lambda: np.arange(6.0).reshape(2, 3),
        "np-scalar": lambda: np.float64(1.5),
        "np-int": lambda: np.int64(3),
        "np-bool": lambda: np.bool(True),
        "np-object-array": lambda: np.array([[1]], dtype="O"),
        "eig": lambda: np.linalg.eig(np.eye(2)),
        "svd": lambda: np.linalg.svd(np.eye(2)),
        "unique": lambda: np.unique([1, 1, 2], return_counts=True),
        "np-complex": lambda: np.sqrt(np.array([-1 + 0j])),
    }
    return probes


def _caught_attribute_error() -> BaseException:
    try:
        pure._proxy("math").nothing  # noqa: B018
    except AttributeError as error:
        return error
    raise AssertionError("no error")


def shared_objects() -> dict[str, object]:
    """Objects every program shares: builtins, module proxies and their members."""
    shared: dict[str, object] = {f"builtin {name}": value for name, value in PURE_BUILTINS.items()}
    for module_name, members in PURE_MODULES.items():
        proxy = pure._proxy(module_name)
        shared[f"proxy {module_name}"] = proxy
        shared.update({f"{module_name}.{m}": getattr(proxy, m) for m in members})
    return shared


def leads_out(value: object) -> str | None:
    """Why a value read by an allowed attribute name would lead to shared or hidden state."""
    if isinstance(value, types.ModuleType) and not isinstance(value, pure._PureModule):
        return "a real module"
    if isinstance(value, (types.FrameType, types.CodeType, types.TracebackType)):
        return "a frame, code or traceback"
    if isinstance(value, types.MappingProxyType):
        return "a class or module namespace"
    return None


MUTABLE = (list, dict, set, bytearray)


def test_allowed_attributes_of_fresh_values_lead_nowhere() -> None:
    import collections

    import numpy as np

    mutable = (*MUTABLE, collections.deque, np.ndarray)
    problems = []
    for kind, make in probe_values().items():
        first, second = make(), make()
        for name in sorted(pure.ALLOWED_ATTRIBUTE_NAMES):
            try:
                a, b = getattr(first, name), getattr(second, name)
            except Exception:
                continue
            why = leads_out(a)
            if why is None and isinstance(a, mutable) and a is b:
                why = "the same mutable object from two fresh values"
            if why:
                problems.append(f"{kind}.{name}: {why}")
    assert problems == []


def test_allowed_attributes_of_shared_objects_are_immutable() -> None:
    """Builtins, classes, proxies and module members are shared by every program: what an allowed name
    reads on them must not be a mutable container (else one program could fill it for the next)."""
    import collections

    import numpy as np

    mutable = (*MUTABLE, collections.deque, np.ndarray)
    problems = []
    for kind, value in shared_objects().items():
        if isinstance(value, mutable):
            problems.append(f"{kind}: is mutable")
        if getattr(value, "cache_info", None) is not None:
            problems.append(f"{kind}: a shared cache")
        for name in sorted(pure.ALLOWED_ATTRIBUTE_NAMES):
            try:
                attribute = getattr(value, name)
            except (Exception, pure.Unproven):  # Unproven: a proxy's hidden member, for the fork tier
                continue
            why = leads_out(attribute) or ("a mutable container" if isinstance(attribute, mutable) else None)
            if why:
                problems.append(f"{kind}.{name}: {why}")
    assert problems == []


# --------------------------------------------------------------------------------------- execution
RUNS = [
    row for row in TABLE if row[2] is None and "undefined" not in row[0]
]  # every admitted table program that completes


def run(source: str, namespace: dict[str, Any]) -> tuple[str, Any]:
    """('ok', ans) or ('error', exception type name), with stdout swallowed."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(source, FILENAME, "exec"), namespace)
    except Exception as error:
        return "error", type(error).__name__
    return "ok", plain(namespace.get("ans"))


def plain(value: Any) -> Any:
    """A comparable form of a value (numpy arrays and scalars as lists and Python numbers)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return type(value)(plain(item) for item in value)
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


@pytest.mark.parametrize("source", [pytest.param(s, id=i) for i, s, _ in RUNS])
def test_pure_run_matches_plain_exec(source: str) -> None:
    assert run(source, pure_globals()) == run(source, {"__name__": "__main__"})


def test_undefined_name_fails_alike() -> None:
    source = next(s for i, s, _ in TABLE if i == "gsm8k-undefined-name")
    assert run(source, pure_globals()) == run(source, {}) == ("error", "NameError")


def test_proxy_is_read_only_and_holds_only_pure_members() -> None:
    proxy = pure._proxy("numpy")
    with pytest.raises(AttributeError):
        proxy.sum = None
    with pytest.raises(AttributeError):
        delattr(proxy, "sum")
    pure_globals()
    with pytest.raises(pure.Unproven):
        proxy.load  # noqa: B018
    assert pure.unproven() == "numpy.load is not a pure member"
    with pytest.raises(AttributeError, match="module 'numpy' has no attribute 'no_such_member'"):
        proxy.no_such_member  # noqa: B018
    namespace = vars(proxy)
    assert set(namespace) == set(PURE_MODULES["numpy"]) | {"__getattr__"}
    assert "__name__" not in namespace and "__spec__" not in namespace
    assert isinstance(proxy.linalg, pure._PureModule) and proxy.linalg is pure._proxy("numpy.linalg")
    assert repr(proxy) == repr(sys.modules["numpy"])  # as a fork shows it: the text must not tell the tier


@pytest.mark.parametrize(
    "source",
    [
        "import os",
        "import random",
        "from numpy import lib",
        "from numpy import random",
        "import numpy.random",
        "from math import *",
        "from . import math",
        "from .math import sqrt",
    ],
)
def test_import_hook_refuses_without_the_verifier(source: str) -> None:
    """A program that reached the hook unverified still gets no real module (a real member the proxy
    does not hold stops it as unproven)."""
    namespace = pure_globals()
    with pytest.raises((ImportError, pure.Unproven)):
        exec(compile(source, FILENAME, "exec"), namespace)
    assert not any(isinstance(v, types.ModuleType) for v in namespace.values())


def test_import_hook_called_as_a_function_gets_no_other_module() -> None:
    """Reached from a call rather than an import statement (as a library's C code reaches it), the hook
    hands out only the libraries pure programs use, never os or sys."""
    namespace = {**pure_globals(), "hook": PURE_BUILTINS["__import__"]}
    for name in ("os", "sys", "builtins", "potrun.sandbox.inside.worker"):
        with pytest.raises(ImportError):
            exec(compile(f"hook({name!r})", FILENAME, "exec"), namespace)


def test_library_lazy_imports_pass_through_the_hook() -> None:
    """ndarray methods and printing import numpy helpers from C through the program's frame."""
    source = "import numpy as np\na = np.arange(6.0).reshape(2, 3)\nans = float(a.sum() + a.std())\nprint(a)"
    assert check(source) is None
    status, value = run(source, pure_globals())
    assert status == "ok" and value == pytest.approx(15 + float(__import__("numpy").arange(6.0).std()))


def test_a_member_the_proxy_hides_makes_the_program_unproven() -> None:
    """Run unverified (the verifier refuses 'histogram'): the proxy stops at the real module's member
    that it does not hold, and the record survives the program's bare except."""
    namespace = pure_globals()
    exec(compile("import numpy as np\ntry:\n    np.histogram([1])\nexcept:\n    ans = 0", FILENAME, "exec"), namespace)
    assert namespace["ans"] == 0
    assert pure.unproven() == "numpy.histogram is not a pure member"
    pure_globals()
    assert pure.unproven() is None


def test_a_name_no_module_has_fails_as_in_the_fork_tier() -> None:
    namespace = pure_globals()
    with pytest.raises(AttributeError, match="module 'math' has no attribute 'nothing'"):
        exec(compile("import math\nmath.nothing", FILENAME, "exec"), namespace)
    assert pure.unproven() is None
    assert isinstance(pure.Unproven("x"), BaseException) and not isinstance(pure.Unproven("x"), Exception)


def test_context_variables_set_inside_a_program_do_not_outlive_it() -> None:
    """np.errstate's state is a context variable: set and never restored inside the program (as a
    MemoryError inside its __exit__ would leave it), it is gone once exec_pure returns."""
    import numpy as np

    before = np.geterr()
    namespace = {**pure_globals(), "leak": lambda: np.errstate(all="raise").__enter__()}
    pure.exec_pure(compile("leak()\nans = 1", FILENAME, "exec"), namespace)
    assert namespace["ans"] == 1 and np.geterr() == before


def test_end_program_frees_what_the_program_made() -> None:
    import weakref

    namespace = pure_globals()
    source = (
        "def f():\n    return 1\ndef g():\n    yield 1\nparked = g()\nnext(parked)\n"
        "cycle = [parked, f]\ncycle.append(cycle)"
    )
    assert check(source) is None
    exec(compile(source, FILENAME, "exec"), namespace)
    function, generator = weakref.ref(namespace["f"]), weakref.ref(namespace["parked"])
    pure.end_program(namespace)
    assert namespace == {} and function() is None and generator() is None


def test_a_crash_while_freeing_happens_inside_end_program() -> None:
    """A deep iterator chain that CPython frees recursively: if freeing it crashes the runner, it does so
    in end_program, before the result would be reported, never later inside another program."""
    import subprocess

    program = "x = iter([1])\nfor i in range(3 * 10**6):\n    x = enumerate(x)\nans = 1"
    assert check(program) is None
    script = (
        "from potrun.policies import pure\n"
        f"namespace = pure.pure_globals()\nexec(compile({program!r}, '<program>', 'exec'), namespace)\n"
        "print('ran', flush=True)\npure.end_program(namespace)\nprint('ended', flush=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.stdout.startswith("ran\n")
    assert (done.returncode == 0 and done.stdout == "ran\nended\n") or (
        done.returncode == -signal.SIGSEGV and done.stdout == "ran\n"
    ), (done.returncode, done.stdout, done.stderr[-500:])


def test_interpreter_code_reading_a_proxys_module_fields_makes_it_unproven() -> None:
    """A failed from-import reads the module's __name__ (to look in sys.modules): a proxy has none, the
    real module has, so the fork tier decides, where the program gets the real module."""
    source = "from math import append"
    assert check(source) is None  # 'append' is an allowed name (list.append)
    # 3.11 turns what the lookup raised into ImportError; 3.13 lets the Unproven through. Either way
    # the program is unproven and the fork tier decides.
    with pytest.raises((ImportError, pure.Unproven)):
        exec(compile(source, FILENAME, "exec"), pure_globals())
    assert pure.unproven() == "math.__name__ is not a pure member"


def test_calling_shared_callables_gives_fresh_objects() -> None:
    """Every pure builtin and member called with no argument (where that works) twice: never the same
    mutable object, which would be shared state handed out."""
    import collections

    import numpy as np

    mutable = (*MUTABLE, collections.deque, np.ndarray)
    with contextlib.redirect_stdout(io.StringIO()):
        for kind, value in shared_objects().items():
            if not callable(value):
                continue
            try:
                first, second = value(), value()
            except Exception:
                continue
            assert not (isinstance(first, mutable) and first is second), kind


def test_nothing_reachable_is_a_file() -> None:
    """print(file=x) calls x.write: no shared object, and no kind of value a pure program can hold,
    has a `write` (the runner's captured sys.stdout stays print's only target)."""
    reachable = [*shared_objects().items(), *((kind, make()) for kind, make in probe_values().items())]
    assert [kind for kind, value in reachable if hasattr(value, "write")] == []


def test_no_pure_member_is_a_python_generator() -> None:
    """A library generator left suspended would run its own cleanup code later; none is listed."""
    import inspect

    for kind, value in shared_objects().items():
        assert not inspect.isgeneratorfunction(value), kind


def test_pure_globals_are_fresh_and_builtins_shared() -> None:
    first, second = pure_globals(), pure_globals()
    assert first is not second and first["__builtins__"] is second["__builtins__"] is PURE_BUILTINS
    exec(compile("ans = 1", FILENAME, "exec"), first)
    assert "ans" not in second and "ans" not in PURE_BUILTINS


# ------------------------------------------------------------------------- the PoT files, executed
class CpuLimit(Exception):
    pass


@contextlib.contextmanager
def cpu_limit(seconds: float) -> Iterator[None]:
    """Stop a runaway program (a few PoT programs loop for ever) by its CPU time."""

    def stop(signum: int, frame: object) -> None:
        raise CpuLimit

    previous = signal.signal(signal.SIGVTALRM, stop)
    signal.setitimer(signal.ITIMER_VIRTUAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)


def run_limited(code: types.CodeType, namespace: dict[str, Any]) -> tuple[str, Any]:
    try:
        with cpu_limit(RUN_LIMIT_S), contextlib.redirect_stdout(io.StringIO()):
            exec(code, namespace)
    except CpuLimit:
        return "timeout", None
    except Exception as error:
        return "error", type(error).__name__
    return "ok", plain(namespace.get("ans"))


@pytest.mark.slow
@pytest.mark.parametrize("name", POT_FILES)
def test_admitted_pot_programs_run_alike(name: str) -> None:
    """Every program of the file that compiles is admitted, and gives in pure_globals() what it gives
    under plain exec. A program that runs out of CPU on either side is left out of the comparison."""
    compared = refused = 0
    mismatches = []
    for file_name, line, source in pot_programs():
        if file_name != name:
            continue
        try:
            code = compile(source, FILENAME, "exec")
        except SyntaxError:
            continue
        if why_not_pure(code) is not None:
            refused += 1
            continue
        warm, plain_run = run_limited(code, pure_globals()), run_limited(code, {"__name__": "__main__"})
        if "timeout" in (warm[0], plain_run[0]):
            continue
        compared += 1
        if warm != plain_run:
            mismatches.append((line, warm, plain_run))
    assert mismatches == []
    assert refused == 0
    assert compared > 900
