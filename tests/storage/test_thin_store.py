"""The store is thin (issue 38): `ArtifactStore` has no method that only hands its arguments on
to a function of another module or to its backend (refs, build locks, checkpoint files, audits,
gc and objects by path are called where they are defined), and the worked example of
docs/architecture.md ("Layers") runs as written."""

from __future__ import annotations

import ast
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

from storage import ArtifactStore

REPO = Path(__file__).resolve().parents[2]


def forwarding_methods(source: str) -> list[str]:
    """Methods of `ArtifactStore` whose body (docstring aside) is one call, to a name imported
    from another module, to `module.function` or to `self.backend.method`, passing on exactly
    the method's own parameters (and `self`): nothing the store knows is added."""
    tree = ast.parse(source)
    imported = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            imported |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported |= {alias.asname or alias.name for alias in node.names}
    cls = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "ArtifactStore")
    found = []
    for method in cls.body:
        if not isinstance(method, ast.FunctionDef):
            continue
        body = method.body
        if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]
        if len(body) != 1 or not isinstance(body[0], (ast.Return, ast.Expr)) or not isinstance(body[0].value, ast.Call):
            continue
        call, func = body[0].value, body[0].value.func
        other_module = (isinstance(func, ast.Name) and func.id in imported) or (
            isinstance(func, ast.Attribute)
            and (
                (isinstance(func.value, ast.Name) and func.value.id in imported)
                or (isinstance(func.value, ast.Attribute) and func.value.attr == "backend")
            )
        )
        params = [a.arg for a in (*method.args.args, *method.args.kwonlyargs)]
        passed = [a.id for a in call.args if isinstance(a, ast.Name)] + [
            k.value.id for k in call.keywords if isinstance(k.value, ast.Name) and k.arg == k.value.id
        ]
        if other_module and len(passed) == len(call.args) + len(call.keywords) and set(passed) <= set(params):
            found.append(method.name)
    return found


def test_the_forward_finder_finds_forwards() -> None:
    source = (
        "from storage import refs\nfrom storage.gc import garbage\n"
        "class ArtifactStore:\n"
        "    def read_ref(self, pipeline, stage):\n        '''doc'''\n        return refs.read_ref(self, pipeline, stage)\n"
        "    def garbage(self, grace):\n        return garbage(self, grace=grace)\n"
        "    def read_bytes(self, path):\n        return self.backend.read_bytes(path)\n"
        "    def url(self, name):\n        return self.backend.url(self.root_uri, name)\n"
        "    def files(self, stage):\n        return [stage]\n"
    )
    assert forwarding_methods(source) == ["read_ref", "garbage", "read_bytes"]


def test_the_store_has_no_forwarding_method() -> None:
    assert forwarding_methods((REPO / "storage" / "store.py").read_text(encoding="utf-8")) == []


def test_the_architecture_example_runs_as_written(store: ArtifactStore, kit: Any) -> None:
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    (example,) = re.findall(r"The store is thin.*?```python\n(.*?)```", text, re.S)
    key = kit.build(store, "corpus", config={"v": 1}, rows=3).key
    namespace: dict[str, Any] = {"store": store, "key": key, "timedelta": timedelta}
    exec(compile(example, "docs/architecture.md", "exec"), namespace)  # noqa: S102 - the page's own example
    assert namespace["ref"] is None and namespace["doomed"] == []
    assert b'"key"' in namespace["data"] and key.encode() in namespace["data"]
