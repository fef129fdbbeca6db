"""What a restricted program may hold and call, as data and small checks: the builtins it gets beyond
RestrictedPython's and those it is refused, the plain types, the kinds and classes it may not hold, where
library objects may come from, and the checks on a value's class and origin the guards use.
"""

from __future__ import annotations

import dis
import sys
import types
from collections.abc import Callable
from typing import Any

from potrun.policies import (
    ALLOWED_MODULES,
    DENIED_ATTRIBUTES,
)
from potrun.policies.restricted_compile import FILENAME, PROGRAM_MODULE, PolicyViolation
from potrun.policies.restricted_library import _from_sympy

# Builtins a program needs beyond RestrictedPython's safe set (which dropped the C-iterating ones).
_EXTRA_BUILTINS = (
    "bytes",
    "bytearray",
    "all",
    "any",
    "bin",
    "dict",
    "divmod",
    "enumerate",
    "filter",
    "format",
    "frozenset",
    "iter",
    "len",
    "list",
    "map",
    "max",
    "min",
    "next",
    "object",
    "print",
    "range",
    "reversed",
    "round",
    "set",
    "sum",
    "isinstance",
    "issubclass",
    "callable",
    "abs",
    "chr",
    "ord",
    "hex",
    "oct",
    "pow",
    "property",
    "staticmethod",
    "classmethod",
    "super",
    "ExceptionGroup",
    "StopAsyncIteration",
    "RecursionError",
    "ZeroDivisionError",
)

# Refused with a policy violation (not a NameError), so the verdict names the rule.
_DENIED_BUILTINS = (
    "open",
    "exec",
    "eval",
    "compile",
    "globals",
    "locals",
    "vars",
    "input",
    "breakpoint",
    "help",
    "exit",
    "quit",
    "memoryview",
    "dir",
    "id",
)


# Standard-library helpers that allowlisted C modules import lazily by a fixed name:
# datetime.strptime needs _strptime, date.today() and datetime.now() need time; on 3.13 (not 3.11),
# CPython's C warnings code imports warnings to show a warning raised in C (np.log(0.0)).
IMPLICIT_IMPORTS = frozenset({"_strptime", "time", "warnings"})
_IMPORT_NAME = dis.opmap["IMPORT_NAME"]


def _import_statement(frame: types.FrameType) -> bool:
    """Is this a program frame stopped at an `import` statement (not inside a call into C)?"""
    code = frame.f_code
    return code.co_filename == FILENAME and code.co_code[frame.f_lasti] == _IMPORT_NAME


# Types whose instances come back from attribute and item reads unchecked: they hold no reference a
# program could not already reach (containers are checked where they come into reach, not per item).
_PLAIN: frozenset[type] = frozenset(
    {int, float, complex, bool, str, bytes, bytearray, type(None), tuple, list, set, frozenset, range, slice}
)

# Iterables whose items are always plain (a str's are str, a range's int): iterated unchecked.
_PLAIN_ITEMS: frozenset[type] = frozenset({str, bytes, bytearray, range})

# Kinds of object a program may never hold, whatever path leads there: frames and tracebacks (f_back,
# f_globals), code (its constructor makes any bytecode), cells, class namespaces.
_DENIED_KINDS: frozenset[type] = frozenset(
    {types.FrameType, types.TracebackType, types.CodeType, types.CellType, types.MappingProxyType}
)

# Classes a program may not hold: the `types` module's (FunctionType(code, globals), CodeType,
# ModuleType, ...), except the harmless singletons' types programs compare against.
_DENIED_CLASSES: frozenset[int] = frozenset(
    id(value)
    for name, value in vars(types).items()
    if isinstance(value, type)
    and name not in ("NoneType", "EllipsisType", "NotImplementedType", "GenericAlias", "UnionType")
)

# Where library functions, classes and objects a program may hold come from: the allowlisted packages,
# the C helpers behind them, sympy's integer backends, builtins, and the program itself. Not mpmath:
# sympy's Float.num is an mpmath number whose .context.identify() eval()s strings.
_ORIGINS: frozenset[str] = frozenset(
    {name.partition(".")[0] for name in ALLOWED_MODULES if name != "sys"}
    | {
        "builtins",
        PROGRAM_MODULE,
        "_heapq",
        "_bisect",
        "_random",
        "_decimal",
        "_pydecimal",
        "_datetime",
        "_pydatetime",
        "_functools",
        "_collections",
        "_operator",
        "_statistics",
        "_sre",
        "_string",
        "gmpy2",
        "flint",
    }
)


# Cython's function classes live in a module named after the Cython version (_cython_3_2_4).
_CYTHON_FUNCTIONS = frozenset({"cython_function_or_method", "fused_cython_function"})


def _class_refusal(cls: type) -> str | None:
    if issubclass(cls, type):
        return f"the metaclass {cls.__name__!r}"
    if id(cls) in _DENIED_CLASSES:
        return f"the class {cls.__name__!r}"
    if issubclass(cls, PolicyViolation):  # a program's own violations would name any rule and line
        return "the class of policy violations"
    real = _real_ndarray()
    if real is not None and cls is not real and issubclass(cls, real) and cls.__module__ != PROGRAM_MODULE:
        return f"the ndarray subclass {cls.__name__!r}"
    if _made_by_sympy(cls):
        return None
    return _origin_refusal(getattr(cls, "__module__", None), "class")


def _made_by_sympy(cls: type) -> bool:
    """A class made by one of sympy's metaclasses (`Function("f")`: its namespace is checked, see
    `close_sympy_escape_hatches`; such classes have no `__module__`)."""
    return _from_sympy(type(cls))


# The policy's own modules (restricted.py and the halves split out of it).
_POLICY_MODULES = frozenset(
    f"potrun.policies.{name}" for name in ("restricted", "restricted_compile", "restricted_library", "restricted_reach")
)


def _origin_refusal(module_name: Any, what: str) -> str | None:
    # The policy's own functions are the guarded versions a program is given anyway; its classes and
    # their instances (the Guards, their record) are not the program's.
    if isinstance(module_name, str) and module_name in _POLICY_MODULES:
        return None if what == "function" else f"a {what} of the policy's own"
    if not isinstance(module_name, str) or module_name.partition(".")[0] not in _ORIGINS:
        return f"a {what} of module {module_name!r}"
    return None


def _real_ndarray() -> type | None:
    numpy = sys.modules.get("numpy")
    return getattr(numpy, "ndarray", None) if numpy is not None else None


def _exact_str(name: Any) -> str:
    """A name as an exact str: a str subclass could answer startswith() as it likes."""
    if not isinstance(name, str):
        raise TypeError(f"attribute name must be string, not {type(name).__name__!r}")
    return str.__str__(name) if type(name) is not str else name


def _is_str_format(value: Any) -> bool:
    """Is this str.format, bound to a string or not?"""
    return value is str.format or (
        type(value) is types.BuiltinMethodType
        and isinstance(getattr(value, "__self__", None), str)
        and getattr(value, "__name__", None) == "format"
    )


class _CheckedContext:
    """What `with manager as x` enters under the restricted policy (`Guards.with_`)."""

    __slots__ = ("_check", "_manager")

    def __init__(self, manager: Any, check: Callable[[Any], Any]) -> None:
        self._manager = manager
        self._check = check

    def __enter__(self) -> Any:
        return self._check(type(self._manager).__enter__(self._manager))

    def __exit__(self, *exc: Any) -> Any:
        return type(self._manager).__exit__(self._manager, *exc)


def _denied_attribute(obj: Any, name: str) -> bool:
    root = _owner_root(obj)
    return root is not None and name in DENIED_ATTRIBUTES.get(root, ())


def _owner_root(obj: Any) -> str | None:
    """The top-level package an object comes from (a module, a class, or an instance's class)."""
    if isinstance(obj, types.ModuleType):
        name = obj.__name__
    else:
        cls = obj if isinstance(obj, type) else type(obj)
        name = getattr(cls, "__module__", None) or ""
    root = name.partition(".")[0]
    return root if root in DENIED_ATTRIBUTES else None


def _owner_name(obj: Any) -> str:
    return obj.__name__ if isinstance(obj, types.ModuleType) else type(obj).__name__
