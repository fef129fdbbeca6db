"""The CLI calls the public API only: every name potrun/cli/__init__.py imports from the project is public."""

from __future__ import annotations

import ast
import importlib

from paths import REPO

CLI = REPO / "potrun" / "cli" / "__init__.py"


def imported_names() -> list[tuple[str, str]]:
    tree = ast.parse(CLI.read_text(encoding="utf-8"))
    return [
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "potrun"
        for alias in node.names
    ]


def test_the_cli_imports_public_names_only() -> None:
    found = imported_names()
    assert found
    for module_name, name in found:
        module = importlib.import_module(module_name)
        public = getattr(module, "__all__", None)
        assert not name.startswith("_"), f"{module_name}.{name}"
        if public is not None:  # a module that declares its public names
            assert name in public, f"{module_name}.{name} is not in its __all__"
