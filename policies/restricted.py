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
  iterating over a module namespace or sys.modules is refused.
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
import string
import sys
import tokenize
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

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
    PolicySpec,
    module_allowed,
)
from potrun.policies.members import MEMBERS

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
        """A name's own checks find `forbidden_name` violations."""
        with self._checking("forbidden_name"):
            super().check_name(node, name, allow_magic_methods)

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        """The attribute's name is checked first (`forbidden_name`); what it is read from is visited
        as any other node."""
        with self._checking("forbidden_name"):
            return super().visit_Attribute(node)

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
    return compile(ast.fix_missing_locations(tree), FILENAME, "exec")


class Guards:
    """The run-time half of the policy. One instance per runner; `begin()` resets it per program."""

    def __init__(self, spec: PolicySpec) -> None:
        self.spec = spec
        self.violations: list[PolicyViolation] = []
        self.imported: set[str] = set()
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

    def begin(self) -> None:
        self.violations.clear()
        self.imported.clear()
        _active[:] = [self]

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
            "_inplacevar_": _inplacevar,
            "_aug_item_": self.aug_item,
            "_aug_attr_": self.aug_attr,
            "_apply_": self.apply,
            "_print_": printer_factory,
        }

    # -- refusals --------------------------------------------------------------------------------

    def refuse(self, rule: str, message: str) -> PolicyViolation:
        violation = PolicyViolation(rule, message, _program_line())
        self.violations.append(violation)
        return violation

    # -- attribute reads ------------------------------------------------------------------------------

    def getattr(self, obj: Any, name: Any, default: Any = _MISSING) -> Any:
        """Attribute reads. On a module: its listed members only. On a value: no underscore or denied
        name, and nothing `_reach_refusal` refuses comes back. `default` as for getattr()."""
        name = _exact_str(name)
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
            if isinstance(owner, types.ModuleType):
                return _origin_refusal(owner.__name__, "function")
            return None if owner is None else self._reach_refusal(owner)
        if kind.__name__ in _CYTHON_FUNCTIONS and kind.__module__.startswith("_cython_"):
            # Their class is Cython's own; the function says which module it belongs to.
            return _origin_refusal(getattr(value, "__module__", None), "function")
        # Any other object: its class must come from where a program's classes may come from (no
        # _thread locks, cffi pointers, importlib's records...).
        return _origin_refusal(getattr(kind, "__module__", None), f"{kind.__name__} object")

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
        """`for x in obj`: never over a module namespace, sys.modules or a builtins dict."""
        if type(obj) is dict and self._is_namespace(obj):
            raise self.refuse("forbidden_attribute", "iterating over a module namespace is not allowed")
        return iter(obj)

    def apply(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A call with *args or **kwargs: keyword names follow the name rules (no leading underscore)."""
        for key in kwargs:
            if key[:1] == "_":
                raise self.refuse("forbidden_name", f"keyword argument {key!r} is not allowed")
        return func(*args, **kwargs)

    def _type(self, *args: Any) -> Any:
        """type(x): the class of x, when a program may hold it (never a metaclass). type(name, bases,
        namespace) makes a class no transformer checked: refused."""
        if len(args) != 1:
            raise self.refuse("forbidden_call", "type() with three arguments (a new class) is not allowed")
        return self.reached(type(args[0]), "type()")

    # -- writes ------------------------------------------------------------------------------------

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
        if type(obj) is dict and self._is_namespace(obj):
            raise self.refuse("module_write", "writing to a module namespace is not allowed")
        if isinstance(obj, PolicyViolation):  # the record of a refusal, which the program may have caught
            raise self.refuse("module_write", "changing a policy violation is not allowed")
        return obj

    def aug_item(self, obj: Any, key: Any, op: str, value: Any) -> None:
        self.write(obj)[key] = _INPLACE[op](self.getitem(obj, key), value)

    def aug_attr(self, obj: Any, name: str, op: str, value: Any) -> None:
        setattr(self.write(obj), name, _INPLACE[op](self.getattr(obj, name), value))

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
        if level == 0 and not _import_statement(sys._getframe(1)):
            return self._implicit_import(name, fromlist)
        name = _exact_str(name)
        if level != 0 or not module_allowed(name, self.spec.allowed_modules):
            raise self.refuse("forbidden_import", f"import of {name!r} is not allowed")
        module = __import__(name, None, None, fromlist or (), 0)
        self.imported.add(name.partition(".")[0])
        if name.partition(".")[0] == "sympy":
            close_sympy_escape_hatches()
        if not fromlist:
            return module
        selected = types.ModuleType(module.__name__)
        for item in fromlist:
            item = _exact_str(item)
            if item == "*":
                raise self.refuse("forbidden_import", f"'from {name} import *' is not allowed")
            if item[:1] == "_":
                raise self.refuse("forbidden_attribute", f"access to attribute {item!r} is not allowed")
            setattr(selected, item, self._member(module, item))
        return selected

    def _implicit_import(self, name: str, fromlist: Sequence[str] | None) -> types.ModuleType:
        """A library's own lazy import made from C in the middle of a call (`ndarray.sum` imports
        numpy._core._methods): CPython routes it through the `__import__` of the frame on top, the
        program's. The module goes back to the library, not to the program; it passes when it stays
        inside an allowlisted package or is a helper that allowlisted C modules import by name."""
        if not (module_allowed(name.partition(".")[0], self.spec.allowed_modules) or name in IMPLICIT_IMPORTS):
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

        def deepcopy(x: Any, memo: Any = None) -> Any:
            # deepcopy keeps every original it copied alive in memo[id(memo)]: a memo of the
            # program's own would hand it a library object's real __dict__.
            if memo is not None:
                raise refuse("forbidden_call", "copy.deepcopy with a memo of the program's is not allowed")
            return copy.deepcopy(x)

        return {
            ("operator", "getitem"): getitem,
            ("operator", "itemgetter"): itemgetter,
            ("operator", "attrgetter"): attrgetter,
            ("operator", "methodcaller"): methodcaller,
            ("copy", "deepcopy"): deepcopy,
            ("numpy", "ndarray"): self._ndarray,
        }

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
    {int, float, complex, bool, str, bytes, type(None), tuple, list, set, frozenset, range, slice}
)

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
    {name.partition(".")[0] for name in ALLOWED_MODULES}
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
    return _origin_refusal(getattr(cls, "__module__", None), "class")


def _origin_refusal(module_name: Any, what: str) -> str | None:
    # This module's own functions are the guarded versions a program is given anyway.
    if module_name == __name__:
        return None
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
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename == FILENAME:
            return frame.f_lineno
        frame = frame.f_back
    return None


# The Guards whose program is running: sympy's patched entry points record their refusals there.
_active: list[Guards] = []


def _refuse_active(rule: str, message: str) -> PolicyViolation:
    if _active:
        return _active[0].refuse(rule, message)
    return PolicyViolation(rule, message, _program_line())


_sympy_closed = False


def close_sympy_escape_hatches() -> None:
    """sympy runs code it makes from strings: parse_expr() eval()s a string (sympify, and every
    function given a string, reach it), and lambdify() exec()s source printed from an expression, in
    which a symbol or function name is printed as written (nsolve, Sum.evalf and CRootOf.evalf call
    it). In a restricted runner parse_expr is refused, and lambdify runs only on expressions made of
    sympy's own classes whose names are plain identifiers. Both are replaced in every sympy module
    that holds them, once per process (3 ms here): a worker of the restricted policy may call this
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
    frame: types.FrameType | None = sys._getframe(2)
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
