"""Imports of project modules (tasks, flows, storage) sit at the head of a module, where a reader
sees the arrows; one inside a function stays only where an optional package or a real cycle
demands it, and says why on its (first) line: `# lazy: <reason>`. Read with ast; `if
TYPE_CHECKING:` blocks (never run) and module-level imports are not counted."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("flows", "tasks", "storage")
CHECKED = PACKAGES
MAX_FUNCTION_IMPORTS = 40
REASON = "# lazy:"


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _project(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] in PACKAGES
    if isinstance(node, ast.Import):
        return any(alias.name.split(".")[0] in PACKAGES for alias in node.names)
    return False


def function_imports(path: Path) -> list[tuple[int, str]]:
    """(line, text of its first line) of every project import inside a function of `path`."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    visit_one(other, in_function)
                continue
            visit_one(child, in_function)

    def visit_one(child: ast.AST, in_function: bool) -> None:
        if in_function and _project(child):
            found.append((child.lineno, lines[child.lineno - 1]))
        visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(text, filename=str(path)), False)
    return found


def all_function_imports(packages: tuple[str, ...] = PACKAGES, root: Path = REPO) -> dict[str, list[tuple[int, str]]]:
    out = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if found := function_imports(path):
                out[path.relative_to(root).as_posix()] = found
    return out


def test_the_count_finds_imports_inside_functions_only(tmp_path: Path) -> None:
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "m.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from tasks.a import b\n"
        "if TYPE_CHECKING:\n"
        "    from tasks.c import d\n"
        "def f():\n"
        "    import numpy\n"
        "    from tasks.e import g  # lazy: a real cycle\n"
        "    if True:\n"
        "        from storage import h\n"
        "    def inner():\n"
        "        from . import sibling\n"
        "class K:\n"
        "    def m(self):\n"
        "        import flows.x\n",
        encoding="utf-8",
    )
    found = all_function_imports(("tasks",), tmp_path)["tasks/m.py"]
    assert [line for line, _ in found] == [7, 9, 11, 14]
    assert [REASON in text for _, text in found] == [True, False, False, False]


def test_each_function_level_project_import_says_why() -> None:
    unexplained = [
        f"{path}:{line}: {text.strip()}"
        for path, found in all_function_imports(CHECKED).items()
        for line, text in found
        if REASON not in text
    ]
    assert unexplained == [], "move it to the module's head, or say why it cannot be there: " + "; ".join(unexplained)


def test_function_level_project_imports_are_few() -> None:
    total = sum(len(found) for found in all_function_imports(CHECKED).values())
    assert total < MAX_FUNCTION_IMPORTS, total
