"""The idiom corpus (issue 37, item 3): everyday Python that models write in program-of-thought and
tool-integrated answers, and what the restricted policy decides on each.

Two parts:

- `IDIOMS`: idioms written here, one small program each, with the policy's reviewed verdict: admitted
  ("ok", with the value plain Python gives) or refused ("refused", with the reason it stays refused);
- `data_programs()`: the programs of the shared data (PoT GSM8K and SVAMP Codex generations, DocMath-Eval
  model outputs and gold programs, the peers' extraction cases), as potrun extracts them.

`tests/policies/test_idioms.py` asserts that the refused set is exactly the reviewed one; `bench/idiom_corpus.py`
prints the share of the corpus refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from paths import SHARED


@dataclass(frozen=True)
class Idiom:
    id: str
    source: str
    expect: str = "ok"  # "ok" or "refused"
    value: Any = None  # for "ok": the answer plain Python gives (checked when not None)
    reason: str = ""  # for "refused": why it stays refused


def _ok(id: str, source: str, value: Any = None) -> Idiom:
    return Idiom(id, source, "ok", value)


def _refused(id: str, source: str, reason: str) -> Idiom:
    return Idiom(id, source, "refused", None, reason)


IDIOMS: list[Idiom] = [
    # ---- program structure ------------------------------------------------------------------------
    _ok(
        "main-guard",
        "def solution():\n    return 6 * 7\n\nif __name__ == '__main__':\n    print(solution())",
        42,
    ),
    _ok("main-guard-stdout", 'def main():\n    print(3 + 4)\n\nif __name__ == "__main__":\n    main()', 7),
    _ok("main-guard-ans", "ans = 0\nif __name__ == '__main__':\n    ans = 5", 5),
    _ok("solution-docstring", 'def solution():\n    """Compute the total."""\n    total = 3 * 4\n    return total', 12),
    _ok("print-last-line", "x = 10\ny = 32\nprint(x + y)", 42),
    _ok("global-counter", "count = 0\ndef bump():\n    global count\n    count += 1\nbump()\nbump()\nans = count", 2),
    _ok(
        "nonlocal-closure",
        "def solution():\n    total = 0\n    def add(v):\n        nonlocal total\n        total += v\n"
        "    for v in [1, 2, 3]:\n        add(v)\n    return total",
        6,
    ),
    _ok("walrus", "data = [3, 8, 1]\nif (n := len(data)) > 2:\n    ans = n", 3),
    _ok("try-except", "try:\n    x = 1 / 0\nexcept ZeroDivisionError:\n    x = 0\nans = x", 0),
    _ok("assert", "x = 5\nassert x > 0, 'positive'\nans = x", 5),
    _ok(
        "recursion-memo",
        "memo = {}\ndef fib(n):\n    if n < 2:\n        return n\n    if n not in memo:\n"
        "        memo[n] = fib(n - 1) + fib(n - 2)\n    return memo[n]\nans = fib(60)",
        1548008755920,
    ),
    _ok(
        "generator",
        "def evens(n):\n    for i in range(n):\n        if i % 2 == 0:\n            yield i\nans = sum(evens(10))",
        20,
    ),
    # ---- imports ----------------------------------------------------------------------------------
    _ok("star-import-math", "from math import *\nans = round(sqrt(16) + pi - pi, 6)", 4.0),
    _ok("star-import-fractions", "from fractions import *\nans = str(Fraction(1, 3) + Fraction(1, 6))", "1/2"),
    _ok("star-import-sympy", "from sympy import *\nx = symbols('x')\nans = str(solve(x**2 - 4, x))", "[-2, 2]"),
    _ok("import-as", "import math as m\nimport numpy as np\nans = int(m.floor(np.float64(2.7)))", 2),
    _ok("from-import-several", "from collections import Counter, defaultdict, deque\nans = Counter('aab')['a']", 2),
    _ok(
        "future-annotations",
        "from __future__ import annotations\ndef f(x: int) -> int:\n    return x + 1\nans = f(1)",
        2,
    ),
    _ok("sympy-abc", "from sympy.abc import x\nimport sympy\nans = str(sympy.expand((x + 1) ** 2))", "x**2 + 2*x + 1"),
    _ok(
        "sys-recursionlimit",
        "import sys\nsys.setrecursionlimit(10000)\ndef d(n):\n    return 0 if n == 0 else 1 + d(n - 1)\nans = d(1500)",
        1500,
    ),
    _ok("sys-int-digits", "import sys\nsys.set_int_max_str_digits(0)\nans = len(str(10 ** 5000))", 5001),
    _ok("sys-maxsize", "import sys\nans = sys.maxsize > 2 ** 62", True),
    # ---- typing -------------------------------------------------------------------------------------
    _ok(
        "typing-list",
        "from typing import List\ndef total(xs: List[int]) -> int:\n    return sum(xs)\nans = total([1, 2, 3])",
        6,
    ),
    _ok(
        "typing-several",
        "from typing import Dict, Tuple, Optional, Union, Any\n"
        "def f(d: Dict[str, int], t: Tuple[int, ...], o: Optional[int] = None) -> Union[int, float]:\n"
        "    return sum(d.values()) + sum(t) + (o or 0)\nans = f({'a': 1}, (2, 3))",
        6,
    ),
    _ok(
        "typing-annassign",
        "from typing import List\nitems: List[int] = [4, 5]\ncount: int = len(items)\nans = count",
        2,
    ),
    _ok(
        "typing-namedtuple",
        "from typing import NamedTuple\nclass Point(NamedTuple):\n    x: float\n    y: float = 0.0\n"
        "p = Point(3.0)\nans = [p.x, p.y]",
        [3.0, 0.0],
    ),
    _ok(
        "typing-callable",
        "from typing import Callable\ndef apply(f: Callable[[int], int], v: int) -> int:\n"
        "    return f(v)\nans = apply(lambda v: v * 2, 4)",
        8,
    ),
    _ok(
        "typing-typevar-generic",
        "from typing import TypeVar, Generic\nT = TypeVar('T')\nclass Box(Generic[T]):\n"
        "    def __init__(self, v: T):\n        self.v = v\nans = Box(9).v",
        9,
    ),
    _ok("typing-cast", "from typing import cast\nans = cast(int, 7)", 7),
    # ---- classes --------------------------------------------------------------------------------------
    _ok(
        "dataclass",
        "from dataclasses import dataclass\n@dataclass\nclass Item:\n    name: str\n    price: float\n    qty: int = 1\n"
        "    def total(self) -> float:\n        return self.price * self.qty\n"
        "items = [Item('a', 2.5, 4), Item('b', 1.0)]\nans = sum(i.total() for i in items)",
        11.0,
    ),
    _ok(
        "dataclass-field-asdict",
        "from dataclasses import dataclass, field, asdict\n@dataclass\nclass Cart:\n    items: list = field(default_factory=list)\n"
        "c = Cart()\nc.items.append(3)\nans = asdict(c)['items']",
        [3],
    ),
    _ok(
        "dataclass-frozen-order",
        "from dataclasses import dataclass\n@dataclass(frozen=True, order=True)\nclass V:\n    x: int\n"
        "ans = [V(1) < V(2), V(3) == V(3), sorted([V(2), V(1)])[0].x]",
        [True, True, 1],
    ),
    _ok(
        "dataclass-post-init",
        "from dataclasses import dataclass\n@dataclass\nclass R:\n    w: float\n    h: float\n"
        "    def __post_init__(self):\n        self.area = self.w * self.h\nans = R(2, 3).area",
        6,
    ),
    _ok(
        "dataclass-future-annotations",
        "from __future__ import annotations\nfrom dataclasses import dataclass\n"
        "@dataclass\nclass P:\n    x: int\n    y: list[int]\nans = P(1, [2]).y",
        [2],
    ),
    _ok(
        "dataclass-slots",
        "from dataclasses import dataclass\n@dataclass(slots=True)\nclass P:\n    x: int\np = P(1)\np.x = 4\nans = p.x",
        4,
    ),
    _ok(
        "class-init-methods",
        "class Account:\n    def __init__(self, balance):\n        self.balance = balance\n"
        "    def deposit(self, v):\n        self.balance += v\n        return self\nans = Account(10).deposit(5).balance",
        15,
    ),
    _ok(
        "class-repr-str",
        "class P:\n    def __init__(self, x):\n        self.x = x\n    def __repr__(self):\n"
        "        return f'P({self.x})'\n    def __str__(self):\n        return f'point {self.x}'\n"
        "ans = [repr(P(1)), str(P(2))]",
        ["P(1)", "point 2"],
    ),
    _ok(
        "class-operators",
        "class V:\n    def __init__(self, x):\n        self.x = x\n    def __add__(self, o):\n"
        "        return V(self.x + o.x)\n    def __mul__(self, k):\n        return V(self.x * k)\n"
        "    def __eq__(self, o):\n        return self.x == o.x\n    def __hash__(self):\n        return hash(self.x)\n"
        "ans = (V(1) + V(2) * 3).x",
        7,
    ),
    _ok(
        "class-container",
        "class Bag:\n    def __init__(self):\n        self.items = []\n    def __len__(self):\n"
        "        return len(self.items)\n    def __iter__(self):\n        return iter(self.items)\n"
        "    def __getitem__(self, i):\n        return self.items[i]\nb = Bag()\nb.items.extend([4, 5])\n"
        "ans = [len(b), list(b), b[1]]",
        [2, [4, 5], 5],
    ),
    _ok(
        "class-name-in-repr",
        "class Shape:\n    def __repr__(self):\n        return type(self).__name__ + '/' + "
        "self.__class__.__name__\nans = repr(Shape())",
        "Shape/Shape",
    ),
    _ok(
        "exception-subclass-super",
        "class Insufficient(Exception):\n    def __init__(self, need):\n"
        "        super().__init__(f'need {need}')\n        self.need = need\ntry:\n    raise Insufficient(3)\n"
        "except Insufficient as e:\n    ans = [e.need, str(e)]",
        [3, "need 3"],
    ),
    _ok(
        "inheritance-super-init",
        "class A:\n    def __init__(self, x):\n        self.x = x\nclass B(A):\n"
        "    def __init__(self, x, y):\n        super().__init__(x)\n        self.y = y\nb = B(1, 2)\nans = b.x + b.y",
        3,
    ),
    _ok(
        "base-init-call",
        "class A:\n    def __init__(self):\n        self.v = 1\nclass B(A):\n    def __init__(self):\n"
        "        A.__init__(self)\n        self.v += 1\nans = B().v",
        2,
    ),
    _ok(
        "property-staticmethod",
        "class C:\n    def __init__(self, r):\n        self.r = r\n    @property\n"
        "    def area(self):\n        return 3 * self.r ** 2\n    @staticmethod\n    def unit():\n        return C(1)\n"
        "ans = C.unit().area",
        3,
    ),
    _ok(
        "dict-subclass-missing",
        "class D(dict):\n    def __missing__(self, k):\n        return 0\nd = D()\nans = d['x'] + 1",
        1,
    ),
    _ok(
        "counter-subclass",
        "from collections import Counter\nclass Tally(Counter):\n    def top(self):\n"
        "        return self.most_common(1)[0][0]\nt = Tally('abb')\nt.label = 'x'\nans = t.top()",
        "b",
    ),
    _ok(
        "namedtuple",
        "from collections import namedtuple\nP = namedtuple('P', ['x', 'y'])\np = P(1, 2)\nans = p.x + p.y",
        3,
    ),
    _ok("function-attribute", "def f():\n    f.calls += 1\n    return f.calls\nf.calls = 0\nf()\nans = f()", 2),
    # ---- numbers ---------------------------------------------------------------------------------------
    _ok("fraction", "from fractions import Fraction\nans = str(Fraction(3, 4) * 2 + Fraction('1/2'))", "2"),
    _ok(
        "decimal-context-prec",
        "from decimal import Decimal, getcontext\ngetcontext().prec = 30\nans = str(Decimal(1) / Decimal(7))",
        "0.142857142857142857142857142857",
    ),
    _ok(
        "decimal-localcontext",
        "from decimal import Decimal, localcontext\nwith localcontext() as ctx:\n"
        "    ctx.prec = 5\n    v = Decimal(2).sqrt()\nans = str(v)",
        "1.4142",
    ),
    _ok(
        "decimal-quantize",
        "from decimal import Decimal, ROUND_HALF_UP\n"
        "ans = str(Decimal('2.675').quantize(Decimal('0.01'), rounding=ROUND_HALF_UP))",
        "2.68",
    ),
    _ok("bytearray", "b = bytearray(b'abc')\nb[0] = ord('A')\nb.extend(b'!')\nans = b.decode()", "Abc!"),
    _ok("bytes-hex", "ans = bytes([1, 2, 255]).hex()", "0102ff"),
    _ok(
        "int-methods",
        "n = 37\nans = [n.bit_length(), bin(n).count('1'), int('101', 2), (255).to_bytes(2, 'big').hex()]",
        [6, 3, 5, "00ff"],
    ),
    _ok("float-inf-nan", "import math\nans = [math.isinf(float('inf')), math.isnan(float('nan'))]", [True, True]),
    _ok(
        "numpy-shape-set",
        "import numpy as np\na = np.arange(6)\na.shape = (2, 3)\nans = a.sum(axis=1).tolist()",
        [3, 12],
    ),
    # ---- strings and printing -----------------------------------------------------------------------
    _ok(
        "fstring-format-spec",
        "x = 1234.5678\nans = f'{x:,.2f}|{x:>12.1f}|{x:.3e}|{x!r}'",
        "1,234.57|      1234.6|1.235e+03|1234.5678",
    ),
    _ok("fstring-debug", "total = 5\nans = f'{total=}'", "total=5"),
    _ok("percent-format", "ans = '%.2f%%' % 12.345", "12.35%"),
    _ok("str-format", "ans = '{:.1f} and {}'.format(2.25, 'x')", "2.2 and x"),
    _ok("print-sep-end", "print('a', 'b', sep='-', end='!\\n')\nprint(round(2 / 3, 4))", 0.6667),
    _ok("print-star", "vals = [1, 2, 3]\nprint(*vals)\nans = len(vals)", 3),
    _ok("format-builtin", "ans = format(1234567, ',')", "1,234,567"),
    _ok(
        "str-methods",
        "s = 'Hello, World'\nans = [s.lower().count('l'), s.split(', '), s[::-1][:3], s.zfill(14)[:2]]",
        [3, ["Hello", "World"], "dlr", "00"],
    ),
    # ---- iteration ---------------------------------------------------------------------------------
    _ok(
        "enumerate-zip",
        "names = ['a', 'b']\nscores = [3, 4]\nans = [(i, n, s) for i, (n, s) in enumerate(zip(names, scores))]",
        [[0, "a", 3], [1, "b", 4]],
    ),
    _ok("zip-strict-dict", "d = dict(zip('ab', [1, 2], strict=True))\nans = [d['a'], d['b']]", [1, 2]),
    _ok(
        "sorted-key-lambda", "d = {'x': 3, 'y': 1}\nans = sorted(d.items(), key=lambda kv: kv[1])", [["y", 1], ["x", 3]]
    ),
    _ok("dict-merge-unpack", "a = {'x': 1}\nb = {'y': 2}\nans = sorted({**a, **b, 'z': 3}.values())", [1, 2, 3]),
    _ok("star-unpack", "first, *rest = [1, 2, 3]\nans = [first, rest]", [1, [2, 3]]),
    _ok(
        "itertools-combos",
        "from itertools import combinations, permutations, product\n"
        "ans = [len(list(combinations(range(5), 2))), len(list(permutations('abc'))), len(list(product([0, 1], repeat=3)))]",
        [10, 6, 8],
    ),
    _ok(
        "functools-lru-cache",
        "from functools import lru_cache\n@lru_cache(maxsize=None)\ndef c(n):\n"
        "    return 1 if n < 2 else c(n - 1) + c(n - 2)\nans = c(80)",
        37889062373143906,
    ),
    _ok("functools-reduce-gcd", "from functools import reduce\nimport math\nans = reduce(math.gcd, [12, 18, 30])", 6),
    _ok("map-filter", "ans = list(map(int, filter(str.isdigit, ['1', 'a', '3'])))", [1, 3]),
    _ok(
        "comprehensions",
        "ans = [{k: v for k, v in [(1, 2)]}[1], len({x % 3 for x in range(9)}), sum(x * x for x in range(4))]",
        [2, 3, 14],
    ),
    _ok(
        "copy-deepcopy",
        "import copy\ngrid = [[0] * 2 for _ in range(2)]\ng2 = copy.deepcopy(grid)\ng2[0][0] = 1\n"
        "ans = [grid[0][0], g2[0][0]]",
        [0, 1],
    ),
    _ok(
        "copy-program-object",
        "import copy\nclass S:\n    def __init__(self):\n        self.v = [1]\n"
        "s = S()\nt = copy.deepcopy(s)\nt.v.append(2)\nu = copy.copy(s)\nans = [s.v, t.v, u.v is s.v]",
        [[1], [1, 2], True],
    ),
    # ---- libraries ---------------------------------------------------------------------------------------
    _ok(
        "numpy-basics",
        "import numpy as np\na = np.array([[1, 2], [3, 4]])\nans = [int(a.sum()), a.T.tolist(), "
        "float(np.linalg.det(a).round(6)), np.mean(a, axis=0).tolist()]",
        [10, [[1, 3], [2, 4]], -2.0, [2.0, 3.0]],
    ),
    _ok(
        "sympy-solve",
        "import sympy as sp\nx, y = sp.symbols('x y')\nsol = sp.solve([x + y - 10, x - y - 2], (x, y))\n"
        "ans = [int(sol[x]), int(sol[y])]",
        [6, 4],
    ),
    _ok(
        "sympy-rational-nsimplify",
        "import sympy\nans = [str(sympy.Rational(3, 4) + sympy.Rational(1, 4)), str(sympy.nsimplify(0.125))]",
        ["1", "1/8"],
    ),
    _ok(
        "statistics", "import statistics\nans = [statistics.mean([1, 2, 3, 4]), statistics.median([5, 1, 3])]", [2.5, 3]
    ),
    _ok("datetime", "from datetime import date, timedelta\nans = (date(2024, 3, 1) - timedelta(days=1)).day", 29),
    _ok("math-comb", "import math\nans = [math.comb(5, 2), math.perm(4, 2), math.prod([2, 3, 4])]", [10, 12, 24]),
    _ok("re-findall", "import re\nans = [int(n) for n in re.findall(r'\\d+', 'a1b22c333')]", [1, 22, 333]),
    # ---- refused, with the reason they stay refused ------------------------------------------------
    _refused("input", "n = int(input())\nans = n", "reads standard input: a program gets none (no stdin in PoT)"),
    _refused("open-file", "with open('data.txt') as f:\n    ans = f.read()", "files: the policy reads and writes none"),
    _refused("import-os", "import os\nans = os.getcwd()", "os: files, processes and the environment"),
    _refused("eval", "ans = eval('1 + 1')", "evaluates text outside the compile-time rules"),
    _refused("exec", "exec('x = 1')\nans = 1", "evaluates text outside the compile-time rules"),
    _refused(
        "globals", "ans = globals()['__name__']", "hands out the program's namespace, the guards' functions with it"
    ),
    _refused(
        "dunder-attribute",
        "ans = (1).__class__.__bases__",
        "a dunder attribute other than __name__, __class__, __init__",
    ),
    _refused(
        "namedtuple-asdict",
        "from collections import namedtuple\nP = namedtuple('P', 'x')\nans = P(1)._asdict()",
        "a name with a leading underscore (namedtuple's _asdict, _replace): refused everywhere",
    ),
    _refused(
        "getattr-dunder-method",
        "class A:\n    def __getattr__(self, name):\n        return 1\nans = A().x",
        "__getattr__: numpy and copy ask objects for protocol names (__array_interface__, __reduce_ex__)",
    ),
    _refused(
        "slots",
        "class N:\n    __slots__ = ('val',)\nans = 1",
        "__slots__ names descriptors on a class: a slot named __array_interface__ would be a protocol hook",
    ),
    _refused(
        "enum",
        "from enum import Enum\nclass Color(Enum):\n    RED = 1\nans = Color.RED.value",
        "enum is not allowed: its functional API Enum('E', names) puts run-time names, dunders included, on a class",
    ),
    _refused(
        "match",
        "x = 3\nmatch x:\n    case 3:\n        ans = 1",
        "match: RestrictedPython has no reviewed rule for its "
        "patterns (class patterns read attributes named by __match_args__)",
    ),
    _refused(
        "sympify-string",
        "import sympy\nans = str(sympy.sympify('x**2'))",
        "sympify parses a string with eval(); only plain formulas of constants are parsed",
    ),
    _refused(
        "sys-exit", "import sys\nprint(1)\nsys.exit(0)", "sys.exit is not listed: only sys's limits and constants are"
    ),
    _refused(
        "dataclass-make",
        "from dataclasses import make_dataclass\nP = make_dataclass('P', ['x'])\nans = P(1).x",
        "make_dataclass takes a namespace: a class whose names no transformer checked",
    ),
    _refused(
        "typing-get-type-hints",
        "from typing import get_type_hints\ndef f(x: 'int'):\n    pass\nans = get_type_hints(f)",
        "get_type_hints eval()s annotation strings",
    ),
    _refused(
        "set-library-attribute",
        "import functools\np = functools.partial(max, 1)\np.note = 'x'\nans = p(2)",
        "a library object's attributes are its code's inputs: only what the program made is writable",
    ),
]


def idiom_programs() -> Iterator[tuple[str, str]]:
    """(id, source) of the idioms written here."""
    for idiom in IDIOMS:
        yield f"idiom:{idiom.id}", idiom.source


def data_programs(*, pot: bool = True) -> Iterator[tuple[str, str]]:
    """(id, source) of the shared data's programs, as potrun extracts them: the DocMath-Eval sample's
    model outputs and gold programs, the peers' code-extraction cases, and (`pot`) the PoT GSM8K and
    SVAMP Codex generations (2,320 programs)."""
    from potrun.extractors.code import extract_program

    for number, line in enumerate((SHARED / "benchmarks" / "docmath" / "sample.jsonl").open(), 1):
        record = json.loads(line)["record"]
        yield f"docmath:{number}:gold", record["python_solution"]
        for index, output in enumerate(record["output"]):
            program = extract_program(output)
            if program.source:
                yield f"docmath:{number}:output{index}", program.source
    for number, line in enumerate((SHARED / "peer-cases" / "peer_test_cases.jsonl").open(), 1):
        case = json.loads(line)
        if case["kind"] == "extract_code" and isinstance(case.get("expected"), str) and case["expected"].strip():
            yield f"peer:{number}", case["expected"]
    if pot:
        for name in ("gsm8k_fewshot_codex.jsonl", "svamp_fewshot_codex.jsonl"):
            for number, line in enumerate((SHARED / "pot" / name).open(), 1):
                for index, generated in enumerate(json.loads(line).get("generated") or ()):
                    program = extract_program(generated)
                    if program.source:
                        yield f"{name.split('_')[0]}:{number}:{index}", program.source


# Data programs the policy refuses, each reviewed (the key: its id in `data_programs`).
REFUSED_DATA: dict[str, str] = {
    "docmath:30:output0": "imports pandas, which is not allowed: it reads files (read_csv, read_pickle) and evaluates"
    " strings (DataFrame.eval, query); not reviewed",
}
