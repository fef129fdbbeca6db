"""Which programs may share a warm runner: a default-deny verifier of compiled code, and what an admitted
program gets to run with.

A warm runner runs many programs one after another with nothing reset between them, so it may only run
programs that are proven, before they run, unable to reach anything that outlives them: module state,
library containers and caches, the builtins dict, the runner's own modules and functions, RNGs, decimal
contexts, numpy's error and print state, ABC registries, the codec registry, threads, processes.
Everything not proven goes to the fork tier; a refusal costs speed, never safety. The verdict does not
depend on the policy: an admitted program does nothing the restricted policy forbids (its modules,
builtins and attribute names are within that policy's; tests/policies/test_pure.py checks it).

`why_not_pure(code)` proves it on the compiled code object (not the AST: an AST walk costs more than the
program itself), recursing into the code objects among its constants, with C-level operations on the
bytecode (about a microsecond for a GSM8K program: docs/performance.md); a Python walk over the
instructions only for code objects with EXTENDED_ARG, an import or the name `str`. It returns None when
it proves the program pure, else a short reason. A program is pure when every code object in it

- runs on a CPython release whose opcodes were reviewed, REVIEWED_VERSIONS (3.11 and 3.13; on any
  other, nothing is proven and `warm_tier_refusal()` says so);
- uses only the opcodes of ALLOWED_OPCODES, that release's table: no classes, no attribute writes or
  deletes, no `with`, no async, no `match`, no `except*`, no star import, no annotations at module
  level; from 3.12 on, CALL_INTRINSIC_1 only with an argument of ALLOWED_INTRINSICS;
- is, if it is a generator, free of `try` blocks: closing a suspended generator runs its `except` and
  `finally` code, which could then run later, inside another program's time and output;
- names (LOAD_NAME, LOAD_GLOBAL, STORE_NAME, ...) nothing that starts with "__" (`__builtins__`,
  `__import__`, dunders) and no builtin outside PURE_BUILTIN_REASONS (`open`, `eval`, `getattr`, `type`,
  `id`, `repr`, ... are refused, with their reasons in REFUSED_BUILTINS); no name that starts with
  "_" but `_` itself, variables and locals alike (the restricted policy refuses them: the verdict must
  not depend on the tier); `str` only as the callee of a one-argument call `str(value)` (str(data,
  encoding) looks a codec up by a name the program chooses, and the codec registry caches every name
  it is asked, found or not: a program could park memory there);
- reads attributes (LOAD_ATTR in either form, LOAD_METHOD, IMPORT_FROM) only by the names of PURE_ATTRIBUTES or of a
  member of a pure module: never a frame, code, `base`/`data`/`ctypes`/`flags`/`dtype`, `format`,
  `encode`/`decode`, nor any name starting with "_";
- imports (IMPORT_NAME) only a module of PURE_MODULES, absolutely (level 0).

The proof rests on one invariant: a pure program holds only objects it made, fresh or immutable results
of pure functions, immutable shared objects (numbers, strs, functions and classes that it cannot write
since it has no attribute write) and read-only module proxies. Item writes (STORE_SUBSCR) are allowed
because no shared mutable container is reachable: module proxies expose no mutable constant, no allowed
attribute of a shared object is one, and no pure function returns one.

`pure_globals()` is the namespace an admitted program runs in: `__builtins__` is PURE_BUILTINS, one
shared dict made at import. A pure program cannot write it, since it cannot name it and reaches no
frame or function globals; it stays a real dict because CPython looks `__import__` up in a frame's
builtins with a dict-only call. Its `__import__` hands out a read-only proxy of the module (a
`types.ModuleType` subclass holding the pure members only, refusing attribute writes, without
`__name__`, so that IMPORT_FROM's fallback to `sys.modules` finds nothing). Proxies are safe as values
(`f(np)`, `x = math`). A name a proxy lacks but the real module has (a member the review left out, or
one a new library version added) raises `Unproven` and `unproven()` reports it: the runner must then run
the program again in the fork tier, where the real module decides; nothing shared was touched.

How a warm runner uses this, per program: `code = compile(...)`; if `why_not_pure(code)` is None,
`namespace = pure_globals()`; `exec_pure(code, namespace)`; read the answer; drop any exception it raised;
`end_program(namespace)`; if `unproven()`, run it in the fork tier instead; else report. Once, before
the first program: `prepare_proxies()` (imports the pure modules outside any program's limits).

What stays in a warm runner between pure programs, and why it does not change a later program's value:
interned strings and the small-int cache (immutable); ABC caches that `isinstance(x, Fraction)` fills,
numpy's and CPython's internal caches
(keyed by types or dtypes, bounded, semantically invisible); memory: `end_program` frees the namespace
and collects its cycles before the result is reported (a crash while freeing is then the program's own),
but allocator fragmentation may remain, so a warm `MemoryError` or memory-limit verdict should be retried
in a fork; the recursion depth (back to the runner's when the program returns); a suspended generator
(freed with the namespace, running no program code, by the generator rule); library warnings "shown
once" whose registry is a library module's (`np.mean([])`): a later program's stderr can miss one,
never a status or value. A program can swallow any exception with a bare `except:` or a `finally` that
`continue`s, so a warm runner's limits must kill, not raise; and a program that reaches what its proof
did not cover is stopped there (`on_unproven`: the warm runner answers "needs a fork" and leaves), so
that nothing it does after swallowing `Unproven` (loop, flood its output) decides its verdict.
Addresses: the text of a function, an iterator, a bound method or a module shows an address (or, for a
proxy, would show the proxy), and the hash of a function, a module, an exception or a NaN is one, which
orders the sets they are in; an address depends on the allocator's history, so it may differ between a
warm runner and a fresh fork. A warm runner calls `guard_addresses()` once: from then on the type slots
that make such text and hashes report the program unproven the moment it asks for one, whatever the
route (f-strings and `%`, `format`, error messages, numpy's `astype('U')`, set order, a sort's ties):
`identity` says how. `str` and `print` of PURE_BUILTINS also take only values whose text is their
content, and the runner sends to the fork any warm result that still shows one; a proxy's repr is its
module's. `id`, `hash`, `repr`, `ascii` are refused by the verifier.
Uninitialised memory (`np.empty`) is not reachable. The answer may be a lazy object (`ans = map(f, xs)`):
the runner must not iterate it outside the program's limits.
"""

from __future__ import annotations

import builtins
import contextvars
import dis
import gc
import importlib
import sys
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import compress
from typing import Any, Final

from potrun.policies import identity
from potrun.policies.pure_opcodes import (
    _ALLOWED_OPCODES_311,
    _ALLOWED_OPCODES_313,
    _REFUSED_OPCODES_311,
    _REFUSED_OPCODES_313,
    ALLOWED_INTRINSICS,
)
from potrun.policies.pure_reach import PURE_ATTRIBUTES, PURE_BUILTIN_REASONS, PURE_MODULES, REFUSED_BUILTINS

# The opcode tables (pure_opcodes.py), by release.
_OPCODE_REVIEWS: Final[dict[tuple[int, int], tuple[dict[str, str], dict[str, str]]]] = {
    (3, 11): (_ALLOWED_OPCODES_311, _REFUSED_OPCODES_311),
    (3, 13): (_ALLOWED_OPCODES_313, _REFUSED_OPCODES_313),
}
REVIEWED_VERSIONS: Final = tuple(_OPCODE_REVIEWS)
_VERSION: Final = sys.version_info[:2]
_REVIEWED: Final = sys.implementation.name == "cpython" and _VERSION in _OPCODE_REVIEWS
# This interpreter's tables (empty where it is not reviewed: nothing is proven).
ALLOWED_OPCODES, REFUSED_OPCODES = _OPCODE_REVIEWS[_VERSION] if _REVIEWED else ({}, {})


def warm_tier_refusal() -> str | None:
    """Why this interpreter has no warm tier (every program forks), or None: it has one."""
    if _REVIEWED:
        return identity.refusal()
    reviewed = ", ".join(f"{major}.{minor}" for major, minor in REVIEWED_VERSIONS)
    return (
        f"{sys.implementation.name} {_VERSION[0]}.{_VERSION[1]}: its bytecode is not reviewed (reviewed: "
        f"CPython {reviewed}), so no program is proven pure and every program forks"
    )


# ----------------------------------------------------------------------------------------- verifier
# Opcode numbers of this interpreter; -1 for a name it lacks (PRECALL from 3.12 on), and pseudo-instructions
# (numbered past 255, never in co_code) are left out: the tables name opcodes of several releases.
_OPCODE_NUMBERS: Final = {name: number for name, number in dis.opmap.items() if number < 256}


def _opcode(name: str) -> int:
    return _OPCODE_NUMBERS.get(name, -1)


_ALLOWED_OPS: Final = bytes(_OPCODE_NUMBERS[name] for name in ALLOWED_OPCODES if name in _OPCODE_NUMBERS)
_EXTENDED_ARG: Final = _opcode("EXTENDED_ARG")
_IMPORT_NAME: Final = _opcode("IMPORT_NAME")
_LOAD_CONST: Final = _opcode("LOAD_CONST")
_STORE_DEREF: Final = _opcode("STORE_DEREF")
_DELETE_DEREF: Final = _opcode("DELETE_DEREF")
_LOAD_NAME: Final = _opcode("LOAD_NAME")
_LOAD_GLOBAL: Final = _opcode("LOAD_GLOBAL")
_LOAD_ATTR: Final = _opcode("LOAD_ATTR")
_PUSH_NULL: Final = _opcode("PUSH_NULL")
_PUSH_EXC_INFO: Final = _opcode("PUSH_EXC_INFO")
_CALL_INTRINSIC_1: Final = _opcode("CALL_INTRINSIC_1")
# Where a release's bytecode differs in what the verifier reads (the 3.13 table's comment says how):
_SINCE_312: Final = _VERSION >= (3, 12)
_CALLS_END_WITH: Final = _opcode("CALL" if _SINCE_312 else "PRECALL")  # `str(value)`: the instruction, arg 1
_NULL_AFTER_CALLEE: Final = _VERSION >= (3, 13)  # LOAD_NAME f, PUSH_NULL (3.11: PUSH_NULL, LOAD_NAME f)
_PLAIN_LOADS: Final = frozenset(
    _opcode(name) for name in ("LOAD_NAME", "LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_CONST", "LOAD_DEREF")
) - {-1}
# Instructions whose argument names an attribute, and by how many bits the name's index is shifted in it
# (LOAD_ATTR's low bit is the method flag from 3.12 on).
_ATTRIBUTE_SHIFTS: Final = {
    _opcode(name): shift
    for name, shift in (("LOAD_ATTR", 1 if _SINCE_312 else 0), ("LOAD_METHOD", 0), ("IMPORT_FROM", 0))
    if _opcode(name) != -1
}
_ATTRIBUTE_OPS: Final = frozenset(_ATTRIBUTE_SHIFTS)
# bytes.translate tables: 1 for an instruction whose argument names an attribute directly, 0 for any
# other; and one for those whose argument is the index shifted by one (None where there is none).
_ATTRIBUTE_MASK: Final = bytes(1 if _ATTRIBUTE_SHIFTS.get(number) == 0 else 0 for number in range(256))
_SHIFTED_ATTRIBUTE_MASK: Final = (
    bytes(1 if _ATTRIBUTE_SHIFTS.get(number) == 1 else 0 for number in range(256))
    if 1 in _ATTRIBUTE_SHIFTS.values()
    else None
)
_INTRINSIC_MASK: Final = bytes(1 if number == _CALL_INTRINSIC_1 else 0 for number in range(256))
_ASYNC_FLAGS: Final = 0x80 | 0x100 | 0x200  # CO_COROUTINE, CO_ITERABLE_COROUTINE, CO_ASYNC_GENERATOR
_GENERATOR_FLAG: Final = 0x20

ALLOWED_ATTRIBUTE_NAMES: Final[frozenset[str]] = frozenset(PURE_ATTRIBUTES).union(
    *(members for members in PURE_MODULES.values())
)
# Names a pure program may not use as a variable: every builtin it does not get, whatever it holds
# (shadowing one, `id = 3`, is refused too: a refusal only costs speed).
_REFUSED_NAMES: Final[frozenset[str]] = frozenset(
    name for name in (*vars(builtins), *REFUSED_BUILTINS) if name not in PURE_BUILTIN_REASONS
)
_IS_CODE: Final = types.CodeType.__instancecheck__
# Where addresses cannot be kept from programs (`identity.refusal`), nothing is proven.
_UNGUARDED: Final = identity.refusal()


def why_not_pure(code: types.CodeType) -> str | None:
    """None when the program is proven pure (see the module docstring), else a short reason:
    "opcode LOAD_BUILD_CLASS", "attribute 'gi_frame'", "import of 'random'", "name '__builtins__'",
    "try block in generator 'g'", "relative import", "python 3.12 not reviewed". No side effects."""
    if not _REVIEWED:
        return f"python {sys.version_info[0]}.{sys.version_info[1]} not reviewed"
    if _UNGUARDED is not None:
        return _UNGUARDED
    stack = [code]
    while stack:
        current = stack.pop()
        reason = _why_not_pure_one(current)
        if reason is not None:
            return reason
        stack.extend(filter(_IS_CODE, current.co_consts))
    return None


def why_not_pure_program(source: str, code: types.CodeType) -> str | None:
    """`why_not_pure` of the program's code, and what its bytecode cannot show: a `nonlocal`
    declaration that no store follows leaves no instruction, and the restricted policy refuses it (the
    word anywhere in the source sends the program to the fork tier: a refusal only costs speed)."""
    if "nonlocal" in source:
        return "nonlocal"
    return why_not_pure(code)


def _why_not_pure_one(code: types.CodeType) -> str | None:
    """The checks of one code object, nested ones aside. C-level operations on the bytecode: opcodes are
    the even bytes, arguments the odd ones, so set and translate operations replace a Python loop."""
    raw = code.co_code
    ops = raw[::2]
    refused = ops.translate(None, _ALLOWED_OPS)
    if refused:
        return f"opcode {dis.opname[refused[0]]}"
    flags = code.co_flags
    if flags & _ASYNC_FLAGS:
        return "async code"
    if code.co_freevars and (_STORE_DEREF in ops or _DELETE_DEREF in ops):
        return "nonlocal"  # the restricted policy refuses `nonlocal`: so does the warm tier
    if flags & _GENERATOR_FLAG and (_PUSH_EXC_INFO in ops if _SINCE_312 else code.co_exceptiontable):
        return f"try block in generator {code.co_name!r}"
    if _SINCE_312 and _CALL_INTRINSIC_1 in ops:
        refused_intrinsic = _refused_intrinsic(raw, ops.translate(_INTRINSIC_MASK))
        if refused_intrinsic is not None:
            return refused_intrinsic
    local = _private_name(code.co_varnames + code.co_cellvars + code.co_freevars)
    if local is not None:
        return f"name {local!r}"
    names = code.co_names
    if not names:
        return None
    if not _REFUSED_NAMES.isdisjoint(names) or "\0__" in "\0" + "\0".join(names):
        return f"name {_first_refused_name(names)!r}"
    if _EXTENDED_ARG in ops or _IMPORT_NAME in ops or "str" in names:
        reason = _why_not_pure_slowly(code)
        if reason is not None:
            return reason
    else:
        mask = ops.translate(_ATTRIBUTE_MASK)
        if 1 in mask:
            used = set(map(names.__getitem__, set(compress(raw[1::2], mask))))
            if not used.issubset(ALLOWED_ATTRIBUTE_NAMES):
                return f"attribute {min(used - ALLOWED_ATTRIBUTE_NAMES)!r}"
        if _SHIFTED_ATTRIBUTE_MASK is not None:
            mask = ops.translate(_SHIFTED_ATTRIBUTE_MASK)
            if 1 in mask:
                used = {names[arg >> 1] for arg in set(compress(raw[1::2], mask))}
                if not used.issubset(ALLOWED_ATTRIBUTE_NAMES):
                    return f"attribute {min(used - ALLOWED_ATTRIBUTE_NAMES)!r}"
    private = _private_name(names)  # attributes never start with "_": a global or module variable
    return None if private is None else f"name {private!r}"


def _refused_intrinsic(raw: bytes, mask: bytes) -> str | None:
    """CALL_INTRINSIC_1's argument picks a C function: only those of ALLOWED_INTRINSICS pass. (An
    EXTENDED_ARG prefix would widen an argument beyond the byte read here: the per-instruction walk,
    which every code object with one takes, checks the whole argument.)"""
    refused = set(compress(raw[1::2], mask)) - ALLOWED_INTRINSICS.keys()
    return None if not refused else f"intrinsic {_intrinsic_name(min(refused))}"


def _intrinsic_name(number: int) -> str:
    names: list[str] = getattr(dis, "_intrinsic_1_descs", [])
    return names[number] if number < len(names) else str(number)


def _private_name(names: tuple[str, ...]) -> str | None:
    """A name starting with "_" other than `_` itself: the restricted policy refuses those (RestrictedPython
    rejects them at compile time), so a warm program may not use one either, or its verdict would
    depend on its tier."""
    if "\0_" not in "\0" + "\0".join(names):
        return None
    return next((name for name in names if name[:1] == "_" and name != "_"), None)


def _first_refused_name(names: Iterable[str]) -> str:
    return next(name for name in names if name in _REFUSED_NAMES or name.startswith("__"))


def _why_not_pure_slowly(code: types.CodeType) -> str | None:
    """The per-instruction walk, for code with wide arguments (over 256 names or constants, long jumps),
    imports or `str`: full arguments (EXTENDED_ARG prefixes shift the next one); for each IMPORT_NAME the
    two LOAD_CONSTs before it (its level and from-list); each load of `str` must be a call with one
    argument that is a plain load, maybe with attribute reads (`str(n)`, `str(x.real)`)."""
    raw, names, consts = code.co_code, code.co_names, code.co_consts
    extended = 0
    previous: list[tuple[int, int]] = [(-1, 0), (-1, 0)]
    str_call = _STR_DONE
    for offset in range(0, len(raw), 2):
        op, arg = raw[offset], raw[offset + 1] | extended
        if op == _EXTENDED_ARG:
            extended = arg << 8
            continue
        extended = 0
        if not op:  # CACHE entries are not instructions
            continue
        if str_call is not _STR_DONE:
            following = str_call(op, arg)
            if following is None:
                return "name 'str' other than in str(value)"
            str_call = following
        if op in _ATTRIBUTE_OPS and names[arg >> _ATTRIBUTE_SHIFTS[op]] not in ALLOWED_ATTRIBUTE_NAMES:
            return f"attribute {names[arg >> _ATTRIBUTE_SHIFTS[op]]!r}"
        if op == _CALL_INTRINSIC_1 and arg not in ALLOWED_INTRINSICS:
            return f"intrinsic {_intrinsic_name(arg)}"
        if op == _IMPORT_NAME:
            reason = _why_not_pure_import(names[arg], previous, consts)
            if reason is not None:
                return reason
        if (op == _LOAD_NAME and names[arg] == "str") or (op == _LOAD_GLOBAL and names[arg >> 1] == "str"):
            # A callee: LOAD_NAME beside PUSH_NULL (after it up to 3.12, before it from 3.13 on), or
            # LOAD_GLOBAL pushing the NULL itself.
            if op == _LOAD_GLOBAL:
                if not arg & 1:
                    return "name 'str' other than in str(value)"
                str_call = _str_argument
            elif _NULL_AFTER_CALLEE:
                str_call = _str_null
            elif previous[1][0] == _PUSH_NULL:
                str_call = _str_argument
            else:
                return "name 'str' other than in str(value)"
        previous = [previous[1], (op, arg)]
    return None if str_call is _STR_DONE else "name 'str' other than in str(value)"


# The states of the check of one `str` load: each takes the next instruction and returns the next state,
# or None when the instruction does not fit `str(value)`.
StrState = Callable[[int, int], "StrState | None"]


def _str_done(op: int, arg: int) -> StrState | None:
    return _str_done


def _str_null(op: int, arg: int) -> StrState | None:
    """From 3.13 on, the NULL slot after a callee that LOAD_NAME pushed."""
    return _str_argument if op == _PUSH_NULL else None


def _str_argument(op: int, arg: int) -> StrState | None:
    """The argument: one plain load (a LOAD_GLOBAL that also pushes NULL would be a callee)."""
    if op in _PLAIN_LOADS or (op == _LOAD_GLOBAL and not arg & 1):
        return _str_attributes_or_call
    return None


def _str_attributes_or_call(op: int, arg: int) -> StrState | None:
    if op == _LOAD_ATTR and not (_SINCE_312 and arg & 1):  # a plain attribute, not a method's load
        return _str_attributes_or_call
    return _STR_DONE if op == _CALLS_END_WITH and arg == 1 else None


_STR_DONE: Final[StrState] = _str_done


def _why_not_pure_import(name: str, previous: list[tuple[int, int]], consts: tuple[Any, ...]) -> str | None:
    (level_op, level_arg), (fromlist_op, fromlist_arg) = previous
    if level_op != _LOAD_CONST or fromlist_op != _LOAD_CONST:
        return "import of an unusual form"
    level, fromlist = consts[level_arg], consts[fromlist_arg]
    if type(level) is not int or level != 0:
        return "relative import"
    if name not in PURE_MODULES:
        return f"import of {name!r}"
    if fromlist is not None and (type(fromlist) is not tuple or "*" in fromlist):
        return "star import"
    return None


# ------------------------------------------------------------------------------------------ runtime
class _PureModule(types.ModuleType):
    """A read-only view of a module's pure members, safe to hold and pass around as a value. It has no
    `__name__` (IMPORT_FROM would look a failed name up in sys.modules under it), and a missing member
    raises the AttributeError the real module would, without the module in it."""

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("a pure module is read-only")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("a pure module is read-only")

    def __repr__(self) -> str:
        """The real module's: a program's text must not depend on its tier (the fork's is the module)."""
        return repr(sys.modules[self.__getattr__("")])


_PROXIES: dict[str, _PureModule] = {}


def prepare_proxies() -> None:
    """Import every pure module and make its proxy now, so that a program's first `import numpy` costs
    nothing in its own limits. A warm runner calls it once before its first program."""
    for name in PURE_MODULES:
        _proxy(name)


def _proxy(name: str) -> _PureModule:
    """The proxy of a pure module, made (and the module imported) on first use."""
    proxy = _PROXIES.get(name)
    if proxy is None:
        proxy = _PROXIES[name] = _make_proxy(name)
    return proxy


def _make_proxy(name: str) -> _PureModule:
    real = importlib.import_module(name)
    members: dict[str, object] = {}
    for member in PURE_MODULES[name]:
        submodule = f"{name}.{member}"
        if submodule in PURE_MODULES:
            members[member] = _proxy(submodule)
        elif hasattr(real, member):
            value = getattr(real, member)
            if isinstance(value, types.ModuleType):  # a reviewer's slip must not hand out a real module
                raise TypeError(f"{submodule} is a module: list it in PURE_MODULES")
            members[member] = value
    proxy = _PureModule("")
    namespace = types.ModuleType.__getattribute__(proxy, "__dict__")
    namespace.clear()
    namespace.update(members)
    namespace["__getattr__"] = _missing_member(name, real)
    return proxy


def _missing_member(module_name: str, real: types.ModuleType) -> Any:
    """The proxy's lookup of a name it does not hold. A name the real module has either (a member the
    review left out, or one a new library version added) makes the program unproven: the fork tier,
    where it would be found, must decide. Any other name fails as it would on the real module."""

    def __getattr__(attribute: str) -> object:
        if attribute == "":  # the proxy's repr asks for its module's name this way
            return module_name
        if attribute in vars(real) or attribute in _listed_names(real):
            raise _unproven_now(f"{module_name}.{attribute} is not a pure member")
        raise AttributeError(f"module {module_name!r} has no attribute {attribute!r}")

    return __getattr__


def _listed_names(module: types.ModuleType) -> list[str]:
    """The names a module lists, including those it makes on first use (numpy's lazy submodules)."""
    try:
        return dir(module)
    except Exception:
        return []


class Unproven(BaseException):
    """A warm program reached, at run time, something the verifier had not ruled out; it is stopped
    before touching it. The program's result is void: `unproven()` says why, and the runner must run it
    again in the fork tier. A BaseException, so that `except Exception` lets it through; a bare `except:`
    may swallow it, which changes nothing, since `unproven()` still reports it."""


_UNPROVEN: list[str] = []  # why the current program is unproven; cleared by pure_globals()
_ON_UNPROVEN: list[Callable[[str], None]] = []  # what a warm runner does the moment it happens


def on_unproven(callback: Callable[[str], None]) -> None:
    """Call `callback(reason)` the moment a program becomes unproven, before `Unproven` is raised: a
    warm runner stops the program there (the fork decides it), since a program may swallow the
    exception and go on to loop or flood its output, which would decide its verdict in this tier."""
    _ON_UNPROVEN[:] = [callback]


def _unproven_now(reason: str) -> Unproven:
    _UNPROVEN.append(reason)
    for callback in _ON_UNPROVEN:
        callback(reason)
    return Unproven(reason)


def unproven() -> str | None:
    """Why the program run in the latest `pure_globals()` must be run again in the fork tier (it
    reached a module member its proxy does not hold), or None: its result stands."""
    return _UNPROVEN[0] if _UNPROVEN else identity.refused()


# Modules a library's C code imports lazily by name in the middle of a pure call (ndarray.sum imports
# numpy._core._methods): CPython routes such an import through the __import__ of the program's frame.
# The module goes to the library, never to the program.
_LIBRARY_IMPORT_ROOTS: Final = frozenset({"numpy"})


def _pure_import(
    name: str,
    globals: Mapping[str, object] | None = None,
    locals: Mapping[str, object] | None = None,
    fromlist: Sequence[str] | None = (),
    level: int = 0,
) -> object:
    """`__import__` of PURE_BUILTINS: the program's import statement gets the proxy of a pure module
    (the package's for `import numpy.linalg`, the leaf's for a from-import); a library's own lazy import
    from C gets the real module it asked for, if it is one of the libraries pure programs use."""
    caller = sys._getframe(1)
    if caller.f_code.co_code[caller.f_lasti] != _IMPORT_NAME:
        if name.partition(".")[0] not in _LIBRARY_IMPORT_ROOTS or level != 0:
            raise ImportError(f"import of {name!r} is not allowed")
        return __import__(name, None, None, fromlist or (), 0)
    if level != 0 or name not in PURE_MODULES or (fromlist is not None and "*" in fromlist):
        raise ImportError(f"import of {name!r} is not allowed")
    return _proxy(name if fromlist else name.partition(".")[0])


# Text made of a value must not depend on addresses, which depend on the runner's history: `str()` and
# `print` of a function, an iterator, a bound method or a module show one (`<function f at 0x...>`),
# and the same program in a fresh fork shows another. Those take the values whose text is their
# content only; anything else makes the program unproven, and the fork decides it.
_PLAIN_TEXT_TYPES: Final = frozenset({int, float, complex, bool, type(None), str, bytes, range, slice})
_PLAIN_TEXT_BUDGET: Final = 10_000  # items looked at in one value, containers included


def _check_plain_text(value: object) -> None:
    """Raise Unproven unless `value`'s text is its content alone (numbers, strings, numeric arrays,
    and containers of them)."""
    budget = [_PLAIN_TEXT_BUDGET]
    if not _plain_text(value, budget):
        raise _unproven_now(f"the text of a {type(value).__name__} may show an address")


def _plain_text(value: object, budget: list[int]) -> bool:
    budget[0] -= 1
    if budget[0] < 0:
        return False
    kind = type(value)
    if kind in _PLAIN_TEXT_TYPES:
        return True
    if kind is list or kind is tuple or kind is set or kind is frozenset:
        return all(_plain_text(item, budget) for item in value)  # type: ignore[attr-defined]
    if kind is dict:
        return all(_plain_text(k, budget) and _plain_text(v, budget) for k, v in value.items())  # type: ignore[attr-defined]
    module = getattr(kind, "__module__", "")
    if module in ("fractions", "decimal") and kind.__name__ in ("Fraction", "Decimal"):
        return True
    numpy = sys.modules.get("numpy")
    if numpy is not None and (kind is numpy.ndarray or isinstance(value, numpy.generic)) and module == "numpy":
        return value.dtype.kind in "biufcUSmM"  # type: ignore[attr-defined]
    return False


def _pure_str(value: object = "") -> str:
    """`str` of PURE_BUILTINS (the verifier admits it only as `str(value)`)."""
    _check_plain_text(value)
    return str(value)


def _pure_print(*values: object, **options: Any) -> None:
    """`print` of PURE_BUILTINS."""
    for value in values:
        _check_plain_text(value)
    print(*values, **options)


def _make_builtins() -> dict[str, object]:
    table: dict[str, object] = {name: getattr(builtins, name) for name in PURE_BUILTIN_REASONS}
    table["__import__"] = _pure_import
    table["str"] = _pure_str
    table["print"] = _pure_print
    return table


PURE_BUILTINS: Final[Mapping[str, object]] = _make_builtins()


def guard_addresses() -> None:
    """In a warm runner's process, once: from now on, a program between `pure_globals()` and
    `end_program()` that asks for an address (an identity repr or hash, a NaN's hash) is unproven on
    the spot (`identity`)."""
    identity.install(_unproven_now)


def pure_globals() -> dict[str, object]:
    """A fresh module namespace for one program that why_not_pure admitted; it also starts that
    program's `unproven()` record afresh, and arms the address guard (`guard_addresses`)."""
    _UNPROVEN.clear()
    identity.arm()
    return {"__builtins__": PURE_BUILTINS, "__name__": "__main__"}


def exec_pure(code: types.CodeType, namespace: dict[str, object]) -> None:
    """exec(code, namespace) in a copy of the runner's context. numpy's error state and print options
    and decimal's context are context variables: a library call that sets one and fails to restore it
    (a MemoryError inside `np.errstate.__exit__`, deep in np.linalg.inv) then leaves it in that copy,
    which dies with the program, never in the runner. Costs a fraction of a microsecond."""
    contextvars.copy_context().run(exec, code, namespace)


def end_program(namespace: dict[str, object]) -> None:
    """Free everything the program made, now: its namespace, then the garbage cycles among its objects
    (a function and its globals form one). Call it before reporting the program's result and after
    dropping any exception it raised (its traceback holds the program's frames): CPython frees some deep
    chains recursively (10**6 nested `enumerate` objects overflow the C stack), so a crash while freeing
    must be this program's own, and nothing of it may be left for a collection inside a later program.
    What survives is the runner's (and the modules a program's import loaded): `gc.freeze()` moves it out
    of later collections, which then cost about a microsecond instead of milliseconds once numpy is
    loaded."""
    identity.disarm()
    namespace.clear()
    gc.collect()
    gc.freeze()


__all__ = [
    "ALLOWED_ATTRIBUTE_NAMES",
    "ALLOWED_INTRINSICS",
    "ALLOWED_OPCODES",
    "PURE_ATTRIBUTES",
    "PURE_BUILTINS",
    "PURE_BUILTIN_REASONS",
    "PURE_MODULES",
    "REFUSED_BUILTINS",
    "REFUSED_OPCODES",
    "REVIEWED_VERSIONS",
    "Unproven",
    "end_program",
    "exec_pure",
    "guard_addresses",
    "on_unproven",
    "prepare_proxies",
    "pure_globals",
    "unproven",
    "warm_tier_refusal",
    "why_not_pure",
    "why_not_pure_program",
]
