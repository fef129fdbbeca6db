"""The restricted policy's enforcement: RestrictedPython compile plus runtime guards.

Compile time: RestrictedPython's default-deny AST transformer (no dunder names, no frame attributes,
no unknown node types) extended to accept `x[i] += v` and `obj.a += v`, which real programs use.
Run time: guards for attribute reads and writes, imports, iteration and printing. Every refusal is
recorded (a program cannot hide one with try/except) and the program's status is `policy_violation`.
"""

from __future__ import annotations

import ast
import builtins
import dis
import operator
import string
import sys
import types
from collections.abc import Callable, Iterable
from typing import Any

from RestrictedPython import RestrictingNodeTransformer, safe_builtins
from RestrictedPython.Guards import guarded_iter_unpack_sequence, guarded_unpack_sequence

from potrun.policies import DENIED_ATTRIBUTES, DENIED_NAMES, PolicySpec, module_allowed

PROGRAM_MODULE = "__potrun_program__"
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
    """RestrictedPython's transformer, plus augmented assignment to items and attributes."""

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
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

    def _helper(self, name: str, args: list[ast.expr]) -> ast.Call:
        visited = [self.visit(arg) for arg in args]
        return ast.Call(func=ast.Name(name, ast.Load()), args=visited, keywords=[])

    @staticmethod
    def _slice_to_expr(node: ast.expr) -> ast.expr:
        if not isinstance(node, ast.Slice):
            return node
        parts = [part or ast.Constant(None) for part in (node.lower, node.upper, node.step)]
        return ast.Call(func=ast.Name("slice", ast.Load()), args=parts, keywords=[])


_AUG_OPS: dict[type, str] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.Pow: "**", ast.MatMult: "@", ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&",
    ast.BitOr: "|", ast.BitXor: "^",
}  # fmt: skip

_INPLACE: dict[str, Callable[[Any, Any], Any]] = {
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow, "@=": operator.imatmul,
    "<<=": operator.ilshift, ">>=": operator.irshift, "&=": operator.iand, "|=": operator.ior,
    "^=": operator.ixor,
}  # fmt: skip


def compile_restricted_program(source: str) -> types.CodeType:
    """Parse, check and compile. Raises SyntaxError or PolicyViolation (the first one, with its line)."""
    tree = ast.parse(source, FILENAME, "exec")
    errors: list[str] = []
    _Transformer(errors=errors, warnings=[], used_names={}).visit(tree)
    if errors:
        raise _violation_from_message(errors[0])
    return compile(tree, FILENAME, "exec")


# Opcodes the fast path leaves to RestrictedPython: attribute writes, class patterns (attribute reads by
# string), except* and star imports.
_SLOW_OPCODES = bytes(
    dis.opmap[name]
    for name in ("STORE_ATTR", "DELETE_ATTR", "MATCH_CLASS", "CHECK_EG_MATCH", "IMPORT_STAR")
    if name in dis.opmap
)


def compile_checked_program(source: str, suspicious_names: frozenset[str]) -> types.CodeType | None:
    """The fast path: plain compile, then a check of every name and opcode in the code objects.

    A program that uses no underscore name, no name that is refused anywhere (as an attribute of an
    allowed module, or listed in DENIED_NAMES / DENIED_ATTRIBUTES) and no attribute write needs none of
    RestrictedPython's guards: its remaining reach is the restricted builtins and the guarded import,
    which it gets either way. Returns None when the program needs the full RestrictedPython path
    (which then decides); that costs time, never safety.
    """
    code = compile(source, FILENAME, "exec")
    stack = [code]
    while stack:
        current = stack.pop()
        names = current.co_names + current.co_varnames + current.co_cellvars + current.co_freevars
        if not suspicious_names.isdisjoint(names) or any(name[:1] == "_" for name in names):
            return None
        opcodes = current.co_code[::2]
        if any(op in opcodes for op in _SLOW_OPCODES):
            return None
        stack.extend(const for const in current.co_consts if isinstance(const, types.CodeType))
    return code


def suspicious_names(allowed: frozenset[str]) -> frozenset[str]:
    """Every name the fast path must not let through: refused attribute names; the names under which
    an allowed, imported module exposes a module or builtin that a program may not reach; and the
    names whose objects are not known yet, since only importing would tell: the attributes a module
    makes on first use (numpy's lazy submodules) and the allowed modules not imported yet (a worker
    imports some only once a program has used them). A program that uses one of those takes the
    guarded path, whatever the module turns out to hold."""
    names = set(DENIED_NAMES) | {"format", "format_map", "getattr", "hasattr"}
    for denied in DENIED_ATTRIBUTES.values():
        names |= denied
    denied_objects = {id(getattr(builtins, name)) for name in _DENIED_BUILTINS} | {id(builtins)}
    for module_name, module in list(sys.modules.items()):
        if module is None or not module_allowed(module_name, allowed):
            continue
        namespace = vars(module)
        names.update(name for name in _listed_names(module) if name not in namespace)
        for attribute, value in list(namespace.items()):
            if isinstance(value, types.ModuleType) and not module_allowed(value.__name__, allowed):
                names.add(attribute)
            elif id(value) in denied_objects:
                names.add(attribute)
    for module_name in allowed - sys.modules.keys():
        names.add(module_name)
        names.update(_unimported_part(module_name))
    return frozenset(names)


def _unimported_part(module_name: str) -> list[str]:
    """The parts of a module's name below its deepest imported ancestor: ["random"] for numpy.random
    while numpy is imported and numpy.random is not."""
    parts = module_name.split(".")
    for depth in range(len(parts), 0, -1):
        if ".".join(parts[:depth]) in sys.modules:
            return parts[depth:]
    return parts


def _listed_names(module: types.ModuleType) -> list[str]:
    """The names a module lists (its __dir__, which may name attributes it makes on first use)."""
    try:
        return [name for name in dir(module) if isinstance(name, str)]
    except Exception:
        return []


def _violation_from_message(message: str) -> PolicyViolation:
    """RestrictedPython reports 'Line N: text'; keep the line and name the rule by its kind."""
    line = None
    head, sep, text = message.partition(": ")
    if sep and head.startswith("Line ") and head[5:].isdigit():
        line = int(head[5:])
        message = text
    rule = "forbidden_name" if "name" in message else "forbidden_syntax"
    return PolicyViolation(rule, message, line)


class Guards:
    """The run-time half of the policy. One instance per runner; `begin()` resets it per program."""

    def __init__(self, spec: PolicySpec) -> None:
        self.spec = spec
        self.violations: list[PolicyViolation] = []
        self.imported: set[str] = set()
        self._denied_objects = {id(getattr(builtins, n)) for n in _DENIED_BUILTINS}
        self.builtins = self._make_builtins()

    def begin(self) -> None:
        self.violations.clear()
        self.imported.clear()

    def new_globals(self, printer_factory: Callable[..., Any]) -> dict[str, Any]:
        return {
            "__builtins__": self.builtins,
            "__name__": PROGRAM_MODULE,
            "__metaclass__": type,
            "_getattr_": self.getattr,
            "_getitem_": _getitem,
            "_getiter_": iter,
            "_iter_unpack_sequence_": guarded_iter_unpack_sequence,
            "_unpack_sequence_": guarded_unpack_sequence,
            "_write_": self.write,
            "_inplacevar_": _inplacevar,
            "_aug_item_": self.aug_item,
            "_aug_attr_": self.aug_attr,
            "_apply_": _apply,
            "_print_": printer_factory,
        }

    # -- refusals --------------------------------------------------------------------------------

    def refuse(self, rule: str, message: str) -> PolicyViolation:
        violation = PolicyViolation(rule, message, _program_line())
        self.violations.append(violation)
        return violation

    # -- guards ------------------------------------------------------------------------------------

    def getattr(self, obj: Any, name: str, default: Any = _MISSING) -> Any:
        """Attribute reads: no dunders, no frames, no escape hatches of allowed modules."""
        if name.startswith("_") or name in DENIED_NAMES:
            raise self.refuse("forbidden_attribute", f"access to attribute {name!r} is not allowed")
        if _denied_attribute(obj, name):
            raise self.refuse("forbidden_attribute", f"{_owner_name(obj)}.{name} is not allowed")
        if name == "format" and isinstance(obj, str):
            return self._safe_format(obj)
        value = getattr(obj, name) if default is _MISSING else getattr(obj, name, default)
        self._check_reached(value, name)
        return value

    def write(self, obj: Any) -> Any:
        """Attribute and item writes: only to the program's own objects and plain containers."""
        if isinstance(obj, types.ModuleType):
            raise self.refuse("module_write", f"writing to module {obj.__name__!r} is not allowed")
        if isinstance(obj, type) and obj.__module__ != PROGRAM_MODULE:
            raise self.refuse("class_write", f"writing to class {obj.__name__!r} is not allowed")
        if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType)) and (
            getattr(obj, "__module__", None) != PROGRAM_MODULE
        ):
            raise self.refuse("function_write", "writing to a library function is not allowed")
        return obj

    def aug_item(self, obj: Any, key: Any, op: str, value: Any) -> None:
        self.write(obj)[key] = _INPLACE[op](obj[key], value)

    def aug_attr(self, obj: Any, name: str, op: str, value: Any) -> None:
        setattr(self.write(obj), name, _INPLACE[op](self.getattr(obj, name), value))

    def import_(
        self,
        name: str,
        globals: Any = None,
        locals: Any = None,
        fromlist: Iterable[str] | None = (),
        level: int = 0,
    ) -> types.ModuleType:
        """Imports: allowlisted modules only; from-imports pass the attribute rules too."""
        if level == 0 and not _import_statement(sys._getframe(1)):
            return self._implicit_import(name, fromlist)
        if level != 0 or not module_allowed(name, self.spec.allowed_modules):
            raise self.refuse("forbidden_import", f"import of {name!r} is not allowed")
        module = __import__(name, None, None, fromlist or (), 0)
        self.imported.add(name.partition(".")[0])
        if name.partition(".")[0] == "sympy":
            _close_sympy_string_parsing(self.refuse)
        for item in fromlist or ():
            if item == "*":
                raise self.refuse("forbidden_import", f"'from {name} import *' is not allowed")
            self.getattr(module, item, None)  # refuses denied names and modules
        return module

    def _implicit_import(self, name: str, fromlist: Iterable[str] | None) -> types.ModuleType:
        """A library's own lazy import made from C in the middle of a call (`ndarray.sum` imports
        numpy._core._methods): CPython routes it through the `__import__` of the frame on top, the
        program's. The module goes back to the library, not to the program; it passes when it stays
        inside an allowlisted package or is a helper that allowlisted C modules import by name."""
        if not (module_allowed(name.partition(".")[0], self.spec.allowed_modules) or name in IMPLICIT_IMPORTS):
            raise self.refuse("forbidden_import", f"import of {name!r} is not allowed")
        return __import__(name, None, None, fromlist or (), 0)

    def _check_reached(self, value: Any, name: str) -> None:
        if isinstance(value, types.ModuleType) and not module_allowed(value.__name__, self.spec.allowed_modules):
            raise self.refuse("forbidden_attribute", f"module {value.__name__!r} is not allowed")
        if id(value) in self._denied_objects:
            raise self.refuse("forbidden_attribute", f"{name!r} is not allowed")

    def _safe_format(self, template: str) -> Callable[..., str]:
        """str.format without attribute or index lookups in its fields ('{0.__class__}')."""
        for _, field_name, _, _ in string.Formatter().parse(template):
            if field_name and ("." in field_name or "[" in field_name):
                raise self.refuse("forbidden_attribute", "attribute lookups in format fields are not allowed")
        return template.format

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
                "zip": lambda *its, **kw: zip(*map(iter, its), **kw),
                "tuple": lambda iterable=(): tuple(iter(iterable)),
                "type": _one_argument_type,
            }
        )
        for name in _DENIED_BUILTINS:
            allowed[name] = self._refuser(name)
        return allowed

    def _hasattr(self, obj: Any, name: str) -> bool:
        try:
            self.getattr(obj, name)
        except AttributeError:
            return False
        return True

    def _refuser(self, name: str) -> Callable[..., Any]:
        def refused(*args: Any, **kwargs: Any) -> Any:
            raise self.refuse("forbidden_builtin", f"{name}() is not allowed")

        refused.__name__ = name
        return refused


# Builtins a program needs beyond RestrictedPython's safe set (which dropped the C-iterating ones).
_EXTRA_BUILTINS = (
    "all", "any", "bin", "dict", "divmod", "enumerate", "filter", "format", "frozenset", "iter",
    "len", "list", "map", "max", "min", "next", "object", "print", "range", "reversed", "round",
    "set", "sum", "isinstance", "issubclass", "callable", "abs", "chr", "ord", "hex", "oct", "pow",
    "property", "staticmethod", "classmethod", "super", "ExceptionGroup", "StopAsyncIteration",
    "RecursionError", "ZeroDivisionError",
)  # fmt: skip

# Refused with a policy violation (not a NameError), so the verdict names the rule.
_DENIED_BUILTINS = (
    "open", "exec", "eval", "compile", "globals", "locals", "vars", "input", "breakpoint", "help",
    "exit", "quit", "memoryview", "dir", "id",
)  # fmt: skip


# Standard-library helpers that allowlisted C modules import lazily by a fixed name:
# datetime.strptime needs _strptime, date.today() and datetime.now() need time.
IMPLICIT_IMPORTS = frozenset({"_strptime", "time"})
_IMPORT_NAME = dis.opmap["IMPORT_NAME"]


def _import_statement(frame: types.FrameType) -> bool:
    """Is this a program frame stopped at an `import` statement (not inside a call into C)?"""
    code = frame.f_code
    return code.co_filename == FILENAME and code.co_code[frame.f_lasti] == _IMPORT_NAME


def _one_argument_type(obj: Any) -> type:
    return type(obj)


def _getitem(obj: Any, key: Any) -> Any:
    return obj[key]


def _apply(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return func(*args, **kwargs)


def _inplacevar(op: str, x: Any, y: Any) -> Any:
    return _INPLACE[op](x, y)


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
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename == FILENAME:
            return frame.f_lineno
        frame = frame.f_back
    return None


_sympy_closed = False


def _close_sympy_string_parsing(refuse: Callable[[str, str], PolicyViolation]) -> None:
    """sympy turns strings into expressions with eval(); in a restricted runner it may not."""
    global _sympy_closed
    if _sympy_closed:
        return
    import sympy.parsing.sympy_parser as parser

    def parse_expr(*args: Any, **kwargs: Any) -> Any:
        raise refuse("forbidden_call", "sympy parses strings with eval(); not allowed")

    parser.parse_expr = parse_expr
    _sympy_closed = True
