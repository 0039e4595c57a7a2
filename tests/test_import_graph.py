"""The import graph of tasks/, flows/ and storage/, read from the source
with ast (imports at module level, inside functions and in `if TYPE_CHECKING:` blocks: an import
only a type checker runs still makes a reader of either module read the other), has no cycle anywhere among the modules of tasks/, flows/ and storage/, no
`tasks` -> `flows` and no `storage` -> `tasks` import, flows imports no private name (`_x`) of a
stage module, and no test module imports a private name of the package. Grouped by package (the
folders under tasks/, flows/ and storage/) it has no cycle either, and a stage package imports
only the stages before it in the data flow and the shared floor (tasks/*.py, tasks/encoders,
tasks/reporting); `xlembed export` (tasks/publish) sits above the stages."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("tasks", "flows", "storage")


def module_files() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = module_files()


def _known(name: str) -> str | None:
    """The module `name` or its nearest ancestor that is one of ours (None: not ours)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def imports(module: str) -> list[tuple[str, list[str]]]:
    """(imported module of ours, names taken from it) for every import statement of `module`."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(target, []) for alias in node.names if (target := _known(alias.name))]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            for alias in node.names:
                target = _known(f"{source}.{alias.name}") if f"{source}.{alias.name}" in MODULES else _known(source)
                if target:
                    found.append((target, [] if target == f"{source}.{alias.name}" else [alias.name]))
    return found


def graph() -> dict[str, set[str]]:
    return {module: {target for target, _ in imports(module) if target != module} for module in MODULES}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(out)


def test_the_graph_is_read_from_the_source() -> None:
    edges = graph()
    assert "tasks.train.trainer" in edges and "tasks.train.objectives" in edges["tasks.train.trainer"]
    assert "tasks.train.views" in edges["tasks.train.objectives.dueam_wmd"]
    assert "tasks.train.trainer" in edges["tasks.train.launch"]


def test_type_checking_imports_are_edges(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / "annotated.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:  # for annotations only\n"
        "    from storage.store import ArtifactStore\n",
        encoding="utf-8",
    )
    monkeypatch.setitem(MODULES, "storage.annotated", module)
    assert imports("storage.annotated") == [("storage.store", ["ArtifactStore"])]


def test_the_cycle_finder_finds_cycles() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


KNOWN_CYCLES: list[list[str]] = []
"""Cycles allowed to stay: none. A cycle is broken by moving the shared part into a module both
sides import (as storage/errors.py, flows/cli/common.py and tasks/reporting/ are)."""


def test_no_cycles_anywhere_in_tasks_flows_and_storage() -> None:
    assert cycles(graph()) == KNOWN_CYCLES


def package_of(module: str) -> str:
    """The package a module belongs to: its folder directly under tasks/, flows/ or storage/
    (`tasks.train` for tasks/train/objectives/base.py), or the top folder for a module that sits
    right in it (`tasks` for tasks/stage.py)."""
    parts = MODULES[module].relative_to(REPO).parts
    return ".".join(parts[:2]) if len(parts) > 2 else parts[0]


def package_graph(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for module, targets in edges.items():
        for target in targets:
            if package_of(module) != package_of(target):
                out.setdefault(package_of(module), set()).add(package_of(target))
    return out


def test_packages_are_grouped_by_their_folder() -> None:
    assert package_of("tasks.train.objectives.base") == "tasks.train"
    assert package_of("tasks.train") == "tasks.train"
    assert package_of("tasks.stage") == "tasks"
    assert package_of("flows.sweep.report") == "flows.sweep" and package_of("flows.pipeline") == "flows"
    assert package_graph({"tasks.train.trainer": {"tasks.encoders.neighbours", "tasks.train.data"}}) == {
        "tasks.train": {"tasks.encoders"}
    }


KNOWN_PACKAGE_CYCLES: list[list[str]] = []
"""Package cycles allowed to stay: none. A cycle of packages is one no module-level check sees
(each module's imports point one way, the packages' both ways), so it is checked on its own."""


@pytest.mark.slow
def test_no_cycles_between_packages() -> None:
    assert cycles(package_graph(graph())) == KNOWN_PACKAGE_CYCLES


# The stages in data-flow order; a stage package may import only those before it.
STAGE_ORDER = ("tasks.corpus", "tasks.base_model", "tasks.translate", "tasks.align", "tasks.train", "tasks.evaluate")
# Below every stage: imported by any, importing none.
FLOOR = ("tasks", "tasks.encoders", "tasks.reporting")


@pytest.mark.slow
def test_stage_packages_import_only_upstream_stages_and_the_floor() -> None:
    packages = package_graph(graph())
    wrong = []
    for package, targets in packages.items():
        if package in STAGE_ORDER:
            allowed = {*STAGE_ORDER[: STAGE_ORDER.index(package)], *FLOOR, "storage"}
        elif package in FLOOR:
            allowed = {*FLOOR, "storage"}
        else:
            continue
        wrong += [f"{package} -> {target}" for target in sorted(targets - allowed) if target.startswith("tasks")]
    assert wrong == []
    assert set(STAGE_ORDER) | set(FLOOR) | {"tasks.publish"} == {package_of(m) for m in MODULES if m.startswith("tasks")}


def test_tasks_do_not_import_flows_and_storage_does_not_import_tasks() -> None:
    edges = graph()
    wrong = sorted(f"{m} -> {t}" for m, targets in edges.items() for t in targets
                   if (m.startswith("tasks") and t.startswith("flows")) or (m.startswith("storage") and t.startswith("tasks")))  # fmt: skip
    assert wrong == []


def test_flows_import_no_private_name_of_a_stage_module() -> None:
    wrong = sorted(
        f"{module} imports {target}.{name}"
        for module in MODULES
        if module.startswith("flows")
        for target, names in imports(module)
        if target.startswith("tasks")
        for name in names
        if name.startswith("_") and not name.startswith("__")
    )
    assert wrong == []


TESTS = REPO / "tests"
BENCHMARKS = REPO / "benchmarks"


FILE_LOADERS = {"spec_from_file_location", "run_path", "SourceFileLoader", "exec_module", "load_source"}


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def test_benchmarks_import_nothing_from_the_tests() -> None:
    """The tiny models and synthetic rows benchmarks share with the tests live in the package
    (tasks/tiny_models.py): moving a test fixture never breaks a benchmark."""
    wrong = []
    for path in sorted(BENCHMARKS.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text, filename=str(path))):
            if isinstance(node, ast.Import):
                wrong += [f"{path.name}: import {a.name}" for a in node.names if a.name.split(".")[0] == "tests"]
            elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "tests":
                wrong.append(f"{path.name}: from {node.module} import ...")
            elif isinstance(node, ast.Call) and _call_name(node) in FILE_LOADERS:
                # naming test files for pytest to run (gpu_check) is fine; importing code from them is not
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and re.search(r"tests/\S*\.py\b", arg.value):
                        wrong.append(f"{path.name}: loads a file under tests/ ({arg.value!r})")
    assert wrong == []


PRIVATE_IMPORTS_ALLOWED: set[tuple[str, str]] = set()
"""(test file, module.name) pairs allowed to import a private name of the package, each with
its reason. Everything else a test needs is public (or reached through a public function)."""


def private_imports_of_tests() -> set[tuple[str, str]]:
    """(test file, module.name) for every `from tasks|flows|storage... import _name` in tests/,
    at module level or inside a function."""
    found = set()
    for path in sorted(TESTS.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in PACKAGES:
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.add((path.relative_to(REPO).as_posix(), f"{node.module}.{alias.name}"))
    return found


@pytest.mark.slow
def test_tests_import_no_private_name_of_the_package() -> None:
    assert private_imports_of_tests() - PRIVATE_IMPORTS_ALLOWED == set()
    assert PRIVATE_IMPORTS_ALLOWED <= private_imports_of_tests(), "an allowed private import is gone: remove it from the list"
