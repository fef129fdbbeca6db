"""The house stays honest: the installed package's import graph has no cycle, nothing imports back up
over the facade, and no module or function grows past its bound.

The graph is read from the source with `ast`, module by module, as the package installs (pyproject.toml's
`package-dir`: sandbox/ is `potrun.sandbox`). An import inside a function counts (it runs when the function
does); one under `if TYPE_CHECKING:` does not (it never runs). The facade `potrun` imports its public names
on first use (its `_LAZY` table): those count as its imports, so a module the facade reaches that imports
`potrun` back is a cycle.
"""

from __future__ import annotations

import ast
import functools
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

# The repository's root, wherever in tests/ this file stands.
from paths import REPO

MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 80

# No file or function is over the bounds: a split that is due is done before its change lands.
PENDING_SPLIT: frozenset[str] = frozenset()


@dataclass
class Module:
    name: str  # the dotted name it installs as
    path: Path
    is_package: bool
    tree: ast.Module = field(repr=False)


def package_dirs() -> dict[str, Path]:
    """pyproject.toml's package-dir: dotted package -> its folder in the repository."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return {package: REPO / folder for package, folder in config["tool"]["setuptools"]["package-dir"].items()}


@functools.cache
def modules() -> dict[str, Module]:
    """Every module of the installed package, by dotted name."""
    roots = package_dirs()
    found: dict[str, Module] = {}
    for package, folder in roots.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            dotted = ".".join((package, *(parts[:-1] if is_package else parts)))
            assert dotted not in found, f"{path} and {found[dotted].path} both install as {dotted}"
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            found[dotted] = Module(dotted, path, is_package, tree)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _is_script_only(test: ast.expr) -> bool:
    """`if __name__ == "__main__":`: runs when the file is a script (`python -m`), never when imported."""
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def _runtime_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """Every node under `node` that runs when the module is imported or its functions called: the
    bodies of `if TYPE_CHECKING:` and `if __name__ == "__main__":` left out (their else kept)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and (_is_type_checking(child.test) or _is_script_only(child.test)):
            for statement in child.orelse:
                yield statement
                yield from _runtime_nodes(statement)
            continue
        yield child
        yield from _runtime_nodes(child)


def _base(module: Module, level: int) -> str:
    parts = module.name.split(".")
    if not module.is_package:
        parts = parts[:-1]
    return ".".join(parts[: len(parts) - (level - 1)])


def imports(module: Module, known: dict[str, Module]) -> set[str]:
    """The modules of the package that `module` imports when it runs."""
    targets: set[str] = set()
    for node in _runtime_nodes(module.tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = _base(module, node.level) + (f".{base}" if base else "")
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                targets.add(submodule if submodule in known else base)
    if module.name == "potrun":
        targets.update(_lazy_table(module))
    return {target for target in targets if target in known and target != module.name}


def _lazy_table(facade: Module) -> set[str]:
    """The modules named in the facade's `_LAZY` table: it imports each on first use."""
    for node in facade.tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_LAZY" for t in node.targets):
            table = ast.literal_eval(node.value)
            assert isinstance(table, dict)
            return set(table.values())
    raise AssertionError("potrun/__init__.py has no _LAZY table")


@functools.cache
def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(module, known) for name, module in known.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def floors(graph: dict[str, set[str]]) -> dict[str, int]:
    """Each module's floor: 1 for a module that imports none of the package, else one above the highest
    it imports (the graph must have no cycle)."""
    floor: dict[str, int] = {}

    def visit(name: str) -> int:
        if name not in floor:
            floor[name] = 1 + max((visit(target) for target in graph[name]), default=0)
        return floor[name]

    for name in graph:
        visit(name)
    return floor


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            yield prefix + node.name, node.end_lineno - node.lineno + 1
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def oversized() -> dict[str, int]:
    """Every module over MAX_MODULE_LINES ("path") and function over MAX_FUNCTION_LINES ("path:qualname"),
    with its lines."""
    found: dict[str, int] = {}
    for module in modules().values():
        path = module.path.relative_to(REPO).as_posix()
        lines = len(module.path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            found[path] = lines
        for qualname, length in _functions(module.tree):
            if length > MAX_FUNCTION_LINES:
                found[f"{path}:{qualname}"] = length
    return found


def test_the_graph_reads_the_whole_package() -> None:
    graph = import_graph()
    # Each folder of the installed layout is read, under its installed name.
    for name in ("potrun", "potrun.cli", "potrun.check.pipeline", "potrun.sandbox.api", "potrun.policies"):
        assert name in graph, name
    assert "potrun.check.records" in graph["potrun.check.pipeline"]
    assert graph["potrun"] >= {"potrun.sandbox.api", "potrun.check.pipeline"}  # the facade's lazy table


def test_the_import_graph_has_no_cycle() -> None:
    assert cycles(import_graph()) == []


def test_nothing_below_the_facade_imports_it() -> None:
    """`potrun` is the floor the users stand on: the library under it takes its names from their own
    modules (the version from potrun.types), only the command line above it imports it."""
    graph = import_graph()
    importers = sorted(name for name, targets in graph.items() if "potrun" in targets)
    assert all(name == "potrun.__main__" or name.split(".")[:2] == ["potrun", "cli"] for name in importers), importers


def test_the_cycle_finder_finds_cycles() -> None:
    # The checks above could only pass if it never found one.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert floors({"a": {"b"}, "b": {"c"}, "c": set(), "d": set()}) == {"a": 3, "b": 2, "c": 1, "d": 1}


def test_type_only_and_script_only_imports_do_not_count() -> None:
    source = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import potrun.cli\nelse:\n    import potrun.types\n"
        "def f():\n    from potrun import budget\n"
        "if __name__ == '__main__':\n    from potrun.cli import main\n"
    )
    module = Module("potrun.x", REPO / "x.py", False, ast.parse(source))
    known = {name: module for name in ("potrun", "potrun.cli", "potrun.types", "potrun.budget")}
    assert imports(module, known) == {"potrun.types", "potrun.budget"}


def test_no_module_or_function_past_its_bound() -> None:
    found = oversized()
    over = {name: lines for name, lines in found.items() if name not in PENDING_SPLIT}
    assert over == {}, f"split these (modules at most {MAX_MODULE_LINES} lines, functions {MAX_FUNCTION_LINES})"
    stale = sorted(PENDING_SPLIT - set(found))
    assert stale == [], "within the bounds now: strike them from PENDING_SPLIT"


def test_every_command_module_imports_public_names_only() -> None:
    """The command line calls the public API only (tests/cli/test_cli_imports.py reads potrun/cli/__init__.py):
    every module of potrun.cli takes from the package only names that are not private and, where the
    module declares its `__all__`, listed there."""
    import importlib

    found = []
    for module in modules().values():
        if module.name.split(".")[:2] != ["potrun", "cli"]:
            continue
        for node in ast.walk(module.tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "potrun":
                public = getattr(importlib.import_module(node.module), "__all__", None)
                found.extend(
                    f"{module.name}: {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") or (public is not None and alias.name not in public)
                )
    assert found == []
