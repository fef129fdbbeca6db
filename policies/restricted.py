"""The restricted policy's enforcement: RestrictedPython compile plus run-time guards, default deny.

Compile time: RestrictedPython's transformer, which rejects every AST node it has no reviewed
`visit_` method for (match statements, `except*`, ...), every name and attribute that starts with an
underscore, and the frame attributes. It is extended here with two reviewed rules: `x[i] op= v` and
`o.a op= v` go through the guards, and keyword-argument names are checked like other names (a static
`f(__dict__=...)` would otherwise pass names RestrictedPython refuses everywhere else).

Run time (`Guards`), every refusal recorded so that try/except cannot hide it (the status is then
`policy_violation`):

- Module attributes: only the members `members.MEMBERS` lists for that module, whether read as
  `m.name`, `getattr(m, "name")` or `from m import name`. Members that look things up by a name or a
  key given at run time are handed out guarded (`operator.getitem/itemgetter/attrgetter/methodcaller`),
  and `numpy.ndarray` is a stand-in that answers isinstance() and refuses construction.
- Value attributes (anything that is not a module): refused by name (underscore names, DENIED_NAMES,
  DENIED_ATTRIBUTES of the value's package) and by what comes back, see `_reach_refusal`: no module,
  module namespace, sys.modules, builtins dict, frame, code, traceback, cell, mappingproxy, metaclass,
  class or function of a module outside the allowlist, none of the `types` module's classes, and no
  builtin the program was not given (setattr, eval, the real type, ...). That check is on the kind of
  object, so it does not depend on knowing every attribute name that leads there.
- Item access (`x[k]`, `operator.getitem`, `itemgetter`) passes the same check on what it returns, and
  iterating over a module namespace or sys.modules is refused. So do what calls return, what iteration
  yields, a program function's arguments, operators' and comparisons' results (`_result_(a + b)`), what
  `with ... as` enters, `x op= v`, `yield`/`yield from`, a caught exception, and what a display unpacks
  (`[*it]`, `{**m}`): library code decides what those hand back.
- `type(x)` goes through the same check (never a metaclass, never the ndarray constructor), and
  three-argument type() is refused: classes come only from `class` statements.
- `str.format` and `format_map`, however reached (`"".format`, `str.format`, `getattr(str, "format")`,
  a `super()` proxy, a str subclass): format fields may not contain attribute or index lookups, nested
  format specs included; `format_map` is refused.
- Call with `**kwargs`: keyword names that start with an underscore are refused (`_apply_`).
"""

from __future__ import annotations

import ast
import builtins
import copy
import dis
import io
import keyword
import operator
import os
import string
import sys
import tokenize
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

from RestrictedPython.Guards import (
    guarded_iter_unpack_sequence,
    guarded_unpack_sequence,
    safe_builtins,
)
from RestrictedPython.transformer import RestrictingNodeTransformer

from potrun.policies import (
    ALLOWED_MODULES,
    DENIED_ATTRIBUTES,
    DENIED_NAMES,
    WRITABLE_ATTRIBUTES,
    WRITABLE_BASE_MODULES,
    WRITABLE_BASES,
    PolicySpec,
    module_allowed,
)
from potrun.policies.members import MEMBERS

PROGRAM_MODULE = "__potrun_program__"
# A key of every restricted program's globals: how the library guards know a restricted program's frame
# (a trusted or pure program's frames have the same file name, not this key).
PROGRAM_MARK = "_restricted_program_"
_MISSING: Any = object()
FILENAME = "<program>"


class PolicyViolation(Exception):
    """A program did something its policy forbids. `rule` is a short stable name."""

    def __init__(self, rule: str, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.rule = rule
        self.message = message
        self.line = line


class _Transformer(RestrictingNodeTransformer):
    """RestrictedPython's transformer, plus augmented assignment to items and attributes, and checked
    keyword-argument names. Each error it records is also a PolicyViolation in `violations`, whose
    rule is that of the check that found it: `forbidden_name` for a name or attribute name (the
    checks of `check_name` and `visit_Attribute`), `forbidden_syntax` for anything else."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.violations: list[PolicyViolation] = []
        self._rule = "forbidden_syntax"  # the rule of the check running now

    def error(self, node: ast.AST, info: str) -> None:
        super().error(node, info)
        self.violations.append(PolicyViolation(self._rule, info, getattr(node, "lineno", None)))

    @contextmanager
    def _checking(self, rule: str) -> Iterator[None]:
        outer, self._rule = self._rule, rule
        try:
            yield
        finally:
            self._rule = outer

    def check_name(self, node: Any, name: str | None, allow_magic_methods: bool = False) -> None:
        """A name's own checks find `forbidden_name` violations. A method may also be named by one of
        the reviewed special methods (`REVIEWED_SPECIAL_METHODS`: operators, containers, repr...)."""
        if allow_magic_methods and name in REVIEWED_SPECIAL_METHODS and getattr(node, "col_offset", 0) != 0:
            return
        with self._checking("forbidden_name"):
            super().check_name(node, name, allow_magic_methods)

    def visit_Name(self, node: ast.Name) -> Any:
        """`__name__` reads as "__main__", as under the trusted policy (`if __name__ == "__main__":`):
        a constant, so the program's real module name stays the guards' mark."""
        if node.id == "__name__" and isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Constant("__main__"), node)
        return super().visit_Name(node)

    def check_import_names(self, node: ast.ImportFrom | ast.Import) -> ast.AST:
        """`from m import *` is allowed: the guards bind only the module's listed members."""
        if isinstance(node, ast.ImportFrom) and [alias.name for alias in node.names] == ["*"]:
            return cast(ast.AST, self.node_contents_visit(node))
        return super().check_import_names(node)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> Any:
        """`nonlocal` only rebinds the enclosing function's own variable: allowed."""
        return self.node_contents_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> Any:
        """`x: int = v` (and dataclass fields): the target, annotation and value pass their own rules."""
        return self.node_contents_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        """The attribute's name is checked first (`forbidden_name`); what it is read from is visited
        as any other node. `o.a = v` and `del o.a` become `_write_attr_(o, "a").a`: attribute writes
        have a guard of their own (default deny: only on what the program made), item writes keep
        `_write_`."""
        if node.attr in REVIEWED_SPECIAL_READS and isinstance(node.ctx, ast.Load):
            # Read through the guards, which decide on the object (Guards.getattr).
            value = self.visit(node.value)
            call = ast.Call(func=ast.Name("_getattr_", ast.Load()), args=[value, ast.Constant(node.attr)], keywords=[])
            return ast.copy_location(call, node)
        with self._checking("forbidden_name"):
            visited = super().visit_Attribute(node)
        if isinstance(visited, ast.Attribute) and isinstance(visited.ctx, (ast.Store, ast.Del)):
            write = visited.value
            if isinstance(write, ast.Call) and isinstance(write.func, ast.Name) and write.func.id == "_write_":
                write.func.id = "_write_attr_"
                write.args.append(ast.Constant(visited.attr))
        return visited

    def visit_Call(self, node: ast.Call) -> Any:
        """What a call returns passes the check of an attribute read: `f(x)` becomes
        `_result_(f(x))` (a library call may hand back what no attribute read would)."""
        call = cast(ast.expr, super().visit_Call(node))
        return ast.copy_location(ast.Call(func=ast.Name("_result_", ast.Load()), args=[call], keywords=[]), node)

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        """What an operator returns passes the check of a call's result: `a + b` runs a library's
        `__add__` (or `__radd__`), which may hand back what no attribute read would."""
        return _checked(super().visit_BinOp(node), node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        """As a binary operator's (`-a`, `+a`, `~a`); `not a` is always a bool."""
        visited = super().visit_UnaryOp(node)
        return visited if isinstance(node.op, ast.Not) else _checked(visited, node)

    def visit_Compare(self, node: ast.Compare) -> Any:
        """As a binary operator's (`a < b` runs `__lt__`, which returns what it likes; a chain returns
        the comparison it stopped at); `is`, `is not`, `in`, `not in` are always bools."""
        visited = super().visit_Compare(node)
        if all(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops):
            return visited
        return _checked(visited, node)

    def visit_Yield(self, node: ast.Yield) -> Any:
        """`x = yield v`: what a caller sends in (library code drives generators too) is checked."""
        return _checked(super().visit_Yield(node), node)

    def visit_YieldFrom(self, node: ast.YieldFrom) -> Any:
        """`x = yield from it`: the iterator's return value is checked, as a call's result."""
        return _checked(super().visit_YieldFrom(node), node)

    def visit_Starred(self, node: ast.Starred) -> Any:
        """`[*it]`, `(*it,)`, `{*it}`, `f(*it)`: the items come through `_getiter_`, as a for loop's do
        (a display's unpacking iterates in C, past the guards)."""
        visited = super().visit_Starred(node)
        if isinstance(visited, ast.Starred) and isinstance(visited.ctx, ast.Load):
            visited.value = ast.copy_location(
                ast.Call(func=ast.Name("_getiter_", ast.Load()), args=[visited.value], keywords=[]), visited.value
            )
        return visited

    def visit_Dict(self, node: ast.Dict) -> Any:
        """`{**mapping}`: its keys and values pass the check of an item (the merge reads them in C)."""
        visited = super().visit_Dict(node)
        if isinstance(visited, ast.Dict):
            for index, key in enumerate(visited.keys):
                if key is None:
                    value = visited.values[index]
                    visited.values[index] = ast.copy_location(
                        ast.Call(func=ast.Name("_mapping_", ast.Load()), args=[value], keywords=[]), value
                    )
        return visited

    def visit_With(self, node: ast.With) -> Any:
        """`with cm as x`: cm passes through `_with_`, whose `__enter__` checks what the real one
        returns (a library's `__enter__` returns what it likes)."""
        visited = super().visit_With(node)
        if not isinstance(visited, ast.With):
            return visited
        for item in visited.items:
            if item.optional_vars is not None:
                item.context_expr = ast.copy_location(
                    ast.Call(func=ast.Name("_with_", ast.Load()), args=[item.context_expr], keywords=[]),
                    item.context_expr,
                )
        return visited

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> Any:
        """`except E as e`: the exception caught (a library may raise any object of an exception class)
        is checked before the handler runs."""
        visited = super().visit_ExceptHandler(node)
        if isinstance(visited, ast.ExceptHandler) and visited.name:
            check = ast.Expr(
                ast.Call(func=ast.Name("_result_", ast.Load()), args=[ast.Name(visited.name, ast.Load())], keywords=[])
            )
            visited.body.insert(0, ast.copy_location(check, visited.body[0]))
        return visited

    def visit_FunctionDef(self, node: ast.FunctionDef) -> Any:
        """A function's arguments pass the check of an attribute read on entry: library code calls the
        program's functions (map, sorted's key, reduce) with values the program never read itself."""
        visited = super().visit_FunctionDef(node)
        if isinstance(visited, ast.FunctionDef):
            names = _parameter_names(visited.args)
            if names:
                check = ast.Expr(_params_call(names))
                docstring = ast.get_docstring(visited, clean=False) is not None
                visited.body.insert(1 if docstring else 0, ast.copy_location(check, visited.body[0]))
        return visited

    def visit_Lambda(self, node: ast.Lambda) -> Any:
        """As a function's: `lambda a: body` becomes `lambda a: _params_(a) or body`."""
        visited = super().visit_Lambda(node)
        if isinstance(visited, ast.Lambda):
            names = _parameter_names(visited.args)
            if names:
                visited.body = ast.copy_location(
                    ast.BoolOp(op=ast.Or(), values=[_params_call(names), visited.body]), visited.body
                )
        return visited

    def node_contents_visit(self, node: Any) -> Any:
        """The children of a node are checked by their own rules, whatever check visits them."""
        with self._checking("forbidden_syntax"):
            return super().node_contents_visit(node)

    def visit_keyword(self, node: ast.keyword) -> Any:
        """`f(name=v)`: the name follows the rules of every other name (no leading underscore): some
        library calls turn keyword names into attributes (sympy.Function puts them in a class)."""
        self.check_name(node, node.arg)
        return self.node_contents_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        """Allow `x[i] op= v` and `o.a op= v` through guards; names are RestrictedPython's job."""
        target = node.target
        op = ast.Constant(_AUG_OPS[type(node.op)] + "=")
        if isinstance(target, ast.Subscript):
            key = self._slice_to_expr(target.slice)
            call = self._helper("_aug_item_", [target.value, key, op, node.value])
        elif isinstance(target, ast.Attribute):
            self.check_name(node, target.attr)
            call = self._helper("_aug_attr_", [target.value, ast.Constant(target.attr), op, node.value])
        else:
            return super().visit_AugAssign(node)
        return ast.copy_location(ast.Expr(call), node)

    def visit_ClassDef(self, node: ast.ClassDef) -> Any:
        """`class C(**kw)`: refused, since `kw` could hold the `metaclass` keyword RestrictedPython
        refuses when it is written out."""
        if any(item.arg is None for item in node.keywords):
            self.error(node, 'Class keyword arguments given as "**" are not allowed.')
        return super().visit_ClassDef(node)

    def _helper(self, name: str, args: list[ast.expr]) -> ast.Call:
        visited = [self.visit(arg) for arg in args]
        return ast.Call(func=ast.Name(name, ast.Load()), args=visited, keywords=[])

    @staticmethod
    def _slice_to_expr(node: ast.expr) -> ast.expr:
        if not isinstance(node, ast.Slice):
            return node
        parts = [part or ast.Constant(None) for part in (node.lower, node.upper, node.step)]
        return ast.Call(func=ast.Name("slice", ast.Load()), args=parts, keywords=[])


def _checked(expression: Any, node: ast.AST) -> Any:
    """`_result_(expression)`, where the visit left an expression (an error leaves the node as is)."""
    if not isinstance(expression, ast.expr):
        return expression
    return ast.copy_location(ast.Call(func=ast.Name("_result_", ast.Load()), args=[expression], keywords=[]), node)


def _parameter_names(arguments: ast.arguments) -> list[str]:
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    every += [arg for arg in (arguments.vararg, arguments.kwarg) if arg is not None]
    return [arg.arg for arg in every]


def _params_call(names: list[str]) -> ast.expr:
    """`_params_(a, b)` only when an argument is not plain data (`a.__class__ not in _plain_ or ...`):
    for plain arguments the check calls nothing (a call, even of a C function, counts against the
    recursion limit), so a restricted program recurses as deep as in the warm tier. (No class a program
    reaches answers `__class__` with another class: its own classes cannot define it.)"""
    check = ast.Call(
        func=ast.Name("_params_", ast.Load()), args=[ast.Name(name, ast.Load()) for name in names], keywords=[]
    )
    tests: list[ast.expr] = [
        ast.Compare(
            left=ast.Attribute(value=ast.Name(name, ast.Load()), attr="__class__", ctx=ast.Load()),
            ops=[ast.NotIn()],
            comparators=[ast.Name("_plain_", ast.Load())],
        )
        for name in names
    ]
    condition = tests[0] if len(tests) == 1 else ast.BoolOp(op=ast.Or(), values=tests)
    return ast.BoolOp(op=ast.And(), values=[condition, check])


# Special methods a program's class may define: each is called by the interpreter or a library with the
# program's own values and returns what the program chose, which it could hand out anyway. Not: the
# attribute hooks (__getattr__, __setattr__...: numpy asks an object for __array_interface__), the copy
# and pickle hooks (__reduce_ex__, __getstate__, __setstate__, __copy__...: copy rebuilds any object from
# them), numpy's and the buffer protocols, descriptors and class hooks (__get__, __set_name__,
# __init_subclass__, __class_getitem__, __new__, __del__), __slots__, and the conversions (__float__,
# __int__, __index__, __complex__: a value's conversion must never run the program's code).
_SPECIAL_METHOD_NAMES = """
    init repr str format hash bool len iter next reversed contains getitem setitem delitem missing call
    enter exit post_init eq ne lt le gt ge neg pos abs invert round trunc floor ceil
    add sub mul matmul truediv floordiv mod divmod pow lshift rshift and xor or
    radd rsub rmul rmatmul rtruediv rfloordiv rmod rdivmod rpow rlshift rrshift rand rxor ror
    iadd isub imul imatmul itruediv ifloordiv imod ipow ilshift irshift iand ixor ior
"""
REVIEWED_SPECIAL_METHODS: frozenset[str] = frozenset(f"__{name}__" for name in _SPECIAL_METHOD_NAMES.split())

# Special attributes a program may read, each decided on the object by the guards (Guards.getattr):
# `__name__` (a string), `__class__` (as type() gives it), `__init__` (of super() or the program's own).
REVIEWED_SPECIAL_READS: frozenset[str] = frozenset({"__name__", "__class__", "__init__"})


_AUG_OPS: dict[type, str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.MatMult: "@",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
}

_INPLACE: dict[str, Callable[[Any, Any], Any]] = {
    "+=": operator.iadd,
    "-=": operator.isub,
    "*=": operator.imul,
    "/=": operator.itruediv,
    "//=": operator.ifloordiv,
    "%=": operator.imod,
    "**=": operator.ipow,
    "@=": operator.imatmul,
    "<<=": operator.ilshift,
    ">>=": operator.irshift,
    "&=": operator.iand,
    "|=": operator.ior,
    "^=": operator.ixor,
}


def compile_restricted_program(source: str) -> types.CodeType:
    """Parse, check and compile. Raises SyntaxError or PolicyViolation (the first one, with its line)."""
    tree = ast.parse(source, FILENAME, "exec")
    transformer = _Transformer(errors=[], warnings=[], used_names={})
    transformer.visit(tree)
    if transformer.violations:
        raise transformer.violations[0]
    # The nodes made for `x[k] op= v` have no position of their own: they take their statement's.
    # dont_inherit: this module's own `from __future__` flags are not the program's (its annotations are
    # evaluated as plain Python evaluates them).
    return _real_compile(ast.fix_missing_locations(tree), FILENAME, "exec", dont_inherit=True)


class Guards:
    """The run-time half of the policy. One instance per process that runs restricted programs;
    `begin()` once, before its program.

    Its state is out of a program's reach and cannot be rewritten from Python: it has no `__dict__`,
    its record of refusals is a list only its own methods hold (`violations` is a copy, a tuple), the
    allowlists are frozen when it is made, `begin()` runs once per process (a program that reached
    the object could not empty its record), and no module global refers to it (library code that
    reads a frame is refused anyway, see `_install_library_guards`)."""

    __slots__ = (
        "_classes",
        "_denied_ids",
        "_guarded",
        "_kinds",
        "_namespaces",
        "_namespaces_for",
        "_ndarray_stand_in",
        "_record",
        "_started",
        "_writable_kinds",
        "builtins",
        "spec",
    )

    def __init__(self, spec: PolicySpec) -> None:
        self.spec = spec
        self._record: list[PolicyViolation] = []
        self._started: int | None = None  # the process id that began, once
        # The classes the program's `class` statements made (by identity, kept alive so that an id is
        # never reused): the objects it may write attributes to (`write_attr`).
        self._classes: dict[int, type] = {}
        self._writable_kinds: dict[type, bool] = {}
        self._kinds: dict[type, str | None] = {}  # why any instance of a class is refused, or None
        self.builtins = self._make_builtins()
        # Builtins the program was not given (by identity): reaching one by any path is refused.
        given = {id(value) for value in self.builtins.values()}
        self._denied_ids = frozenset(
            id(value)
            for value in vars(builtins).values()
            if id(value) not in given and not isinstance(value, (str, bool)) and value is not NotImplemented
        ) | {id(vars(builtins)), id(self.builtins), id(sys.modules)}
        self._guarded = self._make_guarded()
        self._namespaces: frozenset[int] = frozenset()
        self._namespaces_for: tuple[int, str | None] = (-1, None)  # sys.modules when _namespaces was made
        self._ndarray_stand_in: type | None = None

    @property
    def violations(self) -> tuple[PolicyViolation, ...]:
        """The refusals recorded since `begin()`, first first (a copy: the record is append-only)."""
        return tuple(self._record)

    def begin(self) -> None:
        """Start the process's program: once per process, so that no one who reached this object can
        empty its record. Library code's frame reads and text evaluation are refused from now on while
        a restricted program is on the stack."""
        pid = os.getpid()
        if self._started is not None and self._started == pid:
            raise RuntimeError("Guards.begin() runs once per process")
        self._started = pid
        self._record.clear()
        _install_library_guards(self._record.append)  # the record's append, never the Guards

    def new_globals(self, printer_factory: Callable[..., Any]) -> dict[str, Any]:
        return {
            "__builtins__": self.builtins,
            "__name__": PROGRAM_MODULE,
            "__metaclass__": type,
            "_getattr_": self.getattr,
            "_getitem_": self.getitem,
            "_getiter_": self.getiter,
            "_iter_unpack_sequence_": guarded_iter_unpack_sequence,
            "_unpack_sequence_": guarded_unpack_sequence,
            "_write_": self.write,
            "_write_attr_": self.write_attr,
            "_result_": self.result,
            "_params_": self.params,
            "_plain_": _PLAIN,
            "_inplacevar_": self.inplacevar,
            "_with_": self.with_,
            "_mapping_": self.mapping,
            "_aug_item_": self.aug_item,
            "_aug_attr_": self.aug_attr,
            "_apply_": self.apply,
            "_print_": printer_factory,
            PROGRAM_MARK: True,
        }

    # -- refusals --------------------------------------------------------------------------------

    def refuse(self, rule: str, message: str) -> PolicyViolation:
        violation = PolicyViolation(rule, message, _program_line())
        self._record.append(violation)
        return violation

    # -- attribute reads ------------------------------------------------------------------------------

    def getattr(self, obj: Any, name: Any, default: Any = _MISSING) -> Any:
        """Attribute reads. On a module: its listed members only. On a value: no underscore or denied
        name, and nothing `_reach_refusal` refuses comes back. `default` as for getattr()."""
        name = _exact_str(name)
        if name in REVIEWED_SPECIAL_READS:
            return self._special(obj, name)
        if name[:1] == "_" or name in DENIED_NAMES:
            raise self.refuse("forbidden_attribute", f"access to attribute {name!r} is not allowed")
        if isinstance(obj, types.ModuleType):
            return self._member(obj, name)
        if name == "format" and (isinstance(obj, str) or (isinstance(obj, type) and issubclass(obj, str))):
            return self._safe_format(obj)
        if _denied_attribute(obj, name):
            raise self.refuse("forbidden_attribute", f"{_owner_name(obj)}.{name} is not allowed")
        value = getattr(obj, name) if default is _MISSING else getattr(obj, name, default)
        if name == "format" and type(value) is types.MethodType and value.__func__.__module__ != PROGRAM_MODULE:
            # A library's own format method may format with the program's template (UserString's does).
            raise self.refuse("forbidden_attribute", f"{_owner_name(obj)}.format is not allowed")
        return self.reached(value, f"{_owner_name(obj)}.{name}")

    def _special(self, obj: Any, name: str) -> Any:
        """`__name__` (only a string comes back), `__class__` (as `type(obj)`), `__init__` of super()
        or of the program's own class or object (`super().__init__(...)`: the program's object is
        made again, nothing else)."""
        if name == "__class__":
            return self._type(obj)
        value = getattr(obj, name)
        if name == "__name__":
            if type(value) is not str:
                raise self.refuse("forbidden_attribute", "a __name__ that is not a string is not allowed")
            return value
        owner = obj if isinstance(obj, type) else type(obj)
        if type(obj) is super or id(owner) in self._classes or (isinstance(obj, type) and obj.__module__ == "builtins"):
            # (A builtin class's __init__, `Exception.__init__(self, message)`, sets what its
            # constructor sets: the same as calling the class.)
            return self.reached(value, f"{_owner_name(obj)}.__init__")
        raise self.refuse("forbidden_attribute", f"{_owner_name(obj)}.__init__ is not allowed")

    def _member(self, module: types.ModuleType, name: str) -> Any:
        """`module.name`, when MEMBERS lists it; the guarded version where there is one."""
        module_name = module.__name__
        if name not in MEMBERS.get(module_name, ()):
            raise self.refuse(
                "forbidden_attribute", f"{module_name}.{name} is not allowed (not on the module's allowlist)"
            )
        guarded = self._guarded.get((module_name, name))
        if guarded is not None:
            return guarded() if name == "ndarray" else guarded
        value = getattr(module, name)
        if isinstance(value, types.ModuleType) and not module_allowed(value.__name__, self.spec.allowed_modules):
            raise self.refuse("forbidden_attribute", f"module {value.__name__!r} is not allowed")
        return value

    def _hasattr(self, obj: Any, name: Any) -> bool:
        try:
            self.getattr(obj, name)
        except AttributeError:
            return False
        return True

    # -- what may come back -----------------------------------------------------------------------------

    def reached(self, value: Any, how: str) -> Any:
        """`value`, when a program may hold it; refused otherwise. The real ndarray class comes back as
        its stand-in."""
        if type(value) in _PLAIN:
            return value
        reason = self._reach_refusal(value)
        if reason is not None:
            raise self.refuse("forbidden_attribute", f"{how}: {reason} is not allowed")
        if _is_str_format(value):  # super(S, s).format, a format bound and stored somewhere
            owner = getattr(value, "__self__", None)
            return self._safe_format(owner if isinstance(owner, str) else str)
        if isinstance(value, type) and value is _real_ndarray():
            return self._ndarray()
        return value

    def _reach_refusal(self, value: Any) -> str | None:
        """Why a program may not hold `value` (a kind of object, not a name), or None."""
        kind = type(value)
        if id(value) in self._denied_ids:
            return "a builtin the program was not given"
        if isinstance(value, types.ModuleType):  # an allowed one gives only its MEMBERS anyway
            return (
                None if module_allowed(value.__name__, self.spec.allowed_modules) else f"the module {value.__name__!r}"
            )
        if kind in _DENIED_KINDS:
            return f"a {kind.__name__} object"
        if kind is dict and self._is_namespace(value):
            return "a module's namespace"
        if isinstance(value, type):
            return _class_refusal(value)
        if kind is types.FunctionType:
            return _origin_refusal(getattr(value, "__module__", None), "function")
        if kind is types.MethodType:
            return self._reach_refusal(value.__func__)
        if kind is types.BuiltinFunctionType:
            owner = value.__self__
            if owner is sys:  # sys's own functions: the listed ones only (not _getframe, settrace...)
                return None if value.__name__ in MEMBERS["sys"] else f"the function sys.{value.__name__}"
            if isinstance(owner, types.ModuleType):
                return _origin_refusal(owner.__name__, "function")
            return None if owner is None else self._reach_refusal(owner)
        if kind is types.UnionType:  # `int | None`: made of classes the program held to write it
            return None
        if kind.__name__ in _CYTHON_FUNCTIONS and kind.__module__.startswith("_cython_"):
            # Their class is Cython's own; the function says which module it belongs to.
            return _origin_refusal(getattr(value, "__module__", None), "function")
        # Any other object: its class must come from where a program's classes may come from (no
        # _thread locks, cffi pointers, importlib's records...). Decided once per class.
        try:
            return self._kinds[kind]
        except KeyError:
            if _made_by_sympy(kind) or (kind.__module__ == "sys" and issubclass(kind, tuple)):
                reason = None  # sys's records of numbers (float_info, version_info) are named tuples
            else:
                reason = _origin_refusal(kind.__module__, f"{kind.__name__} object")
            self._kinds[kind] = reason
            return reason

    def _is_namespace(self, mapping: dict[Any, Any]) -> bool:
        """Is this dict a module's __dict__, sys.modules, or a builtins dict? Every module namespace
        holds "__name__" (set when the module is made), so other dicts cost one lookup."""
        if id(mapping) in self._denied_ids:
            return True
        return "__name__" in mapping and id(mapping) in self._module_namespaces()

    def _module_namespaces(self) -> frozenset[int]:
        """The ids of every loaded module's __dict__ (recomputed when a module was imported)."""
        # sys.modules only grows, but a failed import takes its own entry out again: the length and
        # the newest name together change whenever a module was added.
        key = (len(sys.modules), next(reversed(sys.modules.keys()), None))
        if key != self._namespaces_for:
            self._namespaces_for = key
            self._namespaces = frozenset(id(vars(m)) for m in list(sys.modules.values()) if m is not None)
        return self._namespaces

    # -- items, iteration, calls -------------------------------------------------------------------------

    def getitem(self, obj: Any, key: Any) -> Any:
        """`obj[key]`: what comes back passes the same check as an attribute read."""
        value = obj[key]
        if type(value) in _PLAIN:
            return value
        return self.reached(value, f"an item of {_owner_name(obj)}")

    def getiter(self, obj: Any) -> Any:
        """`for x in obj`: never over a module namespace, sys.modules or a builtins dict, and each item
        passes the check of an attribute read (a list a library built may hold what no read gives)."""
        if type(obj) is dict and self._is_namespace(obj):
            raise self.refuse("forbidden_attribute", "iterating over a module namespace is not allowed")
        iterator = iter(obj)
        if type(obj) in _PLAIN_ITEMS:
            return iterator
        return map(self._item, iterator)

    def _item(self, value: Any) -> Any:
        if type(value) in _PLAIN:
            return value
        return self.reached(value, "an item")

    def result(self, value: Any) -> Any:
        """What a call returned: checked as an attribute read is."""
        if type(value) in _PLAIN:
            return value
        return self.reached(value, "a call's result")

    def inplacevar(self, op: str, x: Any, y: Any) -> Any:
        """`n op= v` on a name: what the operator returns is checked, as a call's result."""
        return self.result(_INPLACE[op](x, y))

    def mapping(self, value: Any) -> dict[Any, Any]:
        """`{**value}`: a dict of its items, each key and value checked as an item (never a namespace)."""
        if type(value) is dict and self._is_namespace(value):
            raise self.refuse("forbidden_attribute", "unpacking a module namespace is not allowed")
        items = dict(value)
        for key, item in items.items():
            self._item(key)
            self._item(item)
        return items

    def with_(self, manager: Any) -> Any:
        """`with manager as x`: a stand-in whose `__enter__` checks what the manager's returns (as a call's
        result) and whose `__exit__` is the manager's."""
        return _CheckedContext(manager, self.result)

    def params(self, *values: Any) -> None:
        """A program function's arguments, on entry: checked as attribute reads are."""
        for value in values:
            if type(value) not in _PLAIN:
                self.reached(value, "an argument")

    def apply(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A call with *args or **kwargs: keyword names follow the name rules (no leading underscore),
        and what was unpacked into the call passes the check of an item."""
        for key in kwargs:
            if key[:1] == "_":
                raise self.refuse("forbidden_name", f"keyword argument {key!r} is not allowed")
        for value in args:
            self._item(value)
        for value in kwargs.values():
            self._item(value)
        return func(*args, **kwargs)

    def _type(self, *args: Any) -> Any:
        """type(x): the class of x, when a program may hold it (never a metaclass). type(name, bases,
        namespace) makes a class no transformer checked: refused."""
        if len(args) != 1:
            raise self.refuse("forbidden_call", "type() with three arguments (a new class) is not allowed")
        return self.reached(type(args[0]), "type()")

    # -- writes ------------------------------------------------------------------------------------

    def write(self, obj: Any) -> Any:
        """Item writes (`x[k] = v`): only to the program's own objects and plain containers, never to a
        module, a library class or function, a namespace, or a policy violation."""
        if isinstance(obj, types.ModuleType):
            raise self.refuse("module_write", f"writing to module {obj.__name__!r} is not allowed")
        if isinstance(obj, type) and id(obj) not in self._classes:
            raise self.refuse("class_write", f"writing to class {obj.__name__!r} is not allowed")
        if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType)) and not _program_function(obj):
            raise self.refuse("function_write", "writing to a library function is not allowed")
        if type(obj) is dict and self._is_namespace(obj):
            raise self.refuse("module_write", "writing to a module namespace is not allowed")
        if isinstance(obj, PolicyViolation):  # the record of a refusal, which the program may have caught
            raise self.refuse("module_write", "changing a policy violation is not allowed")
        return obj

    def write_attr(self, obj: Any, name: str) -> Any:
        """Attribute writes (`o.a = v`, `del o.a`), default deny: a program writes attributes only on
        what it made (its classes, their instances, its functions), and on the few library objects whose
        attributes are settings (`WRITABLE_ATTRIBUTES`: decimal's context precision...). A library
        object's attributes are its code's inputs: `cached_property.attrname` names the attribute its
        code then sets, by the real setattr, on any instance (`__array_interface__`, `__reduce_ex__`)."""
        self.write(obj)
        if isinstance(obj, (type, types.FunctionType)) or self._writable_instance(type(obj)):
            return obj
        if name in _writable_attributes(type(obj)):
            return obj
        raise self.refuse(
            "object_write",
            f"writing attribute {name!r} of a {type(obj).__name__} object is not allowed (the program did not make it)",
        )

    def _writable_instance(self, cls: type) -> bool:
        """Are instances of `cls` the program's own: a class its `class` statement made, whose every
        base is the program's too, a builtin class (whose state is in C, read by no name) or a
        reviewed library base (`WRITABLE_BASES`)? Exact builtin objects (an exception) have nothing a
        library reads either."""
        known = self._writable_kinds.get(cls)
        if known is None:
            if id(cls) not in self._classes:
                known = cls.__module__ == "builtins" and cls is not type and not issubclass(cls, type)
            else:
                known = all(
                    id(base) in self._classes
                    or (base.__module__ == "builtins" and not issubclass(base, type))
                    or base in _writable_bases()
                    or base.__module__ in WRITABLE_BASE_MODULES
                    for base in cls.__mro__
                )
            self._writable_kinds[cls] = known
        return known

    def _build_class(self, func: Any, name: Any, *bases: Any, **kwargs: Any) -> Any:
        """A `class` statement: the class is noted as the program's (by identity, never by its
        `__module__`, which library factories let a caller choose)."""
        cls = builtins.__build_class__(func, name, *bases, **kwargs)
        if isinstance(cls, type):
            self._classes[id(cls)] = cls
        return cls

    def aug_item(self, obj: Any, key: Any, op: str, value: Any) -> None:
        self.write(obj)[key] = self.inplacevar(op, self.getitem(obj, key), value)

    def aug_attr(self, obj: Any, name: str, op: str, value: Any) -> None:
        setattr(self.write_attr(obj, name), name, self.inplacevar(op, self.getattr(obj, name), value))

    # -- imports -----------------------------------------------------------------------------------

    def import_(
        self,
        name: str,
        globals: Any = None,
        locals: Any = None,
        fromlist: Sequence[str] | None = (),
        level: int = 0,
    ) -> types.ModuleType:
        """Imports: allowlisted modules only. A from-import gets a fresh module object that holds only
        the names asked for, each read through the member guard (so `from operator import getitem`
        gets the guarded one and `from numpy import load` is refused)."""
        if level == 0 and not _import_statement(_real_getframe(1)):
            return self._implicit_import(name, fromlist)
        name = _exact_str(name)
        if level != 0 or not module_allowed(name, self.spec.allowed_modules):
            raise self.refuse("forbidden_import", f"import of {name!r} is not allowed")
        module = __import__(name, None, None, fromlist or (), 0)
        if name.partition(".")[0] == "sympy":
            close_sympy_escape_hatches()
        if not fromlist:
            return module
        selected = types.ModuleType(module.__name__)
        for item in fromlist:
            item = _exact_str(item)
            if item == "*":
                # Every listed member, each through the member guard; the statement then binds the
                # module's names that do not start with "_": only these.
                for member in MEMBERS.get(module.__name__, ()):
                    setattr(selected, member, self._member(module, member))
                continue
            if item[:1] == "_":
                raise self.refuse("forbidden_attribute", f"access to attribute {item!r} is not allowed")
            setattr(selected, item, self._member(module, item))
        return selected

    def _implicit_import(self, name: str, fromlist: Sequence[str] | None) -> types.ModuleType:
        """A library's own lazy import made from C in the middle of a call (`ndarray.sum` imports
        numpy._core._methods): CPython routes it through the `__import__` of the frame on top, the
        program's. The module goes back to the library, not to the program; it passes when it stays
        inside an allowlisted package or is a helper that allowlisted C modules import by name."""
        top = name.partition(".")[0]
        if top == "sys" or not (module_allowed(top, self.spec.allowed_modules) or name in IMPLICIT_IMPORTS):
            # (sys is allowed to a program's own import, for its listed members only.)
            raise self.refuse("forbidden_import", f"import of {name!r} is not allowed")
        return __import__(name, None, None, fromlist or (), 0)

    # -- str.format ----------------------------------------------------------------------------------

    def _safe_format(self, owner: Any) -> Callable[..., str]:
        """str.format without attribute or index lookups in its fields. `owner` is a string (its
        bound format, the template checked now) or the class str (str.format(template, ...), the
        template checked at the call)."""
        if isinstance(owner, str):
            template = str.__str__(owner)
            self._check_template(template)
            return lambda *args, **kwargs: str.format(template, *args, **kwargs)

        def unbound_format(template: str, /, *args: Any, **kwargs: Any) -> str:
            if not isinstance(template, str):
                raise TypeError("descriptor 'format' for 'str' objects needs a str")
            template = str.__str__(template)
            self._check_template(template)
            return str.format(template, *args, **kwargs)

        return unbound_format

    def _check_template(self, template: str, depth: int = 0) -> None:
        """Refuse '{0.attr}' and '{0[key]}', also inside nested specs ('{0:{1.attr}}')."""
        for _, field_name, spec, _ in string.Formatter().parse(template):
            if field_name and ("." in field_name or "[" in field_name):
                raise self.refuse("forbidden_attribute", "attribute lookups in format fields are not allowed")
            if spec and "{" in spec and depth < 2:
                self._check_template(spec, depth + 1)

    # -- what a program is given --------------------------------------------------------------------------

    def _make_builtins(self) -> dict[str, Any]:
        allowed = dict(safe_builtins)
        for name in ("setattr", "delattr", "_getattr_"):
            allowed.pop(name, None)
        allowed.update({name: getattr(builtins, name) for name in _EXTRA_BUILTINS})
        allowed.update(
            {
                "__import__": self.import_,
                "getattr": self.getattr,
                "hasattr": self._hasattr,
                "sorted": lambda iterable, **kw: sorted(iter(iterable), **kw),
                "zip": lambda *its, **kw: zip(*map(iter, its), **kw),  # noqa: B905 (the program's `strict` passes)
                "tuple": lambda iterable=(): tuple(iter(iterable)),
                "type": self._type,
                "__build_class__": self._build_class,
            }
        )
        for name in _DENIED_BUILTINS:
            allowed[name] = self._refuser(name)
        return allowed

    def _make_guarded(self) -> dict[tuple[str, str], Any]:
        """Members handed out as guarded versions: they read items or attributes by a key or a name
        chosen at run time, so they pass the same guards as `x[k]` and `x.name`."""
        getattr_ = self.getattr
        getitem = self.getitem

        def attrgetter(*names: str) -> Callable[[Any], Any]:
            def get(obj: Any) -> Any:
                values = []
                for dotted in names:
                    value = obj
                    for part in _exact_str(dotted).split("."):
                        value = getattr_(value, part)
                    values.append(value)
                return values[0] if len(values) == 1 else tuple(values)

            return get

        def itemgetter(*keys: Any) -> Callable[[Any], Any]:
            def get(obj: Any) -> Any:
                return getitem(obj, keys[0]) if len(keys) == 1 else tuple(getitem(obj, key) for key in keys)

            return get

        def methodcaller(name: str, /, *args: Any, **kwargs: Any) -> Callable[[Any], Any]:
            return lambda obj: getattr_(obj, name)(*args, **kwargs)

        refuse = self.refuse
        copy_refusal = self._copy_refusal

        def shallow_copy(x: Any) -> Any:
            reason = copy_refusal(x, deep=False)
            if reason is not None:
                raise refuse("forbidden_call", f"copy.copy of {reason} is not allowed (not reviewed)")
            return copy.copy(x)

        def deepcopy(x: Any, memo: Any = None) -> Any:
            # deepcopy keeps every original it copied alive in memo[id(memo)]: a memo of the
            # program's own would hand it a library object's real __dict__.
            if memo is not None:
                raise refuse("forbidden_call", "copy.deepcopy with a memo of the program's is not allowed")
            reason = copy_refusal(x, deep=True)
            if reason is not None:
                raise refuse("forbidden_call", f"copy.deepcopy of {reason} is not allowed (not reviewed)")
            return copy.deepcopy(x)

        classes = self._classes

        def dataclass(cls: Any = None, /, **kwargs: Any) -> Any:
            import dataclasses

            def wrap(original: Any) -> Any:
                if id(original) not in classes:  # it sets attributes on the class: only on the program's
                    raise refuse("class_write", "dataclasses.dataclass of a class the program did not make")
                # dataclass looks string annotations (`from __future__ import annotations`) up in the
                # class's module: the program's is an empty stand-in, in this fork's sys.modules only.
                sys.modules.setdefault(PROGRAM_MODULE, types.ModuleType(PROGRAM_MODULE))
                made = dataclasses.dataclass(**kwargs)(original)
                if isinstance(made, type) and id(original) in classes:
                    classes[id(made)] = made  # slots=True: a new class, made from the program's own
                return made

            return wrap if cls is None else wrap(cls)

        def checked_copy(name: str) -> Callable[..., Any]:
            def copied(obj: Any, **kwargs: Any) -> Any:
                import dataclasses

                reason = copy_refusal(obj, deep=True)
                if reason is not None:
                    raise refuse("forbidden_call", f"dataclasses.{name} of {reason} is not allowed (not reviewed)")
                return getattr(dataclasses, name)(obj, **kwargs)

            return copied

        return {
            ("dataclasses", "dataclass"): dataclass,
            ("dataclasses", "asdict"): checked_copy("asdict"),
            ("dataclasses", "astuple"): checked_copy("astuple"),
            ("operator", "getitem"): getitem,
            ("operator", "itemgetter"): itemgetter,
            ("operator", "attrgetter"): attrgetter,
            ("operator", "methodcaller"): methodcaller,
            ("copy", "copy"): shallow_copy,
            ("copy", "deepcopy"): deepcopy,
            ("numpy", "ndarray"): self._ndarray,
        }

    def _copy_refusal(self, root: Any, *, deep: bool) -> str | None:
        """What a copy of `root` would rebuild through a protocol the policy has not reviewed, or None.
        copy and deepcopy rebuild an object from what its `__reduce_ex__` returns (a callable, its
        arguments, a state they write with the real setattr or `__dict__.update`): default deny, only
        plain data, the program's own objects (their state is their `__dict__`, of checked names) and
        the library classes of `REVIEWED_COPIES` (their own hooks) are copied. Deep: everything it
        holds, up to COPY_REVIEW_LIMIT objects."""
        stack, seen = [root], set()
        while stack:
            value = stack.pop()
            kind = type(value)
            if kind in _COPY_ATOMIC or id(value) in seen:
                continue
            seen.add(id(value))
            if len(seen) > COPY_REVIEW_LIMIT:
                return f"more than {COPY_REVIEW_LIMIT} objects"
            children: Any = ()
            if kind in (list, tuple, set, frozenset):
                children = value
            elif kind is dict:
                if self._is_namespace(value):
                    return "a module's namespace"
                children = [*value.keys(), *value.values()]
            elif isinstance(value, type) or kind in (types.FunctionType, types.BuiltinFunctionType):
                continue  # copied as the same object
            elif id(kind) in self._classes and self._writable_instance(kind):
                state = getattr(value, "__dict__", {})
                if type(state) is not dict or any(type(key) is not str or key[:1] == "_" for key in state):
                    return f"a {kind.__name__} object with attributes the program could not name"
                children = [*state.values(), *(value if isinstance(value, (list, tuple, set, frozenset, dict)) else ())]
                if isinstance(value, dict):
                    children.extend(value.values())
            else:
                reviewed = _reviewed_copy(kind)
                if reviewed is None:
                    return f"a {kind.__name__} object"
                children = reviewed(value)
            if deep:
                stack.extend(children)
        return None

    def _ndarray(self) -> type:
        """The stand-in for numpy.ndarray: isinstance() and issubclass() answer as for the real class,
        calling it (the constructor takes a buffer, an offset and strides) is refused, and so is
        calling any class a program derives from it."""
        if self._ndarray_stand_in is None:
            found = _real_ndarray()
            assert found is not None, "numpy.ndarray is asked for only once numpy is imported"
            real: type = found
            refuse = self.refuse

            class _StandInMeta(type):
                def __instancecheck__(cls, obj: Any) -> bool:
                    return isinstance(obj, real)

                def __subclasscheck__(cls, sub: Any) -> bool:
                    return isinstance(sub, type) and issubclass(sub, real)

                def __call__(cls, *args: Any, **kwargs: Any) -> Any:
                    raise refuse("forbidden_call", "the numpy.ndarray constructor is not allowed; use numpy.array")

                def __getattr__(cls, name: str) -> Any:
                    return getattr(real, name)

            self._ndarray_stand_in = _StandInMeta("ndarray", (), {"__module__": "numpy"})
        return self._ndarray_stand_in

    def _refuser(self, name: str) -> Callable[..., Any]:
        def refused(*args: Any, **kwargs: Any) -> Any:
            raise self.refuse("forbidden_builtin", f"{name}() is not allowed")

        refused.__name__ = name
        return refused


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


def _origin_refusal(module_name: Any, what: str) -> str | None:
    # This module's own functions are the guarded versions a program is given anyway; its classes and
    # their instances (the Guards, their record) are not the program's.
    if module_name == __name__:
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
