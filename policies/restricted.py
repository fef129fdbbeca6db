"""The restricted policy's enforcement: RestrictedPython compile plus run-time guards, default deny.

(Its parts: the compile-time half in restricted_compile.py, what a program may hold in
restricted_reach.py, library code's guards, copies and sympy's closed paths in restricted_library.py;
the Guards here. The names below are imported from here.)

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

import builtins
import copy
import os
import string
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any

from RestrictedPython.Guards import (
    guarded_iter_unpack_sequence,
    guarded_unpack_sequence,
    safe_builtins,
)

from potrun.policies import (
    DENIED_NAMES,
    WRITABLE_BASE_MODULES,
    PolicySpec,
    module_allowed,
)
from potrun.policies.members import MEMBERS
from potrun.policies.restricted_compile import (
    _INPLACE,
    _MISSING,
    PROGRAM_MARK,
    PROGRAM_MODULE,
    REVIEWED_SPECIAL_READS,
    PolicyViolation,
)
from potrun.policies.restricted_compile import FILENAME as FILENAME
from potrun.policies.restricted_compile import REVIEWED_SPECIAL_METHODS as REVIEWED_SPECIAL_METHODS
from potrun.policies.restricted_compile import compile_restricted_program as compile_restricted_program
from potrun.policies.restricted_library import (
    _COPY_ATOMIC,
    COPY_REVIEW_LIMIT,
    _install_library_guards,
    _program_function,
    _program_line,
    _real_getframe,
    _reviewed_copy,
    _writable_attributes,
    _writable_bases,
    close_sympy_escape_hatches,
)
from potrun.policies.restricted_library import REVIEWED_COPIES as REVIEWED_COPIES
from potrun.policies.restricted_library import REVIEWED_EVALUATORS as REVIEWED_EVALUATORS
from potrun.policies.restricted_library import REVIEWED_FRAME_READERS as REVIEWED_FRAME_READERS
from potrun.policies.restricted_reach import (
    _CYTHON_FUNCTIONS,
    _DENIED_BUILTINS,
    _DENIED_KINDS,
    _EXTRA_BUILTINS,
    _PLAIN,
    _PLAIN_ITEMS,
    IMPLICIT_IMPORTS,
    _CheckedContext,
    _class_refusal,
    _denied_attribute,
    _exact_str,
    _import_statement,
    _is_str_format,
    _made_by_sympy,
    _origin_refusal,
    _owner_name,
    _real_ndarray,
)


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
        shallow_copy, deepcopy, checked_copy = self._copy_guards()
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

    def _copy_guards(self) -> tuple[Callable[..., Any], Callable[..., Any], Callable[[str], Callable[..., Any]]]:
        """copy.copy, copy.deepcopy and dataclasses' asdict/astuple, each only of what `_copy_refusal`
        lets through."""
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

        def checked_copy(name: str) -> Callable[..., Any]:
            def copied(obj: Any, **kwargs: Any) -> Any:
                import dataclasses

                reason = copy_refusal(obj, deep=True)
                if reason is not None:
                    raise refuse("forbidden_call", f"dataclasses.{name} of {reason} is not allowed (not reviewed)")
                return getattr(dataclasses, name)(obj, **kwargs)

            return copied

        return shallow_copy, deepcopy, checked_copy

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


# What the policy's users import from here (the compile, library and reach halves live in their own
# modules: restricted_compile.py, restricted_library.py, restricted_reach.py).
__all__ = [
    "FILENAME",
    "IMPLICIT_IMPORTS",
    "PROGRAM_MARK",
    "PROGRAM_MODULE",
    "REVIEWED_COPIES",
    "REVIEWED_EVALUATORS",
    "REVIEWED_FRAME_READERS",
    "REVIEWED_SPECIAL_METHODS",
    "REVIEWED_SPECIAL_READS",
    "Guards",
    "PolicyViolation",
    "close_sympy_escape_hatches",
    "compile_restricted_program",
]
