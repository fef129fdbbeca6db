"""The warm tier's review of each CPython release's opcodes, every one with its reason: allowed or refused
(`pure.py` picks this interpreter's table, and proves nothing on a release without one).
"""

from __future__ import annotations


def _each(names: str, reason: str) -> dict[str, str]:
    """One reason shared by a group of names (the data reads as one reviewed line per group)."""
    return dict.fromkeys(names.split(), reason)


# ------------------------------------------------------------------------------------------ opcodes
# Each reviewed CPython release's opcodes, every one with its reason: allowed or refused. A release
# without a review proves nothing (every program forks); in a reviewed one, any opcode not allowed is
# refused. Python 3.11's:
_ALLOWED_OPCODES_311: dict[str, str] = {
    **_each("CACHE NOP RESUME EXTENDED_ARG", "no effect of its own (inline caches, tracing points, a wide argument)"),
    **_each("POP_TOP PUSH_NULL COPY SWAP", "stack shuffling"),
    **_each(
        "UNARY_POSITIVE UNARY_NEGATIVE UNARY_NOT UNARY_INVERT BINARY_OP COMPARE_OP IS_OP CONTAINS_OP",
        "operators on values the program holds, none of which has a method the program wrote",
    ),
    **_each(
        "BINARY_SUBSCR STORE_SUBSCR DELETE_SUBSCR BUILD_SLICE",
        "item access: the only mutable containers a pure program reaches are its own",
    ),
    **_each("GET_ITER FOR_ITER", "iteration over values the program holds"),
    **_each(
        "BUILD_TUPLE BUILD_LIST BUILD_SET BUILD_MAP BUILD_CONST_KEY_MAP BUILD_STRING LIST_APPEND SET_ADD "
        "MAP_ADD LIST_EXTEND SET_UPDATE DICT_UPDATE DICT_MERGE LIST_TO_TUPLE UNPACK_SEQUENCE UNPACK_EX",
        "builds or unpacks the program's own containers",
    ),
    "FORMAT_VALUE": "f-string field: format(value, spec), which walks no attributes (unlike str.format)",
    "LOAD_CONST": "a constant of the code object",
    **_each(
        "LOAD_NAME STORE_NAME DELETE_NAME LOAD_GLOBAL STORE_GLOBAL DELETE_GLOBAL",
        "the program's own namespace, or a pure builtin; the names are checked",
    ),
    **_each(
        "LOAD_FAST STORE_FAST DELETE_FAST LOAD_DEREF STORE_DEREF DELETE_DEREF LOAD_CLOSURE MAKE_CELL COPY_FREE_VARS",
        "a function's own locals and closure cells",
    ),
    **_each("LOAD_ATTR LOAD_METHOD", "attribute read; the name is checked against the allowlists"),
    **_each("IMPORT_NAME IMPORT_FROM", "import of a pure module (its proxy); names and level are checked"),
    **_each("PRECALL CALL KW_NAMES CALL_FUNCTION_EX", "a call of something the program holds"),
    **_each("MAKE_FUNCTION RETURN_VALUE", "the program's own functions and lambdas"),
    **_each(
        "RETURN_GENERATOR YIELD_VALUE SEND GET_YIELD_FROM_ITER",
        "the program's own generators (a generator with a try block is refused separately)",
    ),
    **_each(
        "JUMP_FORWARD JUMP_BACKWARD JUMP_BACKWARD_NO_INTERRUPT JUMP_IF_FALSE_OR_POP JUMP_IF_TRUE_OR_POP "
        "POP_JUMP_FORWARD_IF_FALSE POP_JUMP_FORWARD_IF_TRUE POP_JUMP_FORWARD_IF_NONE "
        "POP_JUMP_FORWARD_IF_NOT_NONE POP_JUMP_BACKWARD_IF_FALSE POP_JUMP_BACKWARD_IF_TRUE "
        "POP_JUMP_BACKWARD_IF_NONE POP_JUMP_BACKWARD_IF_NOT_NONE",
        "control flow",
    ),
    **_each(
        "PUSH_EXC_INFO POP_EXCEPT CHECK_EXC_MATCH RERAISE RAISE_VARARGS LOAD_ASSERTION_ERROR",
        "try/except/finally, raise and assert, on the program's own frames",
    ),
}

# Why the remaining 3.11 opcodes are refused (documentation; unlisted opcodes are refused anyway).
_REFUSED_OPCODES_311: dict[str, str] = {
    "LOAD_BUILD_CLASS": "classes can define dunder methods that library code calls later",
    "LOAD_CLASSDEREF": "only in class bodies",
    **_each("STORE_ATTR DELETE_ATTR", "attribute writes could change a module, class or function"),
    **_each("BEFORE_WITH WITH_EXCEPT_START", "`with` runs __enter__/__exit__ of library objects (np.errstate)"),
    **_each(
        "BEFORE_ASYNC_WITH GET_AWAITABLE GET_AITER GET_ANEXT END_ASYNC_FOR ASYNC_GEN_WRAP",
        "async code: coroutines can be left suspended with pending cleanup",
    ),
    **_each(
        "MATCH_CLASS MATCH_MAPPING MATCH_SEQUENCE MATCH_KEYS GET_LEN",
        "`match`: class patterns read attributes named by __match_args__ strings",
    ),
    **_each("CHECK_EG_MATCH PREP_RERAISE_STAR", "`except*`: exception groups, a known RestrictedPython escape"),
    "IMPORT_STAR": "star import copies a whole module's namespace",
    "SETUP_ANNOTATIONS": "module-level annotations write __annotations__",
    "PRINT_EXPR": "interactive mode only: calls sys.displayhook",
}

# Python 3.13's opcodes (3.12 changed most of them; 3.13 again). What changed, and why each is safe:
# - Calls: PRECALL and KW_NAMES are gone (CALL, CALL_KW); in 3.13 the NULL slot goes *after* the
#   callable (LOAD_NAME f, PUSH_NULL), which the check of `str(value)` follows.
# - LOAD_METHOD is folded into LOAD_ATTR: its argument is the name's index shifted left by one, the low
#   bit set for the method form (which pushes the method and `self`); LOAD_GLOBAL's low bit pushes a
#   NULL as in 3.11. The name is checked against the allowlists in either form.
# - Superinstructions (LOAD_FAST_LOAD_FAST, STORE_FAST_LOAD_FAST, STORE_FAST_STORE_FAST) pack two
#   local indices into one argument: locals only, as LOAD_FAST and STORE_FAST.
# - Comprehensions are inlined into their function (PEP 709, 3.12): LOAD_FAST_AND_CLEAR saves the
#   iteration variable and an exception-table handler puts it back; no code object of their own, and
#   the module's own code may hold fast locals. Semantics unchanged: the variable still does not leak.
# - Every generator has an exception-table entry of its own (it turns a StopIteration raised inside
#   into RuntimeError, CALL_INTRINSIC_1 3), and an inlined comprehension adds one: so "try block in a
#   generator" is PUSH_EXC_INFO in its code (the first instruction of every `except` or `finally`
#   handler), not a non-empty exception table as in 3.11.
# - CALL_INTRINSIC_1 stands for several old opcodes; its argument picks the function, and only
#   ALLOWED_INTRINSICS pass (unary +, list to tuple for f(*args), the generators' StopIteration
#   conversion): never the print hook, star import, async generator wrapping or the type-parameter ones.
#   CALL_INTRINSIC_2 holds only refused ones (except*, type parameters).
# - Immortal objects (PEP 683, 3.12): None, small ints, and every string the compiler interns (names,
#   identifier-like constants) are never freed; no program sees the difference (a refcount is not
#   reachable), but each new name a compiled program brings stays in the process that compiled it (so
#   from 3.12 on the worker compiles no program ahead of its fork: runner.COMPILE_AHEAD).
# - sum() of floats adds with compensation from 3.12 on (as math.fsum nearly does): a value may differ
#   in its last bits between 3.11 and 3.13, never between tiers.
_ALLOWED_OPCODES_313: dict[str, str] = {
    **_each("CACHE NOP RESUME EXTENDED_ARG", "no effect of its own (inline caches, tracing points, a wide argument)"),
    **_each("POP_TOP PUSH_NULL COPY SWAP END_FOR", "stack shuffling (END_FOR pops a finished loop's value)"),
    **_each(
        "UNARY_NEGATIVE UNARY_NOT UNARY_INVERT TO_BOOL BINARY_OP COMPARE_OP IS_OP CONTAINS_OP",
        "operators on values the program holds, none of which has a method the program wrote "
        "(TO_BOOL: the truth of a value, as UNARY_NOT and the conditional jumps take it)",
    ),
    **_each(
        "BINARY_SUBSCR STORE_SUBSCR DELETE_SUBSCR BUILD_SLICE BINARY_SLICE STORE_SLICE",
        "item access: the only mutable containers a pure program reaches are its own",
    ),
    **_each("GET_ITER FOR_ITER", "iteration over values the program holds"),
    **_each(
        "BUILD_TUPLE BUILD_LIST BUILD_SET BUILD_MAP BUILD_CONST_KEY_MAP BUILD_STRING LIST_APPEND SET_ADD "
        "MAP_ADD LIST_EXTEND SET_UPDATE DICT_UPDATE DICT_MERGE UNPACK_SEQUENCE UNPACK_EX",
        "builds or unpacks the program's own containers",
    ),
    **_each(
        "FORMAT_SIMPLE FORMAT_WITH_SPEC CONVERT_VALUE",
        "f-string field: format(value, spec), which walks no attributes (unlike str.format); "
        "CONVERT_VALUE is its !s, !r or !a, as 3.11's FORMAT_VALUE did",
    ),
    "LOAD_CONST": "a constant of the code object",
    **_each(
        "LOAD_NAME STORE_NAME DELETE_NAME LOAD_GLOBAL STORE_GLOBAL DELETE_GLOBAL",
        "the program's own namespace, or a pure builtin; the names are checked",
    ),
    **_each(
        "LOAD_FAST LOAD_FAST_CHECK LOAD_FAST_AND_CLEAR STORE_FAST DELETE_FAST LOAD_FAST_LOAD_FAST "
        "STORE_FAST_LOAD_FAST STORE_FAST_STORE_FAST LOAD_DEREF STORE_DEREF DELETE_DEREF MAKE_CELL "
        "COPY_FREE_VARS",
        "a function's own locals and closure cells (the superinstructions are two of these in one)",
    ),
    "LOAD_ATTR": "attribute read, plain or method form; the name is checked against the allowlists",
    **_each("IMPORT_NAME IMPORT_FROM", "import of a pure module (its proxy); names and level are checked"),
    **_each("CALL CALL_KW CALL_FUNCTION_EX", "a call of something the program holds"),
    "CALL_INTRINSIC_1": "unary +, list to tuple, or a generator's StopIteration conversion: the argument is "
    "checked against ALLOWED_INTRINSICS",
    **_each(
        "MAKE_FUNCTION SET_FUNCTION_ATTRIBUTE RETURN_VALUE RETURN_CONST",
        "the program's own functions and lambdas (SET_FUNCTION_ATTRIBUTE gives the function just made its "
        "defaults, annotations or closure, as 3.11's MAKE_FUNCTION did)",
    ),
    **_each(
        "RETURN_GENERATOR YIELD_VALUE SEND END_SEND GET_YIELD_FROM_ITER CLEANUP_THROW",
        "the program's own generators (a generator with a try block is refused separately)",
    ),
    **_each(
        "JUMP_FORWARD JUMP_BACKWARD JUMP_BACKWARD_NO_INTERRUPT POP_JUMP_IF_FALSE POP_JUMP_IF_TRUE "
        "POP_JUMP_IF_NONE POP_JUMP_IF_NOT_NONE",
        "control flow",
    ),
    **_each(
        "PUSH_EXC_INFO POP_EXCEPT CHECK_EXC_MATCH RERAISE RAISE_VARARGS LOAD_ASSERTION_ERROR",
        "try/except/finally, raise and assert, on the program's own frames",
    ),
}

_REFUSED_OPCODES_313: dict[str, str] = {
    "LOAD_BUILD_CLASS": "classes can define dunder methods that library code calls later",
    **_each(
        "LOAD_LOCALS LOAD_FROM_DICT_OR_GLOBALS LOAD_FROM_DICT_OR_DEREF",
        "only in class bodies and type-parameter scopes",
    ),
    "LOAD_SUPER_ATTR": "super(): classes and their methods",
    **_each("STORE_ATTR DELETE_ATTR", "attribute writes could change a module, class or function"),
    **_each("BEFORE_WITH WITH_EXCEPT_START", "`with` runs __enter__/__exit__ of library objects (np.errstate)"),
    **_each(
        "BEFORE_ASYNC_WITH GET_AWAITABLE GET_AITER GET_ANEXT END_ASYNC_FOR",
        "async code: coroutines can be left suspended with pending cleanup",
    ),
    **_each(
        "MATCH_CLASS MATCH_MAPPING MATCH_SEQUENCE MATCH_KEYS GET_LEN",
        "`match`: class patterns read attributes named by __match_args__ strings",
    ),
    "CHECK_EG_MATCH": "`except*`: exception groups, a known RestrictedPython escape",
    "CALL_INTRINSIC_2": "its functions are except*'s re-raise and the type parameters' (TypeVar bounds, "
    "defaults, generic functions): none reviewed as pure",
    "SETUP_ANNOTATIONS": "module-level annotations write __annotations__",
    **_each(
        "ENTER_EXECUTOR EXIT_INIT_CHECK INTERPRETER_EXIT RESERVED",
        "the interpreter's own (optimizer traces, specialized __init__ calls, the end of a C call): never "
        "in code the compiler makes",
    ),
    **_each(
        "INSTRUMENTED_CALL INSTRUMENTED_CALL_FUNCTION_EX INSTRUMENTED_CALL_KW INSTRUMENTED_END_FOR "
        "INSTRUMENTED_END_SEND INSTRUMENTED_FOR_ITER INSTRUMENTED_INSTRUCTION INSTRUMENTED_JUMP_BACKWARD "
        "INSTRUMENTED_JUMP_FORWARD INSTRUMENTED_LINE INSTRUMENTED_LOAD_SUPER_ATTR INSTRUMENTED_POP_JUMP_IF_FALSE "
        "INSTRUMENTED_POP_JUMP_IF_NONE INSTRUMENTED_POP_JUMP_IF_NOT_NONE INSTRUMENTED_POP_JUMP_IF_TRUE "
        "INSTRUMENTED_RESUME INSTRUMENTED_RETURN_CONST INSTRUMENTED_RETURN_VALUE INSTRUMENTED_YIELD_VALUE",
        "sys.monitoring's forms of other opcodes: co_code shows the plain ones",
    ),
    **_each(
        "JUMP JUMP_NO_INTERRUPT LOAD_CLOSURE LOAD_METHOD LOAD_SUPER_METHOD LOAD_ZERO_SUPER_ATTR "
        "LOAD_ZERO_SUPER_METHOD POP_BLOCK SETUP_CLEANUP SETUP_FINALLY SETUP_WITH STORE_FAST_MAYBE_NULL",
        "pseudo-instruction (numbered past 255): the compiler replaces it, co_code never holds it",
    ),
}

# CALL_INTRINSIC_1's functions that a pure program may call, by argument (tests/policies/test_pure.py checks each
# number against the name dis gives it).
ALLOWED_INTRINSICS: dict[int, str] = {
    3: "INTRINSIC_STOPITERATION_ERROR: a generator turns a StopIteration raised inside it into RuntimeError",
    5: "INTRINSIC_UNARY_POSITIVE: +x of a value the program holds",
    6: "INTRINSIC_LIST_TO_TUPLE: the tuple of a call's *args",
}
