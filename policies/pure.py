"""STUB (replaced by the verifier's real module at merge): admits only arithmetic on names and literals."""

from __future__ import annotations

import builtins
import dis
import types
from collections.abc import Mapping
from typing import Any

_OPS = {dis.opmap[name] for name in (
    "CACHE", "NOP", "POP_TOP", "RESUME", "LOAD_CONST", "LOAD_NAME", "STORE_NAME", "BINARY_OP", "RETURN_VALUE",
    "PUSH_NULL", "PRECALL", "CALL", "LOAD_FAST", "STORE_FAST", "LOAD_GLOBAL", "MAKE_FUNCTION", "UNARY_NEGATIVE",
    "COMPARE_OP", "POP_JUMP_FORWARD_IF_FALSE", "JUMP_FORWARD", "BUILD_LIST", "BUILD_TUPLE", "BINARY_SUBSCR",
) if name in dis.opmap}
PURE_BUILTINS: Mapping[str, object] = types.MappingProxyType(
    {name: getattr(builtins, name) for name in ("abs", "round", "int", "float", "min", "max", "sum", "len", "print")})


def why_not_pure(code: types.CodeType) -> str | None:
    for op in set(code.co_code[::2]):
        if op not in _OPS:
            return f"opcode {dis.opname[op]}"
    for name in code.co_names + code.co_varnames:
        if name.startswith("_"):
            return f"name {name!r}"
        if name in vars(builtins) and name not in PURE_BUILTINS:  # a fork would find it: same verdict
            return f"builtin {name!r}"
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            why = why_not_pure(const)
            if why:
                return why
    return None


def pure_globals() -> dict[str, Any]:
    return {"__builtins__": PURE_BUILTINS, "__name__": "__main__"}
