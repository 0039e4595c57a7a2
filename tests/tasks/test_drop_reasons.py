"""One table of drop reasons (tasks/drop_reasons.py): every reason a stage reports is in it,
each with its meaning, and `ShardContext` refuses one that is not."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tasks.drop_reasons import DROP_REASONS, drop_reason, register_drop_reason
from tasks.shard_context import ShardContext

REPO = Path(__file__).resolve().parents[2]


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def reported_reasons(root: Path = REPO / "tasks") -> dict[str, set[str]]:
    """reason -> the files that report it, read from the source: `drop_reason("x")`,
    `...context.drop("x", n)` / `.reject("x", rows)`, `drop("x", n)`, `....dropped["x"]`, `GroupBatch(frame, "x")`."""
    found: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = None
            if isinstance(node, ast.Call) and node.args:
                func = node.func
                if isinstance(func, ast.Name) and func.id == "drop_reason":
                    name = _literal(node.args[0])
                elif isinstance(func, ast.Name) and func.id == "drop":  # a stage's `drop = context.drop`
                    name = _literal(node.args[0])
                elif isinstance(func, ast.Name) and func.id == "GroupBatch" and len(node.args) > 1:
                    name = _literal(node.args[1])
                elif isinstance(func, ast.Attribute) and func.attr in ("drop", "reject") and "context" in ast.unparse(func.value):
                    name = _literal(node.args[0])
            elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "dropped":
                name = _literal(node.slice)
            if name is not None:
                found.setdefault(name, set()).add(path.relative_to(root.parent).as_posix())
    return found


def test_the_scan_finds_reasons_in_every_form(tmp_path: Path) -> None:
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "a.py").write_text(
        'context.drop("one", 2)\nevaluation.context.reject("two", t)\ndata.dropped["three"] += 1\n'
        'R = {1: drop_reason("four")}\nyield GroupBatch(frame, "five")\ndrop("six", 1)\nframe.drop("not_a_reason")\n',
        encoding="utf-8",
    )
    assert set(reported_reasons(tmp_path / "tasks")) == {"one", "two", "three", "four", "five", "six"}


def test_every_reason_a_stage_reports_is_in_the_table_and_every_entry_is_reported() -> None:
    reported = reported_reasons()
    assert {"empty", "lid_mismatch", "empty_translation", "no_partner", "word_pair_not_one_to_one"} <= set(reported)
    assert {reason: files for reason, files in reported.items() if reason not in DROP_REASONS} == {}
    assert sorted(set(DROP_REASONS) - set(reported)) == []  # no entry left behind by a reason gone
    assert all(description.strip() for description in DROP_REASONS.values())


def test_corpus_and_translate_share_the_reasons_they_both_report() -> None:
    from tasks.corpus import filters as corpus_filters
    from tasks.translate import filters as translate_filters

    shared = set(corpus_filters.REASONS.values()) & set(translate_filters.REASONS.values())
    assert shared == {"length_ratio", "lid_mismatch", "lid_low_confidence"}


def test_a_shard_context_refuses_a_reason_not_in_the_table_and_takes_a_registered_one(tmp_path: Path) -> None:
    context = ShardContext("s", workdir=tmp_path)
    with pytest.raises(ValueError, match="not in DROP_REASONS"):
        context.drop("typo_in_a_reason", 1)
    with pytest.raises(ValueError, match="not in DROP_REASONS"):
        context.reject("typo_in_a_reason", _rows())
    context.drop("too_long", 2)
    assert context.dropped == {"too_long": 2}

    name = "test_plugin_reason"
    try:
        register_drop_reason(name, "a row a test plug-in drops")
        assert drop_reason(name) == name
        context.drop(name, 1)
        assert context.dropped[name] == 1
        with pytest.raises(ValueError, match="already registered"):
            register_drop_reason(name, "something else")
    finally:
        DROP_REASONS.pop(name, None)


def _rows():
    import pyarrow as pa

    return pa.table({"id": ["a"], "text": ["x"]})
