"""Escape attempts against the restricted policy (issue 13, classes 1-4), each kept as a test.

Every program of `CASES` runs in-process through `compile_restricted_program` and `Guards` (fast, and
the place to debug a guard), and through the real sandbox on both backends, with fork and with
warm isolation. Its status must be one it lists, and the escape must have failed where it would show:
the marker file a successful payload writes does not exist, and the value is not "ESCAPED" (what every
program sets once past the step the policy must stop). Programs that the policy must still run list
"ok" and the value they must give.

The classes: library functions that take attribute names as strings or hand out internals (1); item
access to modules, namespaces and builtins (1); type() and metaclasses, numpy's raw memory (2);
str.format however reached (3); the compile-time rules (frames, except*, guard names, dunders) and
the module allowlists (4).
"""

from __future__ import annotations

import builtins
import math
import os
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from potrun import Sandbox
from potrun.policies import get_policy
from potrun.policies.members import MEMBERS
from potrun.policies.restricted import (
    Guards,
    PolicyViolation,
    compile_restricted_program,
)

ESCAPED = "ESCAPED"
PV = ("policy_violation",)


@dataclass(frozen=True)
class Case:
    id: str
    source: str
    expect: tuple[str, ...] = PV
    value: Any = None  # checked when the status is "ok" and this is not None


def _c(id: str, source: str, expect: tuple[str, ...] = PV, value: Any = None) -> Any:
    return pytest.param(Case(id, source, expect, value), id=id)


# A successful payload: the marker file appears and the value says so.
TOUCH = "open('MARKER', 'w').write('x')"
OS_TOUCH = "os.system('touch MARKER')"

# The red team's whole exploit (session 13): a class made through sympy.Function's namespace with
# __array_interface__ reads and writes memory; it then swaps a program function's builtins for the
# real ones (CPython 3.11 struct offsets) and imports os. The policy must stop its first step.
SYMPY_MEMORY_ESCAPE = """
import sympy
import numpy as np
iface = {"shape": (1,), "typestr": "<u8", "data": (0, False), "version": 3}
Mem = sympy.Function("Mem", (object,), {"__array_interface__": iface})
m = Mem()
def peek(addr):
    iface["data"] = (addr, False)
    return int(np.asarray(m)[0])
def poke(addr, value):
    iface["data"] = (addr, False)
    a = np.asarray(m)
    a[0] = value
def address(fn):
    return int(str(fn).split(" at ")[1].rstrip(">"), 16)
def holder(a=len):
    return a
def payload():
    imp = getattr(getattr(len, "__self__"), "__import__")
    imp("os").system("touch MARKER")
    return "ESCAPED"
tup = peek(address(holder) + 56)
len_addr = peek(tup + 24)
bmod = peek(len_addr + 24)
bdict = peek(bmod + 16)
poke(bdict, peek(bdict) + 100)
poke(address(payload) + 24, bdict)
ans = payload()
"""

# Issue 35's first example: a cached_property whose attrname the program renamed puts a program dict
# under __array_interface__ on a program object; numpy reads it as an array over any address.
CACHED_PROPERTY_MEMORY = """
import functools
import numpy as np
iface = {"shape": (1,), "typestr": "<u8", "data": (0, False), "version": 3}
def holder(a=len):
    return a
iface["data"] = (int(str(holder).split(" at ")[1].rstrip(">"), 16), False)
def f(self):
    return iface
cp = functools.cached_property(f)
class C:
    x = cp
cp.attrname = "__array_interface__"
c = C()
c.x
word = int(np.asarray(c)[0])
ans = "ESCAPED"
"""

# The copy protocol: an instance-dict __reduce_ex__ (put there as above) makes copy rebuild any object
# and update its __dict__ with the real setattr: a library module's members replaced.
CACHED_PROPERTY_REDUCE = """
import copy, functools, statistics
def evil(proto):
    return (lambda: statistics, (), ({{}}, {{"mean": max}}))
def f(self):
    return evil
cp = functools.cached_property(f)
class C:
    x = cp
cp.attrname = "__reduce_ex__"
c = C()
c.x
{copy}
ans = "ESCAPED" if statistics.mean is max else "not escaped"
"""

# Issue 35's second example: a string key makes numpy evaluate names in its caller's frame.
NUMPY_FRAME = """
import numpy as np
m = np.r_['{key}']
for row in m.tolist():
    for item in row:
        item.begin()
ans = "ESCAPED"
"""

CASES = [
    # ---- 1. library functions that work on attribute names given as strings -------------------------
    _c(
        "update-wrapper-globals",
        "import functools\ndef f(): pass\n"
        "g = functools.update_wrapper(f, functools.reduce, assigned=(), updated=('__globals__',))\n"
        "ans = 'ESCAPED'",
    ),
    _c("from-functools-import-update-wrapper", "from functools import update_wrapper\nans = 'ESCAPED'"),
    _c(
        "functools-wraps",
        "import functools\n@functools.wraps(functools.reduce, updated=('__globals__',))\n"
        "def f(): pass\nans = 'ESCAPED'",
    ),
    _c("functools-singledispatch-eval", "import functools\n@functools.singledispatch\ndef f(x): pass\nans = 'ESCAPED'"),
    _c("attrgetter-dunder", "import operator\nans = operator.attrgetter('__dict__')(1)\nans = 'ESCAPED'"),
    _c(
        "attrgetter-dotted", "import operator\nans = operator.attrgetter('real.__class__.__base__')(1)\nans = 'ESCAPED'"
    ),
    _c(
        "attrgetter-module-member",
        "import operator, statistics\n"
        "os = operator.attrgetter('sys.modules')(statistics)['os']\n" + OS_TOUCH + "\nans = 'ESCAPED'",
    ),
    _c(
        "from-operator-import-attrgetter",
        "from operator import attrgetter\nans = attrgetter('__dict__')(1)\nans = 'ESCAPED'",
    ),
    _c("methodcaller-reduce", "import operator\nans = operator.methodcaller('__reduce_ex__', 2)(1)\nans = 'ESCAPED'"),
    _c(
        "methodcaller-format",
        "import operator\nans = operator.methodcaller('format', 1)('{0.__class__.__mro__}')\nans = 'ESCAPED'",
    ),
    _c("getattr-computed-dunder", "ans = getattr(1, '_' + '_dict__')\nans = 'ESCAPED'"),
    _c(
        "getattr-str-subclass-name",
        "class S(str):\n    def startswith(self, p):\n        return False\n"
        "ans = getattr(1, S('__dict__'))\nans = 'ESCAPED'",
    ),
    _c("hasattr-module-internals", "import statistics\nans = hasattr(statistics, 'sys')\nans = 'ESCAPED'"),
    _c(
        "reduce-getattr",
        "import functools\nans = functools.reduce(getattr, ['__class__', '__base__'], 1)\nans = 'ESCAPED'",
    ),
    _c("map-getattr", "ans = list(map(getattr, [1], ['__dict__']))\nans = 'ESCAPED'"),
    _c("partial-getattr", "import functools\nans = functools.partial(getattr, 1)('__dict__')\nans = 'ESCAPED'"),
    _c(
        "sorted-key-attrgetter",
        "import operator\nans = sorted([1, 2], key=operator.attrgetter('__dict__'))\nans = 'ESCAPED'",
    ),
    _c("copy-dispatch-table", "import copy\ncopy.dispatch_table[int] = print\nans = 'ESCAPED'"),
    _c("copy-of-a-module", "import copy, math\nm = copy.copy(math)\nans = 'ESCAPED'", ("error", "policy_violation")),
    _c(
        "deepcopy-memo-keeps-originals",
        "import copy, string\nmemo = {}\ncopy.deepcopy(string.Template('$x'), memo)\nans = 'ESCAPED'",
    ),
    _c("decimal-default-context", "import decimal\ndecimal.DefaultContext.prec = 3\nans = 'ESCAPED'"),
    _c("builtins-setattr-name", "setattr(1, 'x', 2)\nans = 'ESCAPED'", ("error",)),
    _c("import-builtins", "import builtins\nbuiltins.setattr\nans = 'ESCAPED'"),
    _c("from-builtins-import", "from builtins import setattr\nans = 'ESCAPED'"),
    _c("dunder-builtins-name", "ans = __builtins__['open']\nans = 'ESCAPED'"),
    _c("globals-builtin", "ans = globals()['__builtins__']\nans = 'ESCAPED'"),
    _c("vars-builtin", "ans = vars()\nans = 'ESCAPED'"),
    _c("dir-builtin", "ans = dir()\nans = 'ESCAPED'"),
    _c("open-builtin", TOUCH + "\nans = 'ESCAPED'"),
    _c("dunder-import", "os = __import__('os')\n" + OS_TOUCH + "\nans = 'ESCAPED'"),
    _c("print-self-builtins-module", "ans = getattr(print, '__self__')\nans = 'ESCAPED'"),
    _c("library-function-globals", "import statistics\ng = getattr(statistics.mean, '__globals__')\nans = 'ESCAPED'"),
    _c("library-function-globals-attr", "import statistics\ng = statistics.mean.__globals__\nans = 'ESCAPED'"),
    _c(
        "module-reexport-sys", "import statistics\nos = statistics.sys.modules['os']\n" + OS_TOUCH + "\nans = 'ESCAPED'"
    ),
    _c("module-reexport-by-getattr", "import fractions\nans = getattr(fractions, 'sys')\nans = 'ESCAPED'"),
    _c("calendar-sys", "import calendar\nans = calendar.sys\nans = 'ESCAPED'"),
    _c("random-private-instance", "import random\nans = getattr(random, '_inst')\nans = 'ESCAPED'"),
    _c("random-os", "import random\nans = getattr(random, '_os')\nans = 'ESCAPED'"),
    _c("collections-abc-module", "import collections\nans = collections.abc\nans = 'ESCAPED'"),
    _c("datetime-capi-capsule", "import datetime\nans = datetime.datetime_CAPI\nans = 'ESCAPED'"),
    _c("re-copyreg", "import re\nans = re.copyreg\nans = 'ESCAPED'"),
    _c("numpy-mtrand-module", "import numpy as np\nans = np.random.mtrand\nans = 'ESCAPED'"),
    _c("numpy-polyutils-warnings", "import numpy as np\nans = np.polynomial.polyutils.warnings\nans = 'ESCAPED'"),
    _c("numpy-core", "import numpy as np\nans = np.core\nans = 'ESCAPED'"),
    _c("numpy-testing", "import numpy as np\nans = np.testing\nans = 'ESCAPED'"),
    _c("sympy-core-module", "import sympy\nans = sympy.core\nans = 'ESCAPED'"),
    _c("import-sys", "import sys\nos = sys.modules['os']\n" + OS_TOUCH + "\nans = 'ESCAPED'"),
    _c("import-os-as-submodule", "import numpy.os\nans = 'ESCAPED'"),
    _c("relative-import", "from . import os\nans = 'ESCAPED'"),
    # Admitted since issue 37: a star import binds the module's listed members only.
    _c("star-import", "from math import *\nans = floor(2.5)", ("ok",), 2),
    _c("star-import-binds-listed-only", "from statistics import *\nans = sys", ("error",)),
    _c("from-import-private", "from random import _os\nans = 'ESCAPED'"),
    # ---- 1. item access ------------------------------------------------------------------------------
    _c("numpy-scalartype-memoryview", "import numpy as np\nmv = np.ScalarType[-1]\nans = 'ESCAPED'"),
    _c("numpy-sctypedict", "import numpy as np\nd = np.sctypeDict\nans = 'ESCAPED'"),
    _c("calendar-mdays-write", "import calendar\ncalendar.mdays[2] = 30\nans = 'ESCAPED'"),
    _c(
        "operator-getitem-module-list",
        "import operator, statistics\nans = operator.getitem([statistics.sys], 0)\nans = 'ESCAPED'",
    ),
    _c(
        "itemgetter-on-module-attrs",
        "import operator, math\nans = operator.itemgetter('pi')(math)\nans = 'ESCAPED'",
        ("error",),
    ),
    _c("sympy-singleton-registry", "import sympy\nans = sympy.S\nans = 'ESCAPED'"),
    # ---- 2. type(), metaclasses, classes ---------------------------------------------------------------
    _c("type-of-class-is-metaclass", "ans = type(int)\nans = 'ESCAPED'"),
    _c("type-three-arguments", "C = type('C', (), {'x': 1})\nans = 'ESCAPED'"),
    _c("metaclass-three-arguments", "M = type(type(1))\nC = M('C', (), {})\nans = 'ESCAPED'"),
    _c("type-of-function", "F = type(lambda: 0)\nans = 'ESCAPED'"),
    _c("type-of-builtin", "F = type(len)\nans = 'ESCAPED'"),
    _c("type-of-generator", "G = type(x for x in [1])\nans = 'ESCAPED'"),
    _c("class-keyword-metaclass", "class C(metaclass=type):\n    pass\nans = 'ESCAPED'"),
    _c("class-from-guarded-type", "class M(type):\n    pass\nans = 'ESCAPED'", ("error",)),
    _c("numbers-abcmeta", "import numbers\nM = numbers.ABCMeta\nans = 'ESCAPED'"),
    _c("sympy-function-metaclass", "import sympy\nM = type(sympy.Function('f'))\nans = 'ESCAPED'"),
    _c(
        "sympy-function-dunder-keyword",
        "import sympy\nf = sympy.Function('f', __array_interface__={'data': (0, False)})\nans = 'ESCAPED'",
    ),
    _c(
        "sympy-function-dunder-kwargs",
        "import sympy\nf = sympy.Function('f', **{'__getattribute__': lambda *a: 1})\nans = 'ESCAPED'",
    ),
    # Function(name, bases, namespace) is three-argument type() through sympy's metaclass: a namespace
    # with __array_interface__ gave numpy arrays over any address, then the real builtins (red team,
    # session 13; the whole exploit is the next row but one)
    _c(
        "sympy-function-positional-namespace",
        "import sympy\nM = sympy.Function('M', (object,), {'__array_interface__': {'data': (0, False)}})\n"
        "ans = 'ESCAPED'",
    ),
    _c("sympy-function-bases-keyword", "import sympy\nM = sympy.Function('M', bases=(object,))\nans = 'ESCAPED'"),
    _c(
        "sympy-function-namespace-built-at-run-time",
        "import sympy\nd = {}\nd['_' * 2 + 'array_interface' + '_' * 2] = 1\n"
        "M = sympy.Function('M', (object,), d)\nans = 'ESCAPED'",
    ),
    _c("sympy-function-memory-then-builtins", SYMPY_MEMORY_ESCAPE),
    _c(
        "sympy-function-name-only",
        "import sympy\nf = sympy.Function('f')\nx = sympy.Symbol('x')\nans = str(f(x))",
        ("ok",),
        "f(x)",
    ),
    _c(
        "sympy-function-assumptions",
        "import sympy\nf = sympy.Function('f', real=True)\nans = str(f(1).is_real)",
        ("ok",),
        "True",
    ),
    _c(
        "sympy-symbols-of-functions",
        "import sympy\nf, g = sympy.symbols('f g', cls=sympy.Function)\nans = str(f(1) + g(2))",
        ("ok",),
        "f(1) + g(2)",
    ),
    _c("dunder-in-class-body", "class A:\n    __array_interface__ = {'data': (0, False)}\nans = 'ESCAPED'"),
    _c(
        "namedtuple-dunder-field",
        "import collections\nP = collections.namedtuple('P', ['__array_interface__'])\nans = 'ESCAPED'",
        ("error",),
    ),
    _c("object-subclasses", "ans = getattr(object, '__subclasses__')()\nans = 'ESCAPED'"),
    _c("dunder-class-chain", "ans = ().__class__.__bases__[0].__subclasses__()\nans = 'ESCAPED'"),
    # numpy memory
    _c("numpy-array-interface", "import numpy as np\na = np.zeros(2)\nans = a.__array_interface__\nans = 'ESCAPED'"),
    _c(
        "numpy-array-interface-getattr",
        "import numpy as np\nans = getattr(np.zeros(2), '__array_interface__')\nans = 'ESCAPED'",
    ),
    _c(
        "numpy-ndarray-constructor",
        "import numpy as np\na = np.ndarray((4,), dtype=np.uint8, buffer=b'abcd', offset=0)\nans = 'ESCAPED'",
    ),
    _c("numpy-ndarray-constructor-from-import", "from numpy import ndarray\na = ndarray((4,))\nans = 'ESCAPED'"),
    _c(
        "numpy-ndarray-by-type",
        "import numpy as np\nT = type(np.zeros(1))\na = T((4,), buffer=b'abcd')\nans = 'ESCAPED'",
    ),
    _c(
        "numpy-ndarray-subclass",
        "import numpy as np\nclass A(np.ndarray):\n    pass\na = A((4,), buffer=b'abcd')\nans = 'ESCAPED'",
    ),
    _c("numpy-ndarray-metaclass", "import numpy as np\nM = type(np.ndarray)\nans = 'ESCAPED'"),
    _c("numpy-stride-tricks", "import numpy as np\nf = np.lib.stride_tricks.as_strided\nans = 'ESCAPED'"),
    _c("numpy-stride-tricks-import", "from numpy.lib.stride_tricks import as_strided\nans = 'ESCAPED'"),
    _c("numpy-ctypes-attr", "import numpy as np\nans = np.zeros(2).ctypes.data\nans = 'ESCAPED'"),
    _c("numpy-data-memoryview", "import numpy as np\nans = np.zeros(2).data\nans = 'ESCAPED'"),
    _c("numpy-base", "import numpy as np\nans = np.zeros(4)[1:].base\nans = 'ESCAPED'"),
    _c("numpy-ctypeslib", "import numpy as np\nans = np.ctypeslib\nans = 'ESCAPED'"),
    _c("numpy-frombuffer", "import numpy as np\na = np.frombuffer(b'abcd', dtype=np.uint8)\nans = 'ESCAPED'"),
    _c("numpy-load", "import numpy as np\na = np.load('/etc/passwd', allow_pickle=True)\nans = 'ESCAPED'"),
    _c("numpy-save", "import numpy as np\nnp.save('MARKER', np.zeros(1))\nans = 'ESCAPED'"),
    _c("numpy-tofile", "import numpy as np\nnp.zeros(1).tofile('MARKER')\nans = 'ESCAPED'"),
    _c("numpy-memmap", "import numpy as np\nm = np.memmap('MARKER', mode='w+', shape=(1,))\nans = 'ESCAPED'"),
    _c("numpy-seterrcall", "import numpy as np\nnp.seterrcall(print)\nans = 'ESCAPED'"),
    _c(
        "numpy-strides-out-of-bounds",
        "import numpy as np\na = np.zeros(2)\na.strides = (1 << 40,)\nans = 'ESCAPED'",
        ("error", "policy_violation"),
    ),
    _c(
        "numpy-setfield-out-of-bounds",
        "import numpy as np\na = np.zeros(2)\na.setfield(1, np.int64, 1 << 20)\nans = 'ESCAPED'",
        ("error",),
    ),
    # ---- 3. str.format --------------------------------------------------------------------------------
    _c("format-attribute-field", "ans = '{0.__class__.__mro__}'.format(1)\nans = 'ESCAPED'"),
    _c("format-index-field", "ans = '{0[0]}'.format([1])\nans = 'ESCAPED'"),
    _c("format-on-class", "ans = str.format('{0.__class__}', 1)\nans = 'ESCAPED'"),
    _c("format-by-getattr-on-class", "ans = getattr(str, 'format')('{0.__class__}', 1)\nans = 'ESCAPED'"),
    _c("format-via-type", "ans = type('').format('{0.__class__}', 1)\nans = 'ESCAPED'"),
    _c("format-nested-spec", "ans = '{0:{1.__class__}}'.format(1, 2)\nans = 'ESCAPED'"),
    _c("format-map", "ans = '{x.__class__}'.format_map({'x': 1})\nans = 'ESCAPED'"),
    _c("format-map-getattr", "ans = getattr('{x.real}', 'format_map')({'x': 1})\nans = 'ESCAPED'"),
    _c("format-str-subclass", "class S(str):\n    pass\nans = S('{0.__class__}').format(1)\nans = 'ESCAPED'"),
    _c("format-super-proxy", "class S(str):\n    pass\nans = super(S, S('{0.__class__}')).format(1)\nans = 'ESCAPED'"),
    _c("format-map-over-class", "ans = list(map(str.format, ['{0.__class__}'], [1]))\nans = 'ESCAPED'"),
    _c(
        "format-string-formatter", "import string\nans = string.Formatter().format('{0.__class__}', 1)\nans = 'ESCAPED'"
    ),
    _c("format-builtin-spec", "ans = format(1, '{0.__class__}')\nans = 'ESCAPED'", ("error",)),
    # ---- 4. compile-time rules: frames, except*, guard names, dunders -------------------------------------
    _c("generator-frame", "g = (x for x in [1])\nans = g.gi_frame.f_back\nans = 'ESCAPED'"),
    _c("generator-frame-getattr", "g = (x for x in [1])\nans = getattr(g, 'gi_' + 'frame')\nans = 'ESCAPED'"),
    _c("generator-code", "def g():\n    yield 1\nans = getattr(g(), 'gi_code')\nans = 'ESCAPED'"),
    _c("generator-yieldfrom", "def g():\n    yield from [1]\nans = getattr(g(), 'gi_yieldfrom')\nans = 'ESCAPED'"),
    _c("coroutine-frame", "async def f():\n    pass\nans = f().cr_frame\nans = 'ESCAPED'"),
    _c(
        "traceback-frame",
        "try:\n    1 / 0\nexcept Exception as e:\n    tb = getattr(e, '__traceback__')\nans = 'ESCAPED'",
    ),
    _c(
        "frame-globals-by-getattr",
        "def g():\n    yield 1\nans = getattr(getattr(g(), 'gi_frame'), 'f_globals')\nans = 'ESCAPED'",
    ),
    _c("except-star", "try:\n    raise ExceptionGroup('x', [ValueError()])\nexcept* ValueError:\n    ans = 'ESCAPED'"),
    _c("positional-only-guard-name", "def f(_getattr_, /):\n    return _getattr_\nans = 'ESCAPED'"),
    _c("default-guard-name", "f = lambda _getitem_=None: 0\nans = 'ESCAPED'"),
    _c("redefine-guard", "_getattr_ = getattr\nans = 'ESCAPED'"),
    _c("guard-name-by-import-alias", "from math import pi as _getattr_\nans = 'ESCAPED'"),
    _c("guard-name-by-walrus", "(_getattr_ := getattr)\nans = 'ESCAPED'"),
    _c("guard-name-by-for-target", "for _getitem_ in [1]:\n    pass\nans = 'ESCAPED'"),
    _c("guard-name-by-except", "try:\n    1 / 0\nexcept Exception as _write_:\n    pass\nans = 'ESCAPED'"),
    _c("guard-name-by-class", "class _getiter_:\n    pass\nans = 'ESCAPED'"),
    _c("import-numpy-polynomial-tests", "import numpy.polynomial.tests\nans = 'ESCAPED'"),
    _c("import-numpy-polyutils", "import numpy.polynomial.polyutils as pu\nans = 'ESCAPED'"),
    _c("print-chevron", "print >> 1\nans = 'ESCAPED'", ("error", "policy_violation")),
    _c("exec-call", "exec('ans = 1')\nans = 'ESCAPED'"),
    _c("eval-call", "ans = eval('1')\nans = 'ESCAPED'"),
    _c("match-class-pattern", "match 1:\n    case int(real=r):\n        ans = 'ESCAPED'"),
    _c(  # admitted since issue 37: nonlocal rebinds the enclosing function's own variable
        "nonlocal",
        "def f():\n    x = 1\n    def g():\n        nonlocal x\n        x += 1\n    g()\n    return x\nans = f()",
        ("ok",),
        2,
    ),
    _c("module-write", "import math\nmath.pi = 3\nans = 'ESCAPED'"),
    _c("library-class-write", "from fractions import Fraction\nFraction.limit_denominator = 1\nans = 'ESCAPED'"),
    _c(
        "forge-caught-violation",
        "import statistics\ntry:\n    statistics.sys\nexcept Exception as e:\n"
        "    e.rule = 'ok'\n    e.message = 'nothing'\nans = 'ESCAPED'",
    ),
    _c(
        "forge-violation-class",
        "import statistics\ntry:\n    statistics.sys\nexcept Exception as e:\n    V = type(e)\nraise V('ok', [1], [2])",
    ),
    _c("memoryview-builtin", "m = memoryview(b'ab')\nans = 'ESCAPED'"),
    _c("id-builtin", "ans = id(1)\nans = 'ESCAPED'"),
    # sympy string evaluation
    _c("sympy-sympify", "import sympy\nsympy.sympify(\"__import__('os').system('touch MARKER')\")\nans = 'ESCAPED'"),
    _c("sympy-parse-expr", "import sympy\nsympy.parse_expr('1')\nans = 'ESCAPED'"),
    _c("sympy-lambdify", "import sympy\nsympy.lambdify\nans = 'ESCAPED'"),
    _c(
        "sympy-subs-string",
        "import sympy\nx = sympy.Symbol('x')\nx.subs(x, \"__import__('os').system('touch MARKER')\")\nans = 'ESCAPED'",
    ),
    _c(
        "sympy-simplify-string",
        "import sympy\nsympy.simplify(\"__import__('os').system('touch MARKER')\")\nans = 'ESCAPED'",
    ),
    _c("sympy-string-with-attribute", "import sympy\nsympy.simplify('pi.func')\nans = 'ESCAPED'"),
    _c("sympy-string-with-builtin-name", "import sympy\nsympy.simplify('open')\nans = 'ESCAPED'"),
    _c("sympy-string-lambda", "import sympy\nsympy.simplify('(lambda: 1)()')\nans = 'ESCAPED'"),
    _c("sympy-var-frame-globals", "import sympy\nsympy.var('x')\nans = 'ESCAPED'"),
    _c("sympy-printing-module", "import sympy\nans = sympy.printing\nans = 'ESCAPED'"),
    # lambdify prints names into the code it exec()s; nsolve calls it on the program's expression
    _c(
        "sympy-nsolve-symbol-name",
        "import sympy\nx = sympy.Symbol('x')\n"
        "evil = sympy.Symbol(\"__import__('os').system('touch MARKER')\")\n"
        "sympy.nsolve([x - 1 + evil], [x], [1])\nans = 'ESCAPED'",
    ),
    _c(
        "sympy-nsolve-function-name",
        "import sympy\nx = sympy.Symbol('x')\n"
        "evil = sympy.Function(\"__import__('os').system('touch MARKER') or abs\")\n"
        "sympy.nsolve(evil(x) - 1, x, 1)\nans = 'ESCAPED'",
    ),
    _c(
        "sympy-nsolve-dummy-name",
        "import sympy\nx = sympy.Symbol('x')\n"
        "evil = sympy.Dummy(\"x + __import__('os').system('touch MARKER')\")\n"
        "sympy.nsolve([x - 1 + evil], [x], [1])\nans = 'ESCAPED'",
    ),
    _c(
        "sympy-nsolve-stateful-name",
        "import sympy\nclass S(sympy.Symbol):\n    pass\n"
        "x = sympy.Symbol('x')\nsympy.nsolve([x - 1 + S('y')], [x], [1])\nans = 'ESCAPED'",
    ),
    _c(
        "sympy-mpmath-identify-eval",
        "import sympy\nctx = sympy.Float(1.5).num.context\n"
        "ctx.identify(1, [\"__import__('os').system('touch MARKER')\"])\nans = 'ESCAPED'",
    ),
    _c(
        "userstring-format",
        "import collections\nans = collections.UserString('{0.__class__.__mro__}').format(1)\nans = 'ESCAPED'",
    ),
    _c("class-kwargs-metaclass", "class C(**{'metaclass': print}):\n    pass\nans = 'ESCAPED'"),
    _c(
        "numpy-resize-no-refcheck",
        "import numpy as np\na = np.zeros(4)\nb = a[:]\na.resize((1 << 20,), refcheck=False)\nans = 'ESCAPED'",
    ),
    _c(
        "numpy-view-as-object",
        "import numpy as np\nb = np.zeros(2, dtype=np.int64).view(object)\nans = 'ESCAPED'",
        ("error",),
    ),
    _c(
        "numpy-dtype-set-object",
        "import numpy as np\na = np.zeros(2, dtype=np.int64)\na.dtype = object\nans = 'ESCAPED'",
        ("error", "policy_violation"),
    ),
    _c(
        "numpy-getfield-object",
        "import numpy as np\nb = np.zeros(2, dtype=np.int64).getfield(object, 0)\nans = 'ESCAPED'",
        ("error",),
    ),
    _c(
        "numpy-bitgen-ctypes", "import numpy as np\nans = np.random.default_rng().bit_generator.ctypes\nans = 'ESCAPED'"
    ),
    _c("numpy-bitgen-cffi", "import numpy as np\nans = np.random.default_rng().bit_generator.cffi\nans = 'ESCAPED'"),
    _c(
        "numpy-bitgen-capsule",
        "import numpy as np\nans = np.random.default_rng().bit_generator.capsule\nans = 'ESCAPED'",
    ),
    _c("numpy-bitgen-lock", "import numpy as np\nans = np.random.default_rng().bit_generator.lock\nans = 'ESCAPED'"),
    # ---- 5. library machinery (issue 35, class 3) ------------------------------------------------------
    # Writes to library objects: cached_property's attrname names the attribute its code then sets with
    # the real setattr on any instance; numpy reads __array_interface__ from it (memory at any address).
    _c("cached-property-array-interface", CACHED_PROPERTY_MEMORY),
    _c(
        "cached-property-subclass-attrname",
        CACHED_PROPERTY_MEMORY.replace(
            "cp = functools.cached_property(f)", "class CP(functools.cached_property):\n    pass\ncp = CP(f)"
        ),
    ),
    _c(
        "cached-property-reduce-ex-copy",
        CACHED_PROPERTY_REDUCE.format(copy="copy.copy(c)"),
    ),
    _c(
        "cached-property-reduce-ex-deepcopy",
        CACHED_PROPERTY_REDUCE.format(copy="copy.deepcopy([c])"),
    ),
    _c("partial-attribute-write", "import functools\np = functools.partial(max)\np.attrname = 1\nans = 'ESCAPED'"),
    _c("random-instance-write", "import random\nr = random.Random(1)\nr.gauss_next = 'x'\nans = 'ESCAPED'"),
    _c("sympy-symbol-name-write", "import sympy\nx = sympy.Symbol('x')\nx.name = '__class__'\nans = 'ESCAPED'"),
    _c("numpy-flags-write", "import numpy as np\na = np.zeros(2)\na.flags.writeable = True\nans = 'ESCAPED'"),
    _c(
        "library-subclass-instance-write",
        "import functools\nclass P(functools.partial):\n    pass\np = P(max)\np.attrname = 1\nans = 'ESCAPED'",
    ),
    _c(
        "namedtuple-forged-module-class-write",
        "import collections\nT = collections.namedtuple('T', 'a', module='__potrun_program__')\nT.attrname = 1\n"
        "ans = 'ESCAPED'",
    ),
    _c("sympy-function-class-write", "import sympy\nf = sympy.Function('f')\nf.attrname = 1\nans = 'ESCAPED'"),
    # Library code that reads its caller's frame: numpy's r_/c_ evaluate a string key's names in the frame
    # that called them, the guards' own (their locals, this module's globals).
    _c("numpy-r-string-guards-globals", NUMPY_FRAME.format(key="_active_record")),
    _c("numpy-r-string-guards-self", NUMPY_FRAME.format(key="self")),
    _c("numpy-r-string-active-guards", NUMPY_FRAME.format(key="_active")),
    _c("numpy-c-string-locals", NUMPY_FRAME.format(key="obj").replace("np.r_", "np.c_")),
    _c("numpy-r-matrix-string", "import numpy as np\nm = np.r_['r', 'self']\nans = 'ESCAPED'", (*PV, "error")),
    # The idioms admitted for issue 37, turned against the policy.
    _c(
        "dataclass-of-a-library-class",
        "import dataclasses, random\ndataclasses.dataclass(random.Random)\nans = 'ESCAPED'",
    ),
    _c("dataclass-make-namespace", "import dataclasses\nP = dataclasses.make_dataclass('P', ['x'])\nans = 'ESCAPED'"),
    _c(
        "dataclass-asdict-of-library-objects",
        "import dataclasses, functools\n@dataclasses.dataclass\nclass P:\n    x: object\n"
        "dataclasses.asdict(P(functools.partial(max)))\nans = 'ESCAPED'",
    ),
    _c("special-method-getattr", "class A:\n    def __getattr__(self, name):\n        return {}\nans = 'ESCAPED'"),
    _c("special-method-reduce-ex", "class A:\n    def __reduce_ex__(self, p):\n        return None\nans = 'ESCAPED'"),
    _c(
        "special-method-array-interface",
        "class A:\n    def __array_interface__(self):\n        return {}\nans = 'ESCAPED'",
    ),
    _c("special-method-set-name", "class A:\n    def __set_name__(self, o, n):\n        pass\nans = 'ESCAPED'"),
    _c("special-method-at-top-level", "def __repr__():\n    return 'x'\nans = 'ESCAPED'"),
    _c("special-read-init-of-library-object", "import random\nr = random.Random(1)\nans = r.__init__\nans = 'ESCAPED'"),
    _c("special-write-class", "class A:\n    pass\na = A()\na.__class__ = int\nans = 'ESCAPED'"),
    _c("name-assignment", "__name__ = 'x'\nans = 'ESCAPED'"),
    _c("typing-get-type-hints", "import typing\nans = typing.get_type_hints\nans = 'ESCAPED'"),
    _c(
        "typing-forward-ref-evaluate", "import typing\nT = typing.List['os']\nans = typing.get_args(T)\nans = 'ESCAPED'"
    ),
    _c("sys-getframe", "import sys\nf = sys._getframe()\nans = 'ESCAPED'"),
    _c("sys-modules", "import sys\nm = sys.modules\nans = 'ESCAPED'"),
    _c("sys-stdout", "import sys\ns = sys.stdout\nans = 'ESCAPED'"),
    _c("star-import-sys-private", "from sys import *\nans = _getframe()", (*PV, "error")),
    _c("future-module-read", "import __future__\nans = __future__.sys\nans = 'ESCAPED'"),
    # The copy protocol: only reviewed kinds are rebuilt.
    _c("copy-of-a-partial", "import copy, functools\ncopy.copy(functools.partial(max, 1))\nans = 'ESCAPED'"),
    _c("deepcopy-of-a-template", "import copy, string\ncopy.deepcopy([string.Template('$x')])\nans = 'ESCAPED'"),
    _c(
        "deepcopy-of-a-library-subclass",
        "import copy, functools\nclass P(functools.partial):\n    pass\ncopy.deepcopy({'k': P(max)})\nans = 'ESCAPED'",
    ),
    # ---- what must still run -----------------------------------------------------------------------------
    _c(
        "ok-numpy-isinstance",
        "import numpy as np\na = np.arange(4)\n"
        "ans = [isinstance(a, np.ndarray), type(a) == np.ndarray, int(a.sum()), a.shape[0]]",
        ("ok",),
        [True, True, 6, 4],
    ),
    _c(
        "ok-numpy-linalg",
        "import numpy as np\nans = float(np.linalg.det(np.array([[2.0, 0.0], [0.0, 3.0]])))",
        ("ok",),
        6.0,
    ),
    _c(
        "ok-numpy-random",
        "import numpy as np\nrng = np.random.default_rng(0)\nans = int(rng.integers(0, 1))",
        ("ok",),
        0,
    ),
    _c(
        "ok-numpy-polynomial",
        "from numpy.polynomial import Polynomial\nans = float(Polynomial([1, 2])(3))",
        ("ok",),
        7.0,
    ),
    _c(
        "ok-operator-getters",
        "import operator\nfrom operator import itemgetter\n"
        "ans = [operator.getitem([5, 6], 1), itemgetter(0)([7]), operator.attrgetter('real')(3), "
        "operator.methodcaller('upper')('a')]",
        ("ok",),
        [6, 7, 3, "A"],
    ),
    _c(
        "ok-format", "ans = '{0}-{1:>3}-{x:.2f}'.format(1, 2, x=0.5) + str.format('{}', 3)", ("ok",), "1-  2-0.50" + "3"
    ),
    _c(
        "ok-fraction-decimal",
        "from fractions import Fraction\nimport decimal\ndecimal.getcontext().prec = 5\n"
        "ans = str(Fraction(22, 7).limit_denominator(5)) + ' ' + str(decimal.Decimal(1) / 3)",
        ("ok",),
        "16/5 0.33333",
    ),
    _c(
        "ok-collections-functools",
        "import collections, functools\nP = collections.namedtuple('P', 'x y')\n"
        "@functools.lru_cache(maxsize=None)\ndef fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
        "ans = [P(1, 2).y, fib(20), collections.Counter('aab')['a']]",
        ("ok",),
        [2, 6765, 2],
    ),
    _c(
        "ok-sympy",
        "import sympy\nx = sympy.symbols('x')\nans = [str(s) for s in sympy.solve(sympy.Eq(x**2, 4), x)]"
        " + [str(sympy.expand((x + 1)**2)), str(sympy.Rational(1, 3) + sympy.Rational(1, 6))]",
        ("ok",),
        ["-2", "2", "x**2 + 2*x + 1", "1/2"],
    ),
    _c(
        "ok-datetime-re-string",
        "import datetime, re, string\n"
        "ans = [datetime.date(2020, 3, 1).weekday(), re.findall(r'\\d+', 'a1b22'), "
        "string.Template('$x!').substitute(x='hi'), type(None) is type(None)]",
        ("ok",),
        [6, ["1", "22"], "hi!", True],
    ),
    _c("ok-allowed-module-in-a-list", "import math, cmath\nans = [m.pi for m in [math, cmath]][0]", ("ok",), math.pi),
    _c(
        "ok-sympy-nsolve-and-series",
        "import sympy\nx, n = sympy.symbols('x n')\n"
        "r = sympy.nsolve(x**2 - 2, x, 1)\ns = sympy.Sum(1 / sympy.factorial(n), (n, 0, sympy.oo)).evalf()\n"
        "ans = [round(float(r), 6), round(float(s), 6)]",
        ("ok",),
        [1.414214, 2.718282],
    ),
    _c(
        "ok-sympy-plain-formula-string",
        "import sympy\nans = [str(sympy.nsimplify(0.7071067811865476)), str(sympy.simplify('2*sqrt(2)/4'))]",
        ("ok",),
        ["sqrt(2)/2", "sqrt(2)/2"],
    ),
    _c(
        "ok-augmented-item-and-attribute",
        "x = [1, 2]\nx[0] += 1\nx[1:] += [5]\nd = {'a': 1}\nd['a'] *= 3\n"
        "class A:\n    def __init__(self):\n        self.v = 1\na = A()\na.v += 2\nans = [x, d['a'], a.v]",
        ("ok",),
        [[2, 2, 5], 3, 3],
    ),
    _c(
        "ok-copy-statistics",
        "import copy, statistics\nans = [copy.deepcopy([[1]]), statistics.mean([1, 2, 3])]",
        ("ok",),
        [[[1]], 2],
    ),
]


def _source(case: Case, marker: Path) -> str:
    return case.source.replace("MARKER", str(marker))


# ------------------------------------------------------------------------------------- in-process run


class _Printed:
    """RestrictedPython's print target, discarding."""

    def _call_print(self, *objects: Any, **kwargs: Any) -> None:
        pass


def run_in_process(source: str) -> tuple[str, Any]:
    """(status, value) of a program run through compile_restricted_program and Guards, here."""
    guards = Guards(get_policy("restricted"))
    guards.begin()
    try:
        code = compile_restricted_program(source)
    except SyntaxError:
        return "syntax_error", None
    except PolicyViolation:
        return "policy_violation", None
    namespace = guards.new_globals(lambda _getattr=None: _Printed())
    try:
        exec(code, namespace)
    except PolicyViolation:
        return "policy_violation", None
    except Exception:
        return ("policy_violation" if guards.violations else "error"), None
    if guards.violations:
        return "policy_violation", None
    return "ok", namespace.get("ans")


@pytest.mark.parametrize("case", CASES)
def test_escape_in_process(case: Case, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    status, value = run_in_process(_source(case, marker))
    assert status in case.expect, f"{case.id}: {status} {value!r}"
    assert value != ESCAPED and not marker.exists(), f"{case.id}: the escape worked"
    if status == "ok" and case.value is not None:
        assert value == case.value


# ---------------------------------------------------------------------------------- through the sandbox


@pytest.fixture(scope="module", params=["fork", "warm"])
def restricted_box(request: pytest.FixtureRequest, backend: str) -> Iterator[Sandbox]:
    """One worker per backend and isolation tier (the warm one runs the whole corpus in one runner, so
    an escape that only shows in a later program would show too)."""
    box = Sandbox(backend, policy="restricted", isolation=request.param, workers=1, timeout=10.0, memory_mb=1024)
    box.start()
    try:
        yield box
    finally:
        box.close()


@pytest.mark.parametrize("case", CASES)
def test_escape_in_the_sandbox(case: Case, restricted_box: Sandbox, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    result = restricted_box.run(_source(case, marker))
    assert result.status.value in case.expect, f"{case.id}: {result.status.value} {result.error!r}"
    assert result.value != ESCAPED and not marker.exists(), f"{case.id}: the escape worked"
    if result.status.value == "ok" and case.value is not None:
        assert result.value == case.value


def test_corpus_is_large_enough() -> None:
    escapes = [param.values[0] for param in CASES if "ok" not in param.values[0].expect]
    assert len(escapes) >= 60


# ------------------------------------------------------------------------ the guards on objects directly
# What a program could only hold after some other escape: the guards must refuse it by kind, whatever
# path led there.


@pytest.fixture
def guards() -> Guards:
    instance = Guards(get_policy("restricted"))
    instance.begin()
    return instance


def _frame() -> types.FrameType:
    return sys._getframe()


DANGEROUS = [
    pytest.param(lambda: sys.modules, id="sys.modules"),
    pytest.param(lambda: os, id="os-module"),
    pytest.param(lambda: vars(os), id="os-namespace"),
    pytest.param(lambda: vars(builtins), id="builtins-namespace"),
    pytest.param(lambda: builtins.setattr, id="builtins.setattr"),
    pytest.param(lambda: builtins.eval, id="builtins.eval"),
    pytest.param(lambda: type, id="type-metaclass"),
    pytest.param(lambda: _frame(), id="frame"),
    pytest.param(lambda: _frame().f_code, id="code"),
    pytest.param(lambda: (lambda: 0).__globals__, id="function-globals"),
    pytest.param(lambda: int.__dict__, id="class-dict"),
    pytest.param(lambda: os.system, id="os.system"),
    pytest.param(lambda: types.FunctionType, id="FunctionType"),
    pytest.param(lambda: types.CodeType, id="CodeType"),
    pytest.param(lambda: Path, id="class-of-pathlib"),
    pytest.param(lambda: Path.read_text, id="function-of-pathlib"),
]


@pytest.mark.parametrize("make", DANGEROUS)
def test_items_attributes_and_iteration_refuse_internals(guards: Guards, make: Any) -> None:
    dangerous = make()
    holder = type("Holder", (), {"x": dangerous})()
    with pytest.raises(PolicyViolation):
        guards.getitem([dangerous], 0)
    with pytest.raises(PolicyViolation):
        guards.getitem({"k": dangerous}, "k")
    with pytest.raises(PolicyViolation):
        guards.getattr(holder, "x")
    assert guards.violations


def test_iterating_a_module_namespace_is_refused(guards: Guards) -> None:
    for namespace in (vars(os), sys.modules, vars(builtins), guards.builtins):
        with pytest.raises(PolicyViolation):
            guards.getiter(namespace)
        with pytest.raises(PolicyViolation):
            guards.write(namespace)


def test_program_builtins_hold_no_real_setattr_or_type(guards: Guards) -> None:
    given = {id(value) for value in guards.builtins.values()}
    for name in (
        "setattr",
        "delattr",
        "eval",
        "exec",
        "open",
        "compile",
        "globals",
        "vars",
        "type",
        "__import__",
        "getattr",
        "breakpoint",
        "input",
        "memoryview",
    ):
        assert id(getattr(builtins, name)) not in given, name


# Members that a newer release of their library removed: absent there (nothing to reach), present before.
# (module, member) -> the first release without it.
REMOVED_MEMBERS = {("numpy", "row_stack"): (2, 5)}  # deprecated in 2.0 for vstack


def _removed_here(module_name: str, name: str) -> bool:
    import importlib

    first_without = REMOVED_MEMBERS.get((module_name, name))
    if first_without is None:
        return False
    version = importlib.import_module(module_name.partition(".")[0]).__version__
    return tuple(int(part) for part in version.split(".")[:2]) >= first_without


def test_every_member_exists_and_has_a_reason() -> None:
    import importlib

    for module_name, members in MEMBERS.items():
        if module_name == "numpy.emath":  # an alias of numpy.lib.scimath, not an importable name
            continue
        module = importlib.import_module(module_name)
        for name, reason in members.items():
            assert hasattr(module, name) != _removed_here(module_name, name), f"{module_name}.{name}"
            assert isinstance(reason, str) and reason.strip(), f"{module_name}.{name} has no reason"
            assert not name.startswith("_")


def test_no_member_is_a_refused_kind(guards: Guards) -> None:
    """Every listed member passes the same kind check as a value read, but for the allowed modules
    themselves and the guarded ones (which are handed out replaced)."""
    import importlib

    for module_name, members in MEMBERS.items():
        if module_name == "numpy.emath":
            continue
        module = importlib.import_module(module_name)
        for name in members:
            if _removed_here(module_name, name):
                continue
            value = guards.getattr(module, name)
            if isinstance(value, types.ModuleType):
                continue
            guards.reached(value, f"{module_name}.{name}")  # raises when refused
    assert not guards.violations


# ------------------------------------------------------- real library programs: restricted == plain
# What math programs do with the allowed modules; the member allowlists must not refuse any of it.

LIBRARY_PROGRAMS = [
    "import math\nans = [math.comb(10, 3), math.gcd(12, 18), round(math.log(8, 2), 9), math.isqrt(99), math.factorial(6)]",
    "import itertools\nans = [len(list(itertools.permutations(range(4), 2))), list(itertools.accumulate([1, 2, 3]))]",
    "from collections import Counter, defaultdict, deque\nc = Counter('mississippi')\nd = defaultdict(int)\n"
    "d['a'] += 2\nq = deque([1, 2])\nq.appendleft(0)\nans = [c.most_common(1), dict(d), list(q)]",
    "from fractions import Fraction\nans = str(sum(Fraction(1, n) for n in range(1, 5)))",
    "import datetime\nd = datetime.date(2024, 2, 28) + datetime.timedelta(days=2)\n"
    "ans = [d.isoformat(), datetime.datetime(2020, 1, 1, 12).strftime('%H:%M'), d.weekday()]",
    "from decimal import Decimal, ROUND_HALF_UP\nans = str(Decimal('2.675').quantize(Decimal('0.01'), rounding=ROUND_HALF_UP))",
    "import heapq, bisect\nh = [5, 1, 4]\nheapq.heapify(h)\nans = [heapq.nlargest(2, h), bisect.bisect_left([1, 3, 5], 4)]",
    "import functools, operator\nans = functools.reduce(operator.mul, range(1, 6), 1)",
    "import random\nrandom.seed(7)\nans = [random.randint(1, 100) for _ in range(3)]",
    "import string, calendar, re, statistics\nans = [string.ascii_lowercase.index('k'), calendar.monthrange(2024, 2)[1], "
    "re.sub(r'\\s+', ' ', 'a   b'), statistics.median([3, 1, 2]), calendar.isleap(2000)]",
    "import numpy as np\na = np.array([[1.0, 2.0], [3.0, 4.0]])\nb = np.linalg.solve(a, np.array([5.0, 6.0]))\n"
    "ans = [np.round(b, 6).tolist(), float(np.mean(a)), a.T.tolist(), int(a.argmax()), np.cumsum([1, 2, 3]).tolist()]",
    "import numpy as np\nv, c = np.unique(np.array([3, 1, 3, 2]), return_counts=True)\nx = np.arange(6).reshape(2, 3)\n"
    "ans = [v.tolist(), c.tolist(), np.where(x > 2, 1, 0).tolist(), float(np.percentile([1, 2, 3, 4], 50)), "
    "x.astype(float).sum(axis=0).tolist(), np.zeros((2, 2)).shape]",
    "import numpy as np\nans = [float(np.std([1, 2, 3, 4])), float(np.dot([1, 2], [3, 4])), np.polyfit([0, 1, 2], [1, 3, 5], 1).round(6).tolist()]",
    "import sympy as sp\nx, y = sp.symbols('x y')\nsol = sp.solve([x + y - 10, x - y - 2], [x, y])\n"
    "ans = [str(sol[x]), str(sol[y]), str(sp.factorint(360)), sp.isprime(97), str(sp.simplify((x**2 - 1) / (x - 1)))]",
    "import sympy\nx = sympy.Symbol('x')\nM = sympy.Matrix([[1, 2], [3, 4]])\n"
    "ans = [str(M.det()), str(sympy.integrate(x**2, (x, 0, 1))), str(sympy.limit(sympy.sin(x) / x, x, 0)), "
    "str(sympy.N(sympy.pi, 10)), str((x**2 + 2 * x).subs(x, 3)), str(sympy.Poly(x**2 + 3 * x + 2, x).all_coeffs()), "
    "str(sympy.nsimplify(0.5)), str(sympy.binomial(5, 2)), str(sympy.floor(sympy.Rational(7, 2)))]",
    "from sympy import symbols, Eq, solve, Rational, sqrt, expand\nx = symbols('x')\n"
    "ans = [str(solve(Eq(2 * x + 1, 7), x)), str(Rational(3, 4) * 2), str(sqrt(8)), str(expand((x + 2) ** 2))]",
    "import sympy\nx = sympy.Symbol('x')\nans = [str(sympy.series(sympy.exp(x), x, 0, 3)), str(sympy.diff(x**3, x)), "
    "str(sympy.Sum(x, (x, 1, 10)).doit()), str(sympy.divisors(12)), str(sympy.gcd(12, 18))]",
]


def _plain(source: str) -> Any:
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(source, "<program>", "exec"), namespace)
    return namespace.get("ans")


@pytest.mark.parametrize("source", LIBRARY_PROGRAMS, ids=[f"library-{i}" for i in range(len(LIBRARY_PROGRAMS))])
def test_library_programs_run_as_in_plain_python(source: str) -> None:
    status, value = run_in_process(source)
    assert status == "ok", source
    assert value == _plain(source)
