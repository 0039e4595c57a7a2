"""The corpus source registry (tasks/corpus/sources/registry.py): what registration accepts,
what a config with a wrong kind says, and that no module outside the sources names one."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Literal

import pytest
from pydantic import ValidationError

from tasks.corpus.config import CorpusConfig
from tasks.corpus.sources import SOURCES, Source, register_source

REPO = Path(__file__).resolve().parents[3]
BUILT_IN = ["text", "tsv", "parquet", "opus_moses", "multiway_dir", "tatoeba", "cldr"]


def test_the_built_in_sources_are_registered_in_order() -> None:
    assert list(SOURCES)[: len(BUILT_IN)] == BUILT_IN
    assert all(issubclass(cls, Source) and cls.kind_name() == kind for kind, cls in SOURCES.items())


def test_registration_rejects_what_is_not_a_source_or_has_no_single_kind() -> None:
    with pytest.raises(TypeError, match="not a subclass of Source"):
        register_source(dict)  # type: ignore[arg-type]

    class NoKind(Source):
        pass

    with pytest.raises(TypeError, match='kind: Literal\\["name"\\]'):
        register_source(NoKind)

    class TwoKinds(Source):
        kind: Literal["a", "b"]

    with pytest.raises(TypeError, match="NoKind|TwoKinds"):
        register_source(TwoKinds)
    assert "a" not in SOURCES and "b" not in SOURCES


def test_a_taken_kind_cannot_be_registered_again() -> None:
    class OtherText(Source):
        kind: Literal["text"]

    with pytest.raises(ValueError, match="source kind 'text' is already registered by tasks.corpus.sources.text.TextSource"):
        register_source(OtherText)
    assert SOURCES["text"].__module__ == "tasks.corpus.sources.text"
    assert register_source(SOURCES["text"]) is SOURCES["text"]  # the same class again is a no-op


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({"name": "a", "kind": "jsonx"}, "unknown source kind 'jsonx'; known: 'text', 'tsv'"),
        ({"name": "a"}, "a source needs kind = one of 'text'"),
        ("text", "a source must be a table with a kind"),
    ],
)
def test_a_source_without_a_known_kind_is_a_clear_error(source: object, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        CorpusConfig.model_validate({"sources": [source]})
    [error] = info.value.errors()
    assert error["loc"] == ("sources", 0) and message in error["msg"]


def test_a_config_round_trips_through_its_dump() -> None:
    config = CorpusConfig.model_validate(
        {
            "sources": [
                {"name": "c", "kind": "cldr", "langs": ["en", "kk"]},
                {"name": "t", "kind": "tatoeba", "path": "/x", "langs": ["kaz"]},
            ]
        }
    )
    dumped = config.model_dump(mode="json")
    assert dumped["sources"][1] == {"name": "t", "sample": None, "kind": "tatoeba", "path": "/x", "langs": ["kaz"]}
    assert CorpusConfig.model_validate(dumped) == config


@pytest.mark.slow
def test_no_module_outside_the_sources_names_a_source_class_or_kind() -> None:
    classes = {cls.__name__ for kind, cls in SOURCES.items() if kind in BUILT_IN}
    named = []
    for folder in ("tasks", "flows"):
        for path in sorted((REPO / folder).rglob("*.py")):
            if path.parent == REPO / "tasks" / "corpus" / "sources":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.Name, ast.alias)) and (node.id if isinstance(node, ast.Name) else node.name) in classes:
                    named.append(f"{path.relative_to(REPO)}:{node.lineno}")
                # the modules that branched on the kind before the registry (issue 16)
                branched = str(path.relative_to(REPO)) in ("tasks/corpus/stage.py", "tasks/corpus/config.py", "flows/config.py")
                if branched and isinstance(node, ast.Constant) and node.value in BUILT_IN[1:]:  # "text" is also a column
                    named.append(f"{path.relative_to(REPO)}:{node.lineno} {node.value!r}")
    assert named == []
