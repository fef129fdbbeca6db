"""The restricted policy's compile-time half: RestrictedPython's transformer with potrun's reviewed rules
(see restricted.py's docstring), the special methods a program's class may define, and
`compile_restricted_program`.
"""

from __future__ import annotations

import ast
import builtins
import operator
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, cast

from RestrictedPython.transformer import RestrictingNodeTransformer

PROGRAM_MODULE = "__potrun_program__"
_real_compile = builtins.compile  # (the real one: the library guards replace builtins.compile later)
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
