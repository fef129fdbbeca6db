"""The names `potrun` exports are the functions and classes they say, however the package was imported.

`from potrun import X` reads the package attribute X; importing a submodule named X makes that
attribute the module. So each name in `potrun.__all__` is checked in a fresh interpreter twice: right
after `import potrun`, and after every submodule of the package has been imported.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import potrun

# What each exported name must be: the module that defines it, and its kind.
_CHECK = r"""
import importlib, inspect, json, pkgutil, sys, types
import potrun

def submodules():
    for info in pkgutil.walk_packages(potrun.__path__, "potrun."):
        yield info.name
    for package in ("potrun.sandbox", "potrun.extractors", "potrun.policies"):
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, package + "."):
            yield info.name

if sys.argv[1] == "after":
    for name in submodules():
        if name.endswith(".__main__"):  # runs the command line
            continue
        try:
            importlib.import_module(name)
        except ImportError:  # an optional dependency (ray, docker) that is not installed
            pass
found = {}
for name in potrun.__all__:
    namespace = {}
    exec(f"from potrun import {name} as obj", namespace)
    obj = namespace["obj"]
    found[name] = {
        "module": isinstance(obj, types.ModuleType),
        "same": obj is getattr(potrun, name),
        "kind": "class" if inspect.isclass(obj) else "function" if callable(obj) else type(obj).__name__,
        "home": getattr(obj, "__module__", None),
        "qualname": getattr(obj, "__qualname__", name),
    }
print(json.dumps(found))
"""

# The kind each public name must have (a mapping such as PRESETS is data).
_KINDS = {"PRESETS": "mappingproxy"}


def _exports(when: str) -> dict[str, dict[str, object]]:
    out = subprocess.run([sys.executable, "-c", _CHECK, when], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("when", ["before", "after"])
def test_every_exported_name_is_the_object_it_names(when: str) -> None:
    exports = _exports(when)
    assert sorted(exports) == sorted(potrun.__all__)
    for name, seen in exports.items():
        assert seen["module"] is False, f"potrun.{name} is a module"
        assert seen["same"] is True
        assert seen["kind"] == _KINDS.get(name, "class" if name[0].isupper() else "function"), name
        if seen["kind"] in ("class", "function"):
            assert seen["qualname"] == name, name
            assert str(seen["home"]).startswith("potrun."), name


def test_no_lazy_export_shares_a_submodule_name() -> None:
    import pkgutil

    submodules = {info.name for info in pkgutil.iter_modules(potrun.__path__)}
    assert not submodules & set(potrun.__all__)


def test_the_readme_first_example_works() -> None:
    from potrun import compare

    assert compare(0.1 + 0.2, "0.3").correct is True
    import potrun.comparators  # noqa: F401
    from potrun import compare as again

    assert again is compare


def test_version_is_the_distribution_version() -> None:
    from importlib.metadata import version

    assert potrun.__version__ == version("potrun")


def test_what_type_checkers_see_is_what_the_package_loads() -> None:
    """potrun/__init__ names each export twice: imported under TYPE_CHECKING (for mypy and editors)
    and in the lazy table (at run time): the two lists must be the same names from the same modules."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(potrun.__file__).read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    typed = {alias.name: node.module for node in block.body if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert typed == potrun._LAZY


def test_the_main_use_case_is_one_call() -> None:
    """A resumable check run that writes its output and returns its summary: potrun.run_check."""
    assert "run_check" in potrun.__all__
    assert potrun._LAZY["run_check"] == "potrun.check.run"
    assert potrun.run_check.__module__ == "potrun.check.run"
