"""DocMath-Eval's annotation conventions, read from a gold program's source (static, on the parent's
side: parsing never runs anything)."""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Iterator

from potrun.policies import DENIED_ATTRIBUTES, module_allowed
from potrun.types import Entry
from potrun.validation.problems import Problem, problem


def conventions(source: str) -> tuple[list[Problem], int | None]:
    """DocMath-Eval's annotation conventions, as warnings, and the line of the first print() call (for
    print_only_answer). A program that does not parse gets none: the sandbox reports its syntax error."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return [], None
    found: list[Problem] = []
    solution = _solution_function(tree)
    if solution is None:
        found.append(
            problem(
                "no_solution_function",
                "no top-level `def solution():`; the annotation convention is a `solution()` that returns the answer",
            )
        )
    elif _has_parameters(solution):
        found.append(
            problem(
                "no_solution_function",
                "`solution` takes parameters; the convention is `def solution():`",
                solution.lineno,
            )
        )
    body = solution.body if solution is not None else tree.body
    first = _first_statement(body)
    if first is None or not _defines_variable(first):
        where = first.lineno if first is not None else (solution.lineno if solution is not None else None)
        found.append(
            problem(
                "variables_not_first",
                "the program should start by defining its variables (name = value), then compute",
                where,
            )
        )
    if not _has_comment(source):
        found.append(problem("no_comment", "no comment: say what the variables are and what is computed"))
    prints = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and _is_print_call(node)]
    print_line = min(node.lineno for node in prints) if prints else None
    if prints and solution is not None and not _returns_value(solution):
        found.append(
            problem("print_only_answer", "solution() prints but returns no value; return the answer", print_line)
        )
    found.extend(_import_problems(tree))
    return found, print_line


def _solution_function(tree: ast.Module) -> ast.FunctionDef | None:
    found = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == Entry.SOLUTION:
            found = node  # the last definition wins, as at run time
    return found


def _has_parameters(function: ast.FunctionDef) -> bool:
    args = function.args
    return bool(args.posonlyargs or args.args or args.vararg or args.kwonlyargs or args.kwarg)


def _first_statement(body: list[ast.stmt]) -> ast.stmt | None:
    """The first statement that is not a docstring, an import, `global` or `pass`."""
    for index, statement in enumerate(body):
        if (
            index == 0
            and isinstance(statement, ast.Expr)
            and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str)
        ):
            continue
        if isinstance(statement, (ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Pass)):
            continue
        return statement
    return None


def _defines_variable(statement: ast.stmt) -> bool:
    """`name = <literal>` (numbers, strings, lists of them, simple arithmetic on them)."""
    if isinstance(statement, ast.Assign):
        targets, value = statement.targets, statement.value
    elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
        targets, value = [statement.target], statement.value
    else:
        return False
    return all(_is_name_target(t) for t in targets) and _is_literal(value)


def _is_name_target(node: ast.expr) -> bool:
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_is_name_target(e) for e in node.elts)
    return isinstance(node, ast.Name)


def _is_literal(node: ast.expr, depth: int = 0) -> bool:
    if depth > 50:
        return False
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp):
        return _is_literal(node.operand, depth + 1)
    if isinstance(node, ast.BinOp):
        return _is_literal(node.left, depth + 1) and _is_literal(node.right, depth + 1)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(_is_literal(e, depth + 1) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _is_literal(k, depth + 1) for k in node.keys) and all(
            _is_literal(v, depth + 1) for v in node.values
        )
    return False


def _has_comment(source: str) -> bool:
    try:
        return any(token.type == tokenize.COMMENT for token in tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return "#" in source


def _is_print_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"


def _returns_value(function: ast.FunctionDef) -> bool:
    """A `return <expr>` in the function itself (not in a nested function) that is not `return None`."""
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        if (
            isinstance(node, ast.Return)
            and node.value is not None
            and not (isinstance(node.value, ast.Constant) and node.value.value is None)
        ):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


def _import_problems(tree: ast.Module) -> Iterator[Problem]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not module_allowed(alias.name):
                    yield _import_problem(f"import {alias.name}", node.lineno)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level or not module_allowed(module):
                yield _import_problem(f"from {'.' * node.level}{module} import ...", node.lineno)
                continue
            denied = DENIED_ATTRIBUTES.get(module.split(".")[0], frozenset())
            for alias in node.names:
                if alias.name in denied:
                    yield _import_problem(f"from {module} import {alias.name}", node.lineno)


def _import_problem(what: str, line: int) -> Problem:
    return problem(
        "import_not_allowed",
        f"`{what}` is outside the restricted allowlist: the gold would not run under policy='restricted'",
        line,
    )
