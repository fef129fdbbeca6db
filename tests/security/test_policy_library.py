"""The restricted policy against library machinery (issue 35, class 3), beyond the corpus of programs in
test_policy_escapes.py (which runs the attacks themselves on both backends and tiers):

- attribute writes are default-deny: generated programs write generated names on the program's own
  objects (allowed) and on every kind of library object a program can make (refused);
- what calls return, iteration yields, `*args` unpacks and a program function receives pass the same
  check as an attribute read;
- library code that reads a frame or evaluates text is refused while a restricted program is on the
  stack, unless reviewed, and changes nothing outside one;
- the guards' state cannot be emptied or rewritten by whoever reaches the object;
- under the trusted policy, the OS boundary holds for the same payload.
"""

from __future__ import annotations

import builtins
import collections
import keyword
import os
import random
import shutil
import sys
import tempfile
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import potrun.policies.restricted as restricted
from potrun import Sandbox
from potrun.policies import get_policy
from potrun.policies.restricted import Guards, PolicyViolation, compile_restricted_program


class _Printed:
    def _call_print(self, *objects: Any, **kwargs: Any) -> None:
        pass


def run(source: str, extra: dict[str, Any] | None = None) -> tuple[str, Any, Guards]:
    """(status, ans, guards) of a program run here under a fresh Guards; `extra` adds globals (a
    stand-in for a library member the allowlist would hand out)."""
    guards = Guards(get_policy("restricted"))
    guards.begin()
    namespace = guards.new_globals(lambda _getattr=None: _Printed())
    namespace.update(extra or {})
    try:
        exec(compile_restricted_program(source), namespace)
    except PolicyViolation:
        return "policy_violation", None, guards
    except Exception:
        return ("policy_violation" if guards.violations else "error"), None, guards
    return ("policy_violation" if guards.violations else "ok"), namespace.get("ans"), guards


# ------------------------------------------------------------------- writes, with generated programs

# Library objects a program can make with the allowlist; none is the program's to write attributes to.
LIBRARY_OBJECTS = [
    "functools.cached_property(lambda self: 1)",
    "functools.partial(max, 1)",
    "functools.lru_cache(maxsize=None)(lambda: 1)",
    "random.Random(1)",
    "collections.Counter('ab')",
    "collections.deque([1])",
    "fractions.Fraction(1, 3)",
    "decimal.Decimal(1)",
    "datetime.date(2024, 1, 1)",
    "re.compile('a')",
    "string.Template('$x')",
    "statistics.NormalDist(0, 1)",
    "numpy.zeros(2)",
    "numpy.float64(1)",
    "numpy.random.default_rng(1)",
    "sympy.Symbol('x')",
    "sympy.Function('f')",
    "sympy.Matrix([[1]])",
    "collections.namedtuple('T', 'a', module='__potrun_program__')",
    "calendar.TextCalendar()",
]
IMPORTS = "import functools, random, collections, fractions, decimal, datetime, re, string, statistics, calendar\n"
IMPORTS += "import numpy, sympy\n"


def _names(seed: int, count: int) -> list[str]:
    """Attribute names a program may spell (identifiers without a leading underscore), drawn by seed;
    names that library code reads (attrname, func, name, shape...) among them."""
    rng = random.Random(seed)
    known = ["attrname", "func", "name", "data", "args", "keywords", "shape", "strides", "dtype", "maxlen"]
    names = []
    for _ in range(count):
        if rng.random() < 0.4:
            names.append(rng.choice(known))
            continue
        name = rng.choice("abcdefghijklmnopqrstuvwxyz") + "".join(
            rng.choice("abcdefghijklmnopqrstuvwxyz0123456789_") for _ in range(rng.randint(0, 10))
        )
        names.append(name if not keyword.iskeyword(name) else name + "x")
    return names


@pytest.mark.parametrize("seed", range(4))
def test_no_attribute_of_a_library_object_is_writable(seed: int) -> None:
    rng = random.Random(seed)
    for name in _names(seed, 25):
        made = rng.choice(LIBRARY_OBJECTS)
        how = rng.choice(["o.{name} = 1", "o.{name} += 1", "del o.{name}"])
        source = IMPORTS + f"o = {made}\n" + how.format(name=name) + "\nans = 'written'"
        status, value, guards = run(source)
        assert status == "policy_violation" and value is None, (made, name, how)
        assert guards.violations[0].rule in {"object_write", "class_write", "function_write"}, guards.violations


@pytest.mark.parametrize("seed", range(4))
def test_the_program_writes_any_name_on_what_it_made(seed: int) -> None:
    """Its classes, their instances (plain, or derived from a builtin or a reviewed library base), and
    its functions: every name it may spell."""
    rng = random.Random(1000 + seed)
    bases = ["", "(object)", "(Exception)", "(dict)", "(list)", "(collections.Counter)", "(collections.UserDict)"]
    taken = {name for cls in (Exception, collections.Counter, collections.UserDict, list) for name in dir(cls)}
    for name in _names(1000 + seed, 25):
        if name in taken:  # a base's own attribute (Exception.args wants a tuple): not the policy's concern
            continue
        base = rng.choice(bases)
        source = (
            "import collections\n"
            f"class C{base}:\n    pass\n"
            f"class D(C):\n    def set(self, v):\n        self.{name} = v\n"
            f"def f():\n    return 1\n"
            f"o = D()\no.set(1)\no.{name} += 1\nC.{name} = 5\nf.{name} = 7\n"
            f"ans = [o.{name}, D.{name}, f.{name}]"
        )
        status, value, guards = run(source)
        assert (status, value) == ("ok", [2, 5, 7]), (source, guards.violations)


@pytest.mark.parametrize(
    "source",
    [
        "import decimal\ndecimal.getcontext().prec = 40\nans = str(decimal.Decimal(1) / 3)[:6]",
        "import decimal\nc = decimal.Context()\nc.rounding = decimal.ROUND_HALF_UP\nans = c.rounding",
        "import numpy as np\na = np.arange(6)\na.shape = (2, 3)\nans = a.shape",
    ],
    ids=["decimal-prec", "decimal-rounding", "ndarray-shape"],
)
def test_reviewed_library_settings_stay_writable(source: str) -> None:
    status, _, guards = run(source)
    assert status == "ok", guards.violations


# ------------------------------------------------- what calls, iteration, unpacking and callbacks give


def _frame() -> types.FrameType:
    return sys._getframe()


DANGEROUS = [
    pytest.param(lambda: sys.modules, id="sys.modules"),
    pytest.param(lambda: os, id="os-module"),
    pytest.param(lambda: vars(builtins), id="builtins-namespace"),
    pytest.param(lambda: builtins.eval, id="builtins.eval"),
    pytest.param(lambda: type, id="type-metaclass"),
    pytest.param(lambda: _frame(), id="frame"),
    pytest.param(lambda: Guards, id="the-guards-class"),
    pytest.param(lambda: PolicyViolation("x", "y"), id="a-violation"),
]


@pytest.mark.parametrize("make", DANGEROUS)
@pytest.mark.parametrize(
    "how",
    [
        "ans = hand()",  # a call's result
        "for x in hand_list():\n    ans = x",  # iteration
        "ans = [x for x in hand_list()]",  # a comprehension
        "a, b = hand_list() + [1]\nans = a",  # unpacking
        "def f(*args):\n    return args\nans = f(*hand_list())",  # *args
        "def f(x):\n    return x\nans = list(map(f, hand_list()))",  # a callback's argument
        "ans = list(map(lambda x: x, hand_list()))",  # a lambda's argument
        "ans = max(hand_list(), key=lambda x: 0)",  # a result of a builtin
    ],
    ids=["call", "for", "comprehension", "unpacking", "star-args", "callback", "lambda", "builtin"],
)
def test_values_that_come_into_reach_are_checked(make: Any, how: str) -> None:
    dangerous = make()
    status, value, _ = run(how, {"hand": lambda: dangerous, "hand_list": lambda: [dangerous]})
    assert status == "policy_violation", (how, value)
    assert value is not dangerous and not (isinstance(value, list) and dangerous in value)


def _leaky(dangerous: Any) -> Any:
    """An object that stands for a library value whose special methods hand out `dangerous`: every
    operator, comparison, in-place operator, `__enter__`, and the return value of its iterator."""

    def give(*args: Any) -> Any:
        return dangerous

    names = "add radd sub rsub mul rmul matmul truediv mod pow or ror and xor lshift neg pos invert abs lt le gt ge eq ne iadd ior enter"
    namespace: dict[str, Any] = {f"__{name}__": give for name in names.split()}
    namespace["__exit__"] = lambda *args: False
    namespace["__hash__"] = object.__hash__
    leaky_class = type("Leaky", (), namespace)
    leaky_class.__module__ = "socket"  # a module outside the allowlist: the object itself is refused too
    return leaky_class()


def _returns(dangerous: Any) -> Any:
    yield 1
    return dangerous


@pytest.mark.parametrize("make", DANGEROUS)
@pytest.mark.parametrize(
    "how",
    [
        "ans = leaky + 1",
        "ans = 1 + leaky",
        "ans = leaky | None",
        "ans = leaky @ 2",
        "ans = -leaky",
        "ans = ~leaky",
        "ans = leaky < 1",
        "ans = 0 <= leaky",
        "ans = leaky != 3",
        "ans = leaky\nans += 1",
        "ans = leaky\nans |= 1",
        "box = [leaky]\nbox[0] += 1\nans = box",
        "with leaky as ans:\n    pass",
        "with leaky as (ans, other):\n    pass",
        "def g():\n    got = yield from returns()\n    yield got\nans = list(g())",
        "ans = [*hand_list()]",
        "ans = (*hand_list(),)",
        "ans = {**hand_map()}",
        "ans = {**hand_keys()}",
        "try:\n    raise_it()\nexcept Exception as caught:\n    ans = caught",
    ],
    ids=[
        "add",
        "radd",
        "or",
        "matmul",
        "neg",
        "invert",
        "lt",
        "le-reflected",
        "ne",
        "iadd-name",
        "ior-name",
        "iadd-item",
        "with",
        "with-tuple",
        "yield-from",
        "list-display",
        "tuple-display",
        "dict-merge",
        "dict-merge-keys",
        "except-as",
    ],
)
def test_what_operators_and_with_give_is_checked(make: Any, how: str) -> None:
    """Operator results, `with ... as`, `yield from`, displays' unpacking and a caught exception pass the
    check of a call's result (issue 35): a library's special method hands back what it likes."""
    dangerous = make()

    def raise_it() -> None:
        error = RuntimeError("x")
        error.payload = dangerous  # type: ignore[attr-defined]
        raise _LibraryError() from error

    extra = {
        "leaky": _leaky(dangerous),
        "hand_list": lambda: [dangerous],
        "hand_map": lambda: {"a": dangerous},
        "hand_keys": lambda: {_leaky(dangerous): 1},
        "returns": lambda: _returns(dangerous),
        "raise_it": raise_it,
    }
    status, value, _ = run(how, extra)
    assert status == "policy_violation", (how, value)


class _LibraryError(Exception):
    """An exception of a class from outside the allowlist (its module says socket)."""


_LibraryError.__module__ = "socket"


@pytest.mark.parametrize(
    "source",
    [
        "ans = [1 + 2 * 3 - -4, 2 ** 10 // 3 % 7, 1 < 2 <= 3, 'a' + 'b', [1] * 2, (1, 2) + (3,), ~5, not 0]",
        "x = 1\nx += 2\nx *= 3\nans = x",
        "from fractions import Fraction\nans = float(Fraction(1, 3) + Fraction(1, 6))",
        "import numpy as np\nans = float((np.arange(4) * 2 + 1).sum())",
        "import decimal\nwith decimal.localcontext() as ctx:\n    ctx.prec = 5\n    ans = str(decimal.Decimal(1) / 7)",
        "ans = {**{'a': 1}, **dict(b=2)}\nans = sorted([*ans, *range(2)], key=str)",
        "try:\n    1 / 0\nexcept ZeroDivisionError as error:\n    ans = type(error).__name__",
        "def g():\n    got = yield from range(2)\n    yield got\nans = list(g())",
        "ans = str(int | None)",
    ],
)
def test_everyday_operators_and_with_still_run(source: str) -> None:
    status, _, guards = run(source)
    assert status == "ok", (source, guards.violations)


# ------------------------------------------------------------ library code reading frames or evaluating

FAKE_LIBRARY = """
import sys
def frame():
    return sys._getframe(1)
def inspect_frame():
    import inspect
    return inspect.currentframe().f_back
def evaluate(text):
    return eval(text)
def execute(text):
    namespace = {}
    exec(text, namespace)
    return namespace
def compiled(text):
    return compile(text, "<x>", "eval")
"""


@pytest.fixture(scope="module")
def fake_library() -> types.ModuleType:
    """A module that stands for an allowlisted library member nobody reviewed."""
    module = types.ModuleType("potrun_fake_library")
    exec(compile(FAKE_LIBRARY, "potrun_fake_library.py", "exec"), vars(module))
    return module


@pytest.mark.parametrize(
    "call",
    ["frame()", "inspect_frame()", "evaluate('1 + 1')", "execute('x = 1')", "compiled('1')"],
)
def test_library_code_may_not_read_frames_or_evaluate_text(fake_library: types.ModuleType, call: str) -> None:
    members = {
        name: getattr(fake_library, name) for name in ("frame", "inspect_frame", "evaluate", "execute", "compiled")
    }
    status, value, guards = run(f"ans = {call}", members)
    assert status == "policy_violation" and value is None
    assert guards.violations[0].rule == "forbidden_call"


def test_outside_a_restricted_program_library_code_is_unchanged(fake_library: types.ModuleType) -> None:
    run("ans = 1")  # the guards are installed from here on, in this process
    assert fake_library.frame().f_code.co_name == "test_outside_a_restricted_program_library_code_is_unchanged"
    assert fake_library.evaluate("6 * 7") == 42
    assert fake_library.execute("x = 1")["x"] == 1
    # And a trusted or pure program (same file name, no restricted globals) is not a restricted one.
    namespace: dict[str, Any] = {"evaluate": fake_library.evaluate}
    exec(compile("ans = evaluate('2 + 3')", restricted.FILENAME, "exec"), namespace)
    assert namespace["ans"] == 5


def test_reviewed_library_paths_still_run() -> None:
    """namedtuple (frame and eval), sympy's checked parse and lambdify."""
    source = (
        "import collections, sympy\nP = collections.namedtuple('P', 'x y')\n"
        "x = sympy.Symbol('x')\nr = sympy.nsolve(x**2 - 2, x, 1)\n"
        "ans = [P(1, 2).y, 0, round(float(r), 4), str(sympy.simplify('2*sqrt(2)/4'))]"
    )
    status, value, guards = run(source)
    assert status == "ok" and value == [2, 0, 1.4142, "sqrt(2)/2"], guards.violations


# ------------------------------------------------------------------------------------- the guards' state


def test_the_guards_record_cannot_be_emptied_or_rewritten() -> None:
    guards = Guards(get_policy("restricted"))
    guards.begin()
    guards.refuse("forbidden_call", "first")
    assert isinstance(guards.violations, tuple)
    with pytest.raises(AttributeError):
        guards.violations.clear()  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError):
        guards.begin()  # once per process
    with pytest.raises(AttributeError):
        guards.anything = 1  # type: ignore[attr-defined]  # no __dict__
    assert not hasattr(guards, "__dict__")
    assert [v.message for v in guards.violations] == ["first"]


def test_no_module_global_holds_a_guards_object() -> None:
    """A library frame read would hand out this module's globals: none of them is, or holds, a
    Guards, its record or its builtins."""
    guards = Guards(get_policy("restricted"))
    guards.begin()
    for name, value in vars(restricted).items():
        held = [value]
        if isinstance(value, (list, tuple, set, frozenset)):
            held += list(value)
        elif isinstance(value, dict):
            held += list(value.values())
        for item in held:
            assert not isinstance(item, Guards), name
            assert item is not guards.builtins, name
            assert getattr(item, "__self__", None) is not guards, name


# --------------------------------------------------------------------- the OS layer, for the same payload

PAYLOAD = """
import functools
def f(self):
    return {}
cp = functools.cached_property(f)
class C:
    x = cp
cp.attrname = "__array_interface__"
C().x
open("MARKER", "w").write("escaped")
ans = "ESCAPED"
"""


@pytest.fixture
def host_folder() -> Iterator[Path]:
    """A folder of the host that anyone may write to: only the OS boundary keeps a program out."""
    folder = Path(tempfile.mkdtemp(prefix="potrun-test-policy-"))
    folder.chmod(0o777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("policy", ["restricted", "trusted"])
def test_the_payload_reaches_no_host_file_under_either_policy(box: Sandbox, policy: str, host_folder: Path) -> None:
    marker = host_folder / "marker"
    result = box.run(PAYLOAD.replace("MARKER", str(marker)))
    assert not marker.exists()
    if policy == "restricted":
        assert result.status.value == "policy_violation", result.error
    else:
        assert result.status.value in ("error", "ok") and result.value != "ESCAPED", result.error
