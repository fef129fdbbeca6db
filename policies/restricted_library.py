"""Library code under the restricted policy: what library code may not do while a restricted program is on
the stack (read a frame, evaluate text) unless reviewed, which library objects copy/deepcopy may rebuild,
the attributes of library objects that are settings, and sympy's string-evaluating paths closed.
"""

from __future__ import annotations

import builtins
import io
import keyword
import sys
import tokenize
import types
from collections.abc import Callable
from typing import Any

from potrun.policies import (
    WRITABLE_ATTRIBUTES,
    WRITABLE_BASES,
)
from potrun.policies.restricted_compile import FILENAME, PROGRAM_MARK, PolicyViolation


def _program_line() -> int | None:
    """The line of the innermost program frame on the stack, for the violation report."""
    frame: types.FrameType | None = _real_getframe(1)
    while frame is not None:
        if frame.f_code.co_filename == FILENAME:
            return frame.f_lineno
        frame = frame.f_back
    return None


def _refuse_active(rule: str, message: str) -> PolicyViolation:
    """A refusal made outside the Guards' own methods (sympy's patched entry points, the library
    guards), recorded in the record of the Guards whose program runs: `_active_record` holds only
    that record's `append`, never the Guards."""
    violation = PolicyViolation(rule, message, _program_line())
    record = _active_record[0]
    if record is not None:
        record(violation)
    return violation


_active_record: list[Callable[[PolicyViolation], None] | None] = [None]

# -- library code that reads frames or evaluates text ------------------------------------------------
#
# While a restricted program is on the stack, library code may not read a frame (`sys._getframe`, so
# `inspect.currentframe`, `inspect.stack`...) nor evaluate text (`eval`, `exec`, `compile`) unless the
# calling function was reviewed (`REVIEWED_FRAME_READERS`, `REVIEWED_EVALUATORS`): numpy's `r_["name"]`
# evaluated names in its caller's frame, which under the guards is the guards' own, and handed out
# their live state. A module's own import-time code is its own (the program chose only to import it).
# Installed by `Guards.begin()`, once per process; outside a restricted program they change nothing.

_real_getframe = sys._getframe
_real_eval, _real_exec, _real_compile = builtins.eval, builtins.exec, builtins.compile

# (module, qualified name) of functions that may read a frame: each reads only its caller's __name__.
REVIEWED_FRAME_READERS: dict[tuple[str, str], str] = {
    ("collections", "namedtuple"): "reads the caller's __name__ for the new class's __module__",
    ("typing", "_caller"): "reads the caller's __name__ for a typing construct's __module__",
    ("sympy.utilities.lambdify", "lambdify"): "matches its caller's locals by identity to name arguments in a"
    " docstring; reached only through lambdify's check",
}
# (module, qualified name) of functions that may evaluate text, each over text it made or checked.
REVIEWED_EVALUATORS: dict[tuple[str, str], str] = {
    ("collections", "namedtuple"): "evaluates a fixed template over checked identifiers",
    ("dataclasses", "_create_fn"): "executes generated methods over the class's checked field names",
    ("typing", "ForwardRef.__init__"): "compiles an annotation string and keeps the code; evaluating it"
    " (ForwardRef._evaluate, get_type_hints) is not reviewed",
    ("sympy.parsing.sympy_parser", "parse_expr"): "reached only through parse_expr's check (see below)",
    ("sympy.parsing.sympy_parser", "eval_expr"): "reached only through parse_expr's check",
    ("sympy.utilities.lambdify", "lambdify"): "reached only through lambdify's check (see below)",
    ("sympy.utilities.lambdify", "_import"): "executes fixed import statements of lambdify's namespaces",
    ("sympy.polys.monomials", "MonomialOps._build"): "executes a fixed template over integer-named variables",
    ("sympy.polys.ring_series", "_rs_series"): "evaluates a name from its own fixed table (_convert_func)",
}


def _caller_key(frame: types.FrameType) -> tuple[str, str]:
    return frame.f_globals.get("__name__", ""), frame.f_code.co_qualname


def _restricted_program_below(frame: types.FrameType | None) -> bool:
    """Is a restricted program's frame at or below `frame`, with no module import in between?"""
    while frame is not None:
        code = frame.f_code
        if code.co_filename == FILENAME:
            if PROGRAM_MARK in frame.f_globals:
                return True
        elif code.co_name == "_call_with_frames_removed" and code.co_filename.startswith("<frozen importlib"):
            return False  # a module's top-level code, run by an import
        frame = frame.f_back
    return False


def _library_refusal(caller: types.FrameType, reviewed: dict[tuple[str, str], str]) -> bool:
    return _caller_key(caller) not in reviewed and _restricted_program_below(caller)


def _guarded_getframe(depth: int = 0, /) -> types.FrameType:
    caller = _real_getframe(1)
    if _caller_key(caller) == ("inspect", "currentframe") and caller.f_back is not None:
        caller = caller.f_back  # whoever asked inspect for its frame
    if _library_refusal(caller, REVIEWED_FRAME_READERS):
        module, name = _caller_key(caller)
        raise _refuse_active("forbidden_call", f"{module}.{name} reads a frame; not allowed")
    return _real_getframe(depth + 1)


def _evaluator(real: Callable[..., Any], what: str) -> Callable[..., Any]:
    def guarded(*args: Any, **kwargs: Any) -> Any:
        caller = _real_getframe(1)
        if _library_refusal(caller, REVIEWED_EVALUATORS):
            module, name = _caller_key(caller)
            raise _refuse_active("forbidden_call", f"{module}.{name} calls {what}(); not allowed")
        # This module's `from __future__ import annotations` must not pass to the caller's code.
        if what == "compile":
            if len(args) < 5 and "dont_inherit" not in kwargs:
                kwargs["dont_inherit"] = True
        elif args and isinstance(args[0], (str, bytes)):
            args = (_real_compile(args[0], "<string>", what, dont_inherit=True), *args[1:])
        if what != "compile" and len(args) == 1 and "globals" not in kwargs:
            # Without a namespace, eval and exec use their caller's: the caller's, not this function's.
            args = (args[0], caller.f_globals, caller.f_locals)
        if what == "exec" and isinstance(args[0], types.CodeType) and args[0].co_filename == FILENAME:
            # The runner starting a program: this frame is not the program's, so it does not count
            # against the program's recursion depth (the same as in the warm tier, which has no guards).
            limit = sys.getrecursionlimit()
            sys.setrecursionlimit(limit + 1)
            try:
                return real(*args, **kwargs)
            finally:
                sys.setrecursionlimit(limit)
        return real(*args, **kwargs)

    guarded.__name__ = guarded.__qualname__ = what
    return guarded


def _install_library_guards(record: Callable[[PolicyViolation], None]) -> None:
    """Refusals go to `record` from now on; the frame and evaluation guards are installed once."""
    _active_record[0] = record
    if sys._getframe is _real_getframe:
        sys._getframe = _guarded_getframe
        builtins.eval = _evaluator(_real_eval, "eval")
        builtins.exec = _evaluator(_real_exec, "exec")
        builtins.compile = _evaluator(_real_compile, "compile")


COPY_REVIEW_LIMIT = 1_000_000
_COPY_ATOMIC: frozenset[type] = frozenset(
    {int, float, complex, bool, str, bytes, bytearray, type(None), range, slice, type(Ellipsis), type(NotImplemented)}
)


def _no_children(value: Any) -> Any:
    return ()


def _items(value: Any) -> Any:
    return list(value)


def _mapping_items(value: Any) -> Any:
    return [*value.keys(), *value.values()]


def _array_items(value: Any) -> Any:
    return value.ravel().tolist() if value.dtype.hasobject else ()


# Library classes whose copy protocol was reviewed (their own __reduce_ex__/__copy__/__deepcopy__
# rebuild them from their own state), and what they hold that a deep copy copies too.
REVIEWED_COPIES: dict[str, Callable[[Any], Any]] = {
    **dict.fromkeys(
        ("fractions.Fraction", "decimal.Decimal", "decimal.Context", "random.Random", "re.Pattern", "re.Match"),
        _no_children,
    ),
    **dict.fromkeys(
        ("datetime.date", "datetime.datetime", "datetime.time", "datetime.timedelta", "datetime.timezone"),
        _no_children,
    ),
    **dict.fromkeys(("collections.Counter", "collections.OrderedDict", "collections.defaultdict"), _mapping_items),
    "collections.deque": _items,
    "numpy.ndarray": _array_items,
}


def _reviewed_copy(kind: type) -> Callable[[Any], Any] | None:
    """How to list what an instance of exactly `kind` holds, when its copy protocol was reviewed; None
    otherwise. numpy's scalars and sympy's immutable expressions are reviewed as families (a program's
    own subclass of one is not: `_classes`)."""
    for dotted, children in REVIEWED_COPIES.items():
        if _resolve(dotted) is kind:
            return children
    module = getattr(kind, "__module__", None)
    if not isinstance(module, str):
        return None
    numpy = sys.modules.get("numpy")
    if numpy is not None and module.startswith("numpy") and issubclass(kind, numpy.generic):
        return _no_children
    if module.startswith("sympy."):
        basic = getattr(sys.modules.get("sympy"), "Basic", None)
        if basic is not None and issubclass(kind, basic):
            return _no_children
    return None


def _program_function(function: Any) -> bool:
    """Was this function defined by the program's own code (not only given its `__module__`)?"""
    code = getattr(function, "__code__", None)
    return type(function) is types.FunctionType and isinstance(code, types.CodeType) and code.co_filename == FILENAME


def _writable_attributes(cls: type) -> frozenset[str]:
    """The reviewed attribute names a program may set on an instance of exactly this library class."""
    for dotted, names in WRITABLE_ATTRIBUTES.items():
        if _resolve(dotted) is cls:
            return names
    return frozenset()


def _writable_bases() -> frozenset[type]:
    return frozenset(cls for cls in map(_resolve, WRITABLE_BASES) if isinstance(cls, type))


def _resolve(dotted: str) -> Any:
    """`module.Name` of a loaded module, or None (a class of a module not loaded has no instance)."""
    module_name, _, name = dotted.rpartition(".")
    module = sys.modules.get(module_name)
    return getattr(module, name, None) if module is not None else None


_sympy_closed = False


def close_sympy_escape_hatches() -> None:
    """sympy runs code it makes from strings: parse_expr() eval()s a string (sympify, and every
    function given a string, reach it), and lambdify() exec()s source printed from an expression, in
    which a symbol or function name is printed as written (nsolve, Sum.evalf and CRootOf.evalf call
    it). In a restricted runner parse_expr is refused, and lambdify runs only on expressions made of
    sympy's own classes whose names are plain identifiers. Both are replaced in every sympy module
    that holds them, once per process (milliseconds): a worker of the restricted policy may call this
    once it has imported sympy, and its forks inherit it; refusals go to the Guards whose program
    runs (`begin()`). A process that runs trusted programs must not call it.

    And sympy makes classes from a namespace it is given: Function(name, bases, namespace) passes
    them on to its metaclass, UndefinedFunction, which is three-argument type() (a class whose
    namespace no transformer checked: `__array_interface__` there gave numpy arrays over any
    address). Its constructor is replaced by one that takes a name and keyword options only (their
    names are checked like every name: no underscore)."""
    global _sympy_closed
    if _sympy_closed:
        return
    import sympy.parsing.sympy_parser as parser
    import sympy.utilities.lambdify  # noqa: F401  (the package attribute of that name is the function)
    from sympy.core.function import UndefinedFunction

    original_new = UndefinedFunction.__new__

    def undefined_function(mcl: type, name: Any, *rest: Any, **kwargs: Any) -> Any:
        if rest or "bases" in kwargs or "__dict__" in kwargs:
            raise _refuse_active("forbidden_call", "sympy.Function with bases or a namespace is not allowed")
        return original_new(mcl, name, **kwargs)

    UndefinedFunction.__new__ = staticmethod(undefined_function)

    lambdify_module = sys.modules["sympy.utilities.lambdify"]

    original_parse_expr = parser.parse_expr

    def parse_expr(*args: Any, **kwargs: Any) -> Any:
        # A sympy module's own import-time code parses constant strings from its file (simplify()
        # imports sympy.physics.units, which sympifies its prefixes' names): that string is not the
        # program's, whoever triggered the import.
        if _in_module_import() or (args and _plain_formula(args[0]) and _sympy_transformations(kwargs)):
            return original_parse_expr(*args, **kwargs)
        raise _refuse_active("forbidden_call", "sympy parses strings with eval(); not allowed")

    original = lambdify_module.lambdify

    def lambdify(args: Any, expr: Any, *rest: Any, **kwargs: Any) -> Any:
        printer = kwargs.get("printer", rest[1] if len(rest) > 1 else None)
        if printer is not None and not _from_sympy(printer if isinstance(printer, type) else type(printer)):
            raise _refuse_active("forbidden_call", "lambdify with a printer that is not sympy's")
        _check_printed_names(args)
        _check_printed_names(expr)
        return original(args, expr, *rest, **kwargs)

    replacements = {id(parser.parse_expr): parse_expr, id(original): lambdify}
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "sympy" or name.startswith("sympy.")):
            continue
        namespace = vars(module)
        for attribute, value in list(namespace.items()):
            replacement = replacements.get(id(value))
            if replacement is not None:
                namespace[attribute] = replacement
    _sympy_closed = True


# Names a string given to sympify may use and still be parsed: functions and constants, so that
# formulas sympy makes itself (nsimplify turns mpmath.identify's "(sqrt(2)/2)" into an expression) work.
_FORMULA_NAMES = frozenset({"sqrt", "pi", "E", "I", "exp", "log", "sin", "cos", "tan", "oo"})
_FORMULA_OPERATORS = frozenset({"+", "-", "*", "/", "**", "(", ")"})


def _plain_formula(text: Any) -> bool:
    """Is `text` a formula of numbers, arithmetic and _FORMULA_NAMES only? (No other name, so no
    attribute, builtin or dunder: what sympy's eval() then runs is arithmetic on sympy values.)"""
    if type(text) is not str or len(text) > 1000:
        return False
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return False
    for token in tokens:
        if token.type == tokenize.NAME and token.string not in _FORMULA_NAMES:
            return False
        if token.type == tokenize.OP and token.string not in _FORMULA_OPERATORS:
            return False
        if token.type not in (
            tokenize.NAME,
            tokenize.OP,
            tokenize.NUMBER,
            tokenize.NEWLINE,
            tokenize.NL,
            tokenize.ENDMARKER,
        ):
            return False
    return True


def _sympy_transformations(kwargs: dict[str, Any]) -> bool:
    """Are the token transformations, if any, sympy's own (a caller's could rewrite the tokens after
    they were checked)?"""
    transformations = kwargs.get("transformations", ())
    if isinstance(transformations, str):
        return transformations == "all"
    return all(getattr(item, "__module__", None) == "sympy.parsing.sympy_parser" for item in transformations)


def _in_module_import() -> bool:
    """Is the innermost program frame, if any, below a module's import (so the caller is that module's
    top-level code)?"""
    frame: types.FrameType | None = _real_getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename == FILENAME:
            return False
        if filename.startswith("<frozen importlib._bootstrap") and frame.f_code.co_name == "_call_with_frames_removed":
            return True
        frame = frame.f_back
    return False


def _from_sympy(cls: type) -> bool:
    module = getattr(cls, "__module__", None)
    return isinstance(module, str) and (module == "sympy" or module.startswith("sympy."))


def _check_printed_names(item: Any, depth: int = 0) -> None:
    """Refuse what lambdify would print as code it was not meant to: a node of a class that is not
    sympy's (a program's subclass may answer `name` differently on each read), or a name (of a
    symbol, an undefined function, a matrix symbol...) that is not a plain identifier."""
    from sympy import Basic
    from sympy.core.function import AppliedUndef
    from sympy.matrices import MatrixBase

    if depth > 50:
        raise _refuse_active("forbidden_call", "lambdify of a nested structure this deep")
    if type(item) in (int, float, complex, bool, type(None)):
        return
    if type(item) in (list, tuple, set, frozenset) or isinstance(item, MatrixBase):
        for element in list(item):
            _check_printed_names(element, depth + 1)
        return
    if type(item) is dict:
        for key, value in item.items():
            _check_printed_names(key, depth + 1)
            _check_printed_names(value, depth + 1)
        return
    if not isinstance(item, Basic):  # a string is printed as code as it is
        raise _refuse_active("forbidden_call", f"lambdify of a {type(item).__name__} object")
    from sympy import preorder_traversal

    for node in preorder_traversal(item):
        if not _from_sympy(type(node)):
            raise _refuse_active("forbidden_call", f"lambdify of a {type(node).__name__} object (not sympy's)")
        names = [getattr(node, "name", None)]
        if isinstance(node, AppliedUndef):
            names.append(node.func.__name__)
        for name in names:
            if isinstance(name, str) and not (name.isidentifier() and not keyword.iskeyword(name)):
                raise _refuse_active("forbidden_call", f"lambdify of the name {name!r} (not an identifier)")
