"""The allowlist sweep (issue 35): a mechanical review of every member a restricted program may read.

For each member of `members.MEMBERS`, the Python code behind it is disassembled: a function's code and
the code nested in it; a class's methods, properties and class/static methods along its MRO (what its
instances offer: the attributes of what it returns); and, one level down, the library functions and the
methods of the library classes that code names as globals (bounded). The sweep flags code that reaches

- `frame`: frame access (`sys._getframe`, `inspect.currentframe`/`stack`, `f_back`, `f_globals`, `f_locals`);
- `eval`: `eval`, `exec` or `compile`;
- `setattr`: `setattr`/`delattr`, `__setattr__`/`__delattr__`;
- `__dict__`: an object's `__dict__` (read or written: the sweep does not tell which);
- `getattr`: `getattr`/`hasattr` whose name is not a string constant at the call;
- `globals`: `globals()` or `vars()` (a namespace looked up by a key built at run time).

Each flagged member must be reviewed (`members.REVIEWED_REACH`, with the reason its flags are safe as
used) or not be a member; a review whose flags no longer show is stale. Members with no Python code (in
C) cannot be disassembled: they are listed in tests/data/c_members.txt, reviewed with the reason
MEMBERS gives, and a new one fails the sweep until it is added there.
"""

from __future__ import annotations

import dis
import importlib
import types
from collections.abc import Iterator
from typing import Any

import pytest
from paths import TEST_DATA

from potrun.policies.members import MEMBERS, REVIEWED_REACH

C_MEMBERS_FILE = TEST_DATA / "c_members.txt"

FRAME_NAMES = frozenset(
    {"_getframe", "currentframe", "stack", "f_back", "f_globals", "f_locals", "_getframemodulename"}
)
EVALUATORS = frozenset({"eval", "exec", "compile"})
SETTERS = frozenset({"setattr", "delattr", "__setattr__", "__delattr__"})
LOADS = frozenset({"LOAD_ATTR", "LOAD_METHOD", "LOAD_GLOBAL", "LOAD_NAME", "IMPORT_FROM"})
CALLS = frozenset({"PRECALL", "CALL", "CALL_FUNCTION", "CALL_FUNCTION_KW", "CALL_KW"})
CODE_LIMIT = 400  # code objects looked at per member


def code_flags(code: types.CodeType) -> set[str]:
    """The flags of one code object's own instructions (not of the code nested in it)."""
    found: set[str] = set()
    instructions = list(dis.get_instructions(code))
    for index, instruction in enumerate(instructions):
        if instruction.opname not in LOADS:
            continue
        name, is_global = instruction.argval, instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME")
        if name in FRAME_NAMES:
            found.add("frame")
        if name in EVALUATORS and is_global:
            found.add("eval")
        if name in SETTERS:
            found.add("setattr")
        if name == "__dict__" and instruction.opname == "LOAD_ATTR":
            found.add("__dict__")
        if name in ("globals", "vars") and is_global:
            found.add("globals")
        if name in ("getattr", "hasattr") and is_global and not _constant_name(instructions, index):
            found.add("getattr")
    return found


def _constant_name(instructions: list[dis.Instruction], start: int) -> bool:
    """Does a string constant load come between getattr's load and its call (its name argument)?"""
    for instruction in instructions[start + 1 :]:
        if instruction.opname in CALLS:
            return False
        if instruction.opname == "LOAD_CONST" and isinstance(instruction.argval, str):
            return True
    return False


def _functions_of(obj: Any) -> Iterator[types.FunctionType]:
    """The Python functions behind a member: itself, or a class's methods along its MRO."""
    if isinstance(obj, types.FunctionType):
        yield obj
    elif isinstance(obj, type):
        for klass in obj.__mro__:
            if klass.__module__ == "builtins":
                continue
            for attribute in vars(klass).values():
                for candidate in (attribute, *(getattr(attribute, n, None) for n in ("__func__", "fget", "fset"))):
                    if isinstance(candidate, types.FunctionType):
                        yield candidate


def member_flags(obj: Any) -> set[str]:
    """Every flag of the code behind `obj`, its nested code, and one level of the library functions and
    classes it names as globals."""
    found: set[str] = set()
    seen: set[int] = set()
    pending: list[tuple[types.CodeType, dict[str, Any], int]] = [
        (function.__code__, function.__globals__, 1) for function in _functions_of(obj)
    ]
    while pending and len(seen) < CODE_LIMIT:
        code, namespace, depth = pending.pop()
        if id(code) in seen:
            continue
        seen.add(id(code))
        found |= code_flags(code)
        pending.extend((const, namespace, depth) for const in code.co_consts if isinstance(const, types.CodeType))
        if depth == 0:
            continue
        for name in code.co_names:
            callee = namespace.get(name)
            if isinstance(callee, (types.FunctionType, type)) and getattr(callee, "__module__", "") != "builtins":
                pending.extend((f.__code__, f.__globals__, depth - 1) for f in _functions_of(callee))
    return found


def _members() -> Iterator[tuple[str, Any]]:
    for module_name, members in MEMBERS.items():
        if module_name == "numpy.emath":  # an alias of numpy.lib.scimath
            continue
        module = importlib.import_module(module_name)
        for name in members:
            yield f"{module_name}.{name}", getattr(module, name)


@pytest.fixture(scope="module")
def sweep() -> tuple[dict[str, set[str]], set[str]]:
    """(flags of each flagged member, the members with no Python code)."""
    flagged: dict[str, set[str]] = {}
    in_c: set[str] = set()
    for qualified, obj in _members():
        if isinstance(obj, types.ModuleType):
            continue  # an allowed submodule: its own members are swept
        if not any(True for _ in _functions_of(obj)):
            in_c.add(qualified)
            continue
        flags = member_flags(obj)
        if flags:
            flagged[qualified] = flags
    return flagged, in_c


def test_every_flagged_member_is_reviewed(sweep: tuple[dict[str, set[str]], set[str]]) -> None:
    flagged, _ = sweep
    unreviewed = {member: sorted(flags) for member, flags in flagged.items() if member not in REVIEWED_REACH}
    assert not unreviewed, f"members whose code reaches frames, eval, setattr or names: review or refuse {unreviewed}"


def test_no_review_is_stale(sweep: tuple[dict[str, set[str]], set[str]]) -> None:
    flagged, _ = sweep
    stale = sorted(set(REVIEWED_REACH) - set(flagged))
    assert not stale, f"reviewed members the sweep no longer flags (remove their review): {stale}"


def test_every_member_in_c_is_listed(sweep: tuple[dict[str, set[str]], set[str]]) -> None:
    _, in_c = sweep
    listed = {line.strip() for line in C_MEMBERS_FILE.read_text().splitlines() if line.strip() and line[0] != "#"}
    assert not in_c - listed, f"new members in C, not disassembled: review and list them: {sorted(in_c - listed)}"
    assert not listed - in_c, f"listed C members that are gone or now Python: {sorted(listed - in_c)}"


@pytest.mark.parametrize(
    ("source", "flag"),
    [
        ("def f(o, n):\n    return getattr(o, n)\n", "getattr"),
        ("def f(o):\n    return getattr(o, 'x')\n", None),
        ("import sys\ndef f():\n    return sys._getframe(1).f_globals\n", "frame"),
        ("def f(t):\n    return eval(t)\n", "eval"),
        ("def f(o, n, v):\n    setattr(o, n, v)\n", "setattr"),
        ("def f(o, d):\n    o.__dict__.update(d)\n", "__dict__"),
        ("def f(k):\n    return globals()[k]\n", "globals"),
        ("def f(o, v):\n    object.__setattr__(o, 'x', v)\n", "setattr"),
    ],
)
def test_the_sweep_sees_each_kind_of_reach(source: str, flag: str | None) -> None:
    """The detector itself, on code written to have (or not have) each flag."""
    namespace: dict[str, Any] = {}
    exec(compile(source, "<sweep-probe>", "exec"), namespace)
    flags = member_flags(namespace["f"])
    assert flags == ({flag} if flag else set())
