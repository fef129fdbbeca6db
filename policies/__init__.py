"""What a program may do.

A policy is data (which modules a program may import, which attributes are off limits) plus the code
that enforces it at compile time and at run time. Policies add to the OS isolation of the sandbox; they
never replace it.

- `restricted` (the default for model output): RestrictedPython compile and guards, an import
  allowlist and, per module, an allowlist of the members a program may use (`members.MEMBERS`, each
  with its reason), no file, process, network, introspection or dunder access, no writes to modules,
  and numpy's and sympy's own escape hatches closed. How the guards decide is in `restricted`.
- `trusted` (the default for gold validation): plain Python; every OS-level limit still applies.
"""

from __future__ import annotations

from dataclasses import dataclass

from potrun.types import UsageError

# The standard library modules programs import most: every worker imports them at its start, outside
# any program's limits (`sandbox/inside/worker.py`), so that no fork pays their import.
STDLIB_MODULES: tuple[str, ...] = (
    "math",
    "cmath",
    "statistics",
    "fractions",
    "decimal",
    "datetime",
    "itertools",
    "functools",
    "collections",
    "operator",
    "re",
    "string",
    "random",
    "heapq",
    "bisect",
    "copy",
)
# Modules a restricted program may import (top level or dotted). sympy only where it is installed.
ALLOWED_MODULES: frozenset[str] = frozenset(
    {
        *STDLIB_MODULES,
        "numbers",
        "calendar",
        "numpy",
        "numpy.linalg",
        "numpy.random",
        "numpy.fft",
        "numpy.polynomial",
        "numpy.emath",
        "numpy.lib.scimath",
        "sympy",
        "sympy.abc",
        "sympy.ntheory.modular",
        "typing",
        "dataclasses",
        "__future__",
        "sys",
    }
)

# Attribute names refused on *values* (instances and classes) whose class comes from these packages,
# on top of DENIED_NAMES and every name that starts with an underscore. What a program may read from a
# *module* is an allowlist instead (`members.MEMBERS`). numpy: raw memory (`ctypes`, `data` is a
# memoryview, `base` the buffer's owner, a bit generator's `cffi` and `capsule` pointers), files
# (`tofile`, `dump`, `dumps` pickle), and `ndarray.resize`, which with refcheck=False frees memory that
# views still point to.
DENIED_ATTRIBUTES: dict[str, frozenset[str]] = {
    "numpy": frozenset({"ctypes", "cffi", "capsule", "data", "base", "tofile", "dump", "dumps", "resize"}),
}

# Attribute writes are default-deny (`restricted.Guards.write_attr`): a program writes attributes only on
# what it made. These library classes' instances are settings a program may change, by these names only
# (each a value its class checks; no name or code): decimal's context (`getcontext().prec = 50`), an
# array's shape (numpy checks that the size is the same).
WRITABLE_ATTRIBUTES: dict[str, frozenset[str]] = {
    "decimal.Context": frozenset({"prec", "rounding", "Emin", "Emax", "capitals", "clamp"}),
    "numpy.ndarray": frozenset({"shape"}),
}

# Library classes a program's class may derive from and still write attributes on its instances: their
# code reads no attribute of the instance as a name, a key of its `__dict__` or code (the allowlist
# sweep in tests/security/test_allowlist_sweep.py checks it), so what the program writes stays its data.
# A program class derived from any other library class (`functools.cached_property`, whose `attrname`
# names the attribute its code sets) writes no attribute.
WRITABLE_BASES: dict[str, str] = {
    "collections.Counter": "a dict of counts; its code reads no attribute by name",
    "collections.OrderedDict": "a dict; its code reads no attribute by name",
    "collections.defaultdict": "a dict in C",
    "collections.deque": "a sequence in C",
    "collections.UserDict": "keeps its items in `data`, which it only reads",
    "collections.UserList": "keeps its items in `data`, which it only reads",
    "collections.ChainMap": "keeps its mappings in `maps`, which it only reads",
    "fractions.Fraction": "a number; its state is in slots read by fixed names",
    "numbers.Number": "abstract base class: no state",
    "numbers.Complex": "abstract base class: no state",
    "numbers.Real": "abstract base class: no state",
    "numbers.Rational": "abstract base class: no state",
    "numbers.Integral": "abstract base class: no state",
    "typing.Generic": "typing's base for generic classes: no instance state",
    "typing.NamedTuple": "class factory; its instances are tuples",
}

# Modules all of whose classes are such bases: collections.abc's abstract classes (no state; their mixin
# methods call the abstract ones by fixed names).
WRITABLE_BASE_MODULES: dict[str, str] = {
    "collections.abc": "abstract base classes: no state; their mixin methods call the abstract ones by fixed names",
}

# Attribute names refused everywhere: they lead to frames, code objects and globals.
DENIED_NAMES: frozenset[str] = frozenset(
    {
        "gi_frame",
        "gi_code",
        "gi_yieldfrom",
        "cr_frame",
        "cr_code",
        "cr_await",
        "cr_origin",
        "ag_frame",
        "ag_code",
        "ag_await",
        "f_back",
        "f_builtins",
        "f_code",
        "f_globals",
        "f_locals",
        "f_trace",
        "tb_frame",
        "tb_next",
        "co_code",
        "func_globals",
        "mro",
        "format_map",
        "f_generator",
    }
)


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """A policy as data: what the sandbox reports and what the worker enforces."""

    name: str
    restricted: bool
    allowed_modules: frozenset[str] = ALLOWED_MODULES


# The policy registry: a preset is one line here (its data above or in its own module). The CLI's
# --policy choices and every check of a policy name read it.
POLICIES: dict[str, PolicySpec] = {
    "restricted": PolicySpec("restricted", restricted=True),
    "trusted": PolicySpec("trusted", restricted=False),
}
POLICY_NAMES = tuple(POLICIES)


def get_policy(name: str) -> PolicySpec:
    try:
        return POLICIES[name]
    except KeyError:
        raise UsageError(f"unknown policy {name!r}; choose one of {', '.join(POLICY_NAMES)}") from None


# numpy.polynomial's modules for each basis (numpy.polynomial.polynomial holds polyval, polyfit, ...).
POLYNOMIAL_SUBMODULES: frozenset[str] = frozenset(
    f"numpy.polynomial.{name}" for name in ("polynomial", "chebyshev", "legendre", "hermite", "hermite_e", "laguerre")
)


def module_allowed(name: str, allowed: frozenset[str] = ALLOWED_MODULES) -> bool:
    """A dotted module name is allowed when it is listed, or is one of numpy.polynomial's basis
    modules (not polyutils, which holds the warnings module, nor its tests)."""
    return name in allowed or name in POLYNOMIAL_SUBMODULES


__all__ = [
    "ALLOWED_MODULES",
    "DENIED_ATTRIBUTES",
    "DENIED_NAMES",
    "POLICIES",
    "POLICY_NAMES",
    "POLYNOMIAL_SUBMODULES",
    "STDLIB_MODULES",
    "WRITABLE_ATTRIBUTES",
    "WRITABLE_BASES",
    "WRITABLE_BASE_MODULES",
    "PolicySpec",
    "get_policy",
    "module_allowed",
]
