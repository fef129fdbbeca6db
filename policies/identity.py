"""Addresses in the warm tier: no value a warm program computes may depend on where an object lives.

A warm runner runs program after program in one process, so the addresses its allocator hands out
depend on what the programs before allocated: an object's address is a covert channel between programs
of one runner, and a verdict that depends on the runner's history (a fresh fork, whose fork server never
held a program, places objects the same way whatever ran before). CPython shows an address in two ways,
both in C: the text of an object whose repr is its identity (`<function f at 0x7f...>`, `<map object at
0x...>`, a bound builtin method) and the hash of an object hashed by identity (functions, iterators,
modules, exceptions; a NaN float is hashed by its address too), which orders the sets it is in. Text
cut out of a repr (`f'{f}'[-6:]`, `'%s' % f`, `repr(obj)[20:]`, an error message built with `%R`, numpy's
`astype(str)`) and the order of a set of functions all come from these two sources, whatever the route.

So the warm runner closes the sources themselves: `install()` (once, in the warm runner's process,
never in the worker or a fork) points the type slots that make that text and those hashes at callbacks.
While a warm program runs (`arm()` ... `disarm()`, which `pure_globals` and `end_program` call), the
callbacks report the program as unproven (`report`: the warm runner answers "needs a fork" and leaves,
and the fork decides), before any address reaches it; at any other time they call the slot's own
function, so the runner's machinery sees no change.

- repr (`tp_repr`, and `tp_str` where a type has its own): default deny. Every type but those of
  CONTENT_TEXT, whose text is made of their content only (numbers, strings, containers, numpy's arrays
  and scalars, exceptions, types, modules...), so a new type with an address in its text is covered
  before anyone reviews it. A container's text asks each item's repr, which is checked in turn.
- hash (`tp_hash`): every type hashed by identity (its slot is object's, a builtin method's or a bound
  method's), but types themselves (classes are hashed all the time by isinstance's caches, and a pure
  program cannot make one; left: a set of numpy's types, which the worker and the fork server import
  apart, may order differently in the two tiers, never between programs) and the interpreter's static
  singletons None, Ellipsis and NotImplemented (at one address in every process of a worker). And the
  numbers that can be NaN (float, complex, numpy's floating and complex scalars): their hash is their
  value's but a NaN's is its address, so these callbacks compute the hash, refuse a NaN, and refuse past
  NUMBER_HASH_BUDGET hashes in one program (the callback costs ~1 us where the slot costs ~0.1: a program
  that hashes many numbers goes to a fork, so that its CPU time, which decides a timeout, is a fork's).

The slots are found by their place in PyTypeObject (`_TP_*`), which is the same in CPython 3.8 to 3.13's
default builds; `install()` checks it on known types first and refuses (the warm tier is then closed:
`refusal()`) where it does not hold.
"""

from __future__ import annotations

import ctypes
import math
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any, Final

_WORD: Final = ctypes.sizeof(ctypes.c_void_p)
# Places of PyTypeObject's slots, in words (PyObject_VAR_HEAD: refcount, type, size; then tp_name,
# tp_basicsize, tp_itemsize, tp_dealloc, tp_vectorcall_offset, tp_getattr, tp_setattr, tp_as_async).
_TP_NAME, _TP_REPR, _TP_HASH, _TP_STR = 3, 11, 15, 17
# PYFUNCTYPE, not CFUNCTYPE: a CFUNCTYPE call releases the GIL around the C function, and a slot's own
# function (called from a callback) then runs with no thread state: CPython 3.12+ crashes at once (3.11
# only happened not to).
_ReprSlot = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.py_object)
_HashSlot = ctypes.PYFUNCTYPE(ctypes.c_ssize_t, ctypes.py_object)
NUMBER_HASH_BUDGET: Final = 10_000  # number hashes one warm program may make (see the docstring)
HIDDEN: Final = "<text that would show an address>"  # what a refused repr returns where nobody stops the program


def _each(names: str, reason: str) -> dict[str, str]:
    return dict.fromkeys(names.split(), reason)


# Types whose text is their content alone, with no address in it (each item of a container is checked
# by its own repr). Matched exactly, but for the families named in _CONTENT_FAMILIES.
CONTENT_TEXT: Final[dict[str, str]] = {
    **_each(
        "int bool float complex str bytes bytearray NoneType ellipsis NotImplementedType range slice",
        "a number, a string or a constant: its text is its value",
    ),
    **_each(
        "list tuple dict set frozenset dict_keys dict_values dict_items",
        "a container: its items' reprs, each checked",
    ),
    **_each(
        "fractions.Fraction decimal.Decimal collections.Counter collections.OrderedDict collections.defaultdict "
        "collections.deque",
        "a library value: its fields' reprs (defaultdict's factory's is checked)",
    ),
    "module": "a module's name and file (a pure module's proxy shows its module's)",
    "potrun.policies.pure._PureModule": "a pure module's proxy: its module's text",
    **_each(
        "numpy.ndarray numpy.ufunc numpy.dtype",
        "numpy's array (its items' reprs for object arrays), a ufunc's name, a dtype's name",
    ),
}
_CONTENT_FAMILY_REASONS: Final = {
    "type": "a class: `<class 'name'>`",
    "BaseException": "an exception: its class name and its arguments' reprs",
    "numpy.generic": "a numpy scalar: its value",
    "numpy.dtype": "a numpy dtype: its name",
}

_armed = False
_refused: str | None = None
_broken = False
_report: Callable[[str], object] | None = None
_number_hashes = 0
_installed: list[Any] = []  # the callbacks, kept alive as long as the slots point at them


def _qualified(kind: type) -> str:
    module = getattr(kind, "__module__", "builtins")
    return kind.__name__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def _all_types() -> Iterator[type]:
    """Every class this process has made ready: object's subclasses, recursively."""
    seen: set[int] = set()
    stack: list[type] = [object]
    while stack:
        kind = stack.pop()
        if id(kind) in seen:
            continue
        seen.add(id(kind))
        yield kind
        try:
            stack.extend(type.__subclasses__(kind))
        except TypeError:
            continue


def _slot(kind: type, index: int) -> ctypes.c_void_p:
    return ctypes.c_void_p.from_address(id(kind) + index * _WORD)


def refusal() -> str | None:
    """Why the slots cannot be guarded on this interpreter (the warm tier must then stay closed), or None."""
    if sys.implementation.name != "cpython" or hasattr(sys, "gettotalrefcount"):
        return f"{sys.implementation.name} (debug build: {hasattr(sys, 'gettotalrefcount')}): type slots not reviewed"
    if getattr(sys, "_is_gil_enabled", lambda: True)() is False:
        return "a free-threaded build: type slots not reviewed"
    for kind in (int, float, types.FunctionType):
        name = ctypes.c_char_p.from_address(id(kind) + _TP_NAME * _WORD).value
        if name != kind.__name__.encode():
            return f"PyTypeObject's layout is not the reviewed one ({kind.__name__}'s tp_name)"
    if _slot(int, _TP_HASH).value == _slot(object, _TP_HASH).value:
        return "PyTypeObject's layout is not the reviewed one (tp_hash)"
    return None


def _content_family(kind: type, families: tuple[type, ...]) -> bool:
    return issubclass(kind, families)


def _families() -> tuple[type, ...]:
    found: list[type] = [type, BaseException]
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        found += [numpy.generic, numpy.dtype]
    return tuple(found)


def install(report: Callable[[str], object]) -> None:
    """Point the slots at the callbacks (see the module docstring); once per process. `report(reason)`
    is called when an armed program asks for an address: the warm runner stops the program there."""
    global _report
    reason = refusal()
    if reason is not None:
        raise RuntimeError(reason)
    if _installed:
        _report = report
        return
    _report = report
    families = _families()
    repr_callbacks: dict[int, Any] = {}
    hash_callbacks: dict[int, Any] = {}
    object_str = _slot(object, _TP_STR).value
    identity_hashes = {
        _slot(kind, _TP_HASH).value
        for kind in (object, types.BuiltinMethodType, types.MethodType, types.MethodWrapperType)
    }
    numbers = _nan_numbers()
    singletons = {type(None), type(Ellipsis), type(NotImplemented)}
    for kind in list(_all_types()):
        if _qualified(kind) not in CONTENT_TEXT and not _content_family(kind, families):
            _patch(kind, _TP_REPR, repr_callbacks, _repr_callback)
            if _slot(kind, _TP_STR).value != object_str:
                _patch(kind, _TP_STR, repr_callbacks, _repr_callback)
        if issubclass(kind, type) or kind in singletons:
            continue
        if kind in numbers or issubclass(kind, tuple(numbers)):
            _patch(kind, _TP_HASH, hash_callbacks, _number_hash_callback)
        elif _slot(kind, _TP_HASH).value in identity_hashes:
            _patch(kind, _TP_HASH, hash_callbacks, _identity_hash_callback)
    _installed.extend([*repr_callbacks.values(), *hash_callbacks.values()])
    _watch_callback_failures()


def _watch_callback_failures() -> None:
    """A callback that could not run (a program at its recursion limit: the callback's own frame is one
    too many) hands C an undefined result, and CPython reports it as unraisable: the program is then
    refused, and the runner, which may hold a bad reference since, is replaced (`broken()`)."""
    previous = sys.unraisablehook

    def on_unraisable(unraisable: Any) -> None:
        global _broken, _refused
        _broken = True
        if _refused is None:
            _refused = "an address guard could not run"
        previous(unraisable)

    sys.unraisablehook = on_unraisable


def _nan_numbers() -> set[type]:
    kinds: set[type] = {float, complex}
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        kinds |= {kind for kind in _all_types() if issubclass(kind, (numpy.floating, numpy.complexfloating))}
    return kinds


def _patch(kind: type, index: int, made: dict[int, Any], make: Callable[[int, int], Any]) -> None:
    """Point one slot at the callback made for the function it holds (one callback per function:
    the types that share a function share it, and a class made later inherits it with its base's)."""
    slot = _slot(kind, index)
    original = slot.value
    if not original:
        return
    callback = made.get(original)
    if callback is None:
        callback = made[original] = make(original, index)
    slot.value = ctypes.cast(callback, ctypes.c_void_p).value


def _repr_callback(original: int, index: int) -> Any:
    call = _ReprSlot(original)
    what = "text" if index == _TP_REPR else "str"

    def text(value: object) -> object:
        global _armed, _refused
        if _armed:
            _armed, _refused = False, f"the {what} of a {type(value).__name__} may show an address"
            _refuse()
            return HIDDEN
        try:
            return call(value)
        except BaseException:  # (a callback cannot raise: the runner's own text of it, out of memory)
            return HIDDEN

    return _ReprSlot(text)


def _identity_hash_callback(original: int, index: int) -> Any:
    call = _HashSlot(original)

    def identity_hash(value: object) -> int:
        global _armed, _refused
        if _armed:
            _armed, _refused = False, f"the hash of a {type(value).__name__} is its address"
            _refuse()
            return 0
        return int(call(value))

    return _HashSlot(identity_hash)


def _number_hash_callback(original: int, index: int) -> Any:
    call = _HashSlot(original)

    def number_hash(value: Any) -> int:
        global _number_hashes, _armed, _refused
        if _armed:
            _number_hashes += 1
            if _number_hashes > NUMBER_HASH_BUDGET:
                _armed, _refused = False, f"more than {NUMBER_HASH_BUDGET} numbers hashed"
                _refuse()
                return 0
            if _is_nan(value):
                _armed, _refused = False, "the hash of a NaN is its address"
                _refuse()
                return 0
        return int(call(value))

    return _HashSlot(number_hash)


def _is_nan(value: Any) -> bool:
    try:
        number = complex(value)
    except Exception:
        return True  # a number that will not say what it is: refused, as a NaN would be
    return math.isnan(number.real) or math.isnan(number.imag)


def _refuse() -> None:
    """Report the refusal the callback has just noted in `_refused` (noted first, with no call, so that
    it holds even where the report fails: a program at its recursion limit), and disarmed (what the
    report does, write and exit, must not be refused in turn)."""
    if _report is not None and _refused is not None:
        try:
            _report(_refused)
        except BaseException:
            pass  # `refused()` still says it: the runner forks the program once it ends


def arm() -> None:
    """From here, an address asked for is the program's (see the module docstring)."""
    global _armed, _number_hashes, _refused
    _number_hashes = 0
    _refused = None
    _armed = bool(_installed)


def refused() -> str | None:
    """Why the program armed last asked for an address, or None."""
    return _refused


def broken() -> bool:
    """Whether a callback failed to run in this process (see `_watch_callback_failures`): the warm runner
    must be replaced."""
    return _broken


def disarm() -> None:
    global _armed
    _armed = False


def installed() -> bool:
    return bool(_installed)


__all__ = [
    "CONTENT_TEXT",
    "HIDDEN",
    "NUMBER_HASH_BUDGET",
    "arm",
    "broken",
    "disarm",
    "install",
    "installed",
    "refusal",
    "refused",
]
