"""A corpus source added from outside the package (issue 16 §1 acceptance): this module defines
and registers a JSON-lines reader, no file of xlembed is edited, and it runs through the real
corpus stage from a pipeline TOML beside a built-in source: its rows, its drops, its key (the
file's content, not its path) and its check before anything runs."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import polars as pl
import pytest
from pydantic import Field

from flows.config import ConfigError, load_config
from storage import ArtifactStore
from tasks.corpus import CORPUS_STAGE
from tasks.corpus.readers import GroupBatch, SourceError, open_binary
from tasks.corpus.sources import SOURCES, Source, SourceIO, register_source
from tasks.languages import LangCodes, to_flores
from tasks.stage import ShardSpec, run_stage, source_fingerprints, stage_key
from tasks.stage_config import CONTENT_KEYED, ConfigPath


@register_source
class JsonlSource(Source):
    """One JSON object per line, its translations under `field` keyed by language code
    (`{"translation": {"en": "...", "kk": "..."}}`, as Hugging Face translation datasets write them).
    A language missing from a line is a missing row; a line that is not JSON is an error naming it."""

    kind: Literal["jsonl"]
    path: ConfigPath = Field(json_schema_extra=CONTENT_KEYED)
    langs: LangCodes = Field(min_length=1, description="the codes as the objects spell them; the first is the pivot")
    field: str = "translation"

    def languages(self, shard: ShardSpec | None = None) -> list[str]:
        return [to_flores(code) for code in self.langs]

    def _objects(self) -> Iterator[tuple[int, dict[str, Any]]]:
        with open_binary(self.path) as stream:
            for number, line in enumerate(stream, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)[self.field]
                except (ValueError, KeyError, TypeError) as exc:
                    raise SourceError(f"{self.path}, line {number}: not a JSON object with {self.field!r} ({exc})") from None
                yield number, record

    def read(self, shard: ShardSpec, io: SourceIO) -> Iterator[GroupBatch]:
        flores = self.languages()
        rows: list[dict[str, str | None]] = []
        for number, record in self._objects():
            rows.append({"locator": str(number), **{code: record.get(lang) for code, lang in zip(flores, self.langs)}})
            if len(rows) == io.batch_lines:
                yield GroupBatch(pl.DataFrame(rows, schema=dict.fromkeys(["locator", *flores], pl.String)), "missing")
                rows = []
        if rows:
            yield GroupBatch(pl.DataFrame(rows, schema=dict.fromkeys(["locator", *flores], pl.String)), "missing")

    def fingerprint(self, io: SourceIO) -> dict[str, Any]:
        return io.fingerprint(self.path)

    def check(self) -> None:
        for _ in self._objects():
            pass


PAIRS = [
    ("The cat sleeps on the sofa.", "Мысық диванда ұйықтап жатыр."),
    ("I drink coffee every morning.", "Мен күн сайын таңертең кофе ішемін."),
    ("The train leaves at seven o'clock.", "Пойыз сағат жетіде жүреді."),
    ("My sister is a doctor.", None),  # no Kazakh: a missing row, its group incomplete
    ("This mountain is very high.", "Бұл тау өте биік."),
]
PIPELINE = """
[pipeline]
name = "plugin-source"
root = "artifacts"

[corpus]
dev_fraction = 0.0
read_batch_lines = 2
sources = [
    { name = "toy-jsonl", kind = "jsonl", path = "data/pairs.jsonl", langs = ["en", "kk"] },
    { name = "inline", kind = "text", files = { en = "data/more.en" } },
]
"""


def write_jsonl(path: Path, pairs: list[tuple[str, str | None]]) -> None:
    lines = [json.dumps({"translation": {"en": en, **({"kk": kk} if kk else {})}}, ensure_ascii=False) for en, kk in pairs]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def pipeline(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    write_jsonl(tmp_path / "data" / "pairs.jsonl", PAIRS)
    (tmp_path / "data" / "more.en").write_text("Good night.\n", encoding="utf-8")
    (tmp_path / "pipeline.toml").write_text(PIPELINE, encoding="utf-8")
    return tmp_path / "pipeline.toml"


def test_a_source_registered_by_a_test_module_runs_through_the_corpus_stage(pipeline: Path) -> None:
    config = load_config(pipeline)
    corpus = config.stage_configs["corpus"]
    source = corpus.sources[0]
    assert type(source) is JsonlSource and source.path == str(pipeline.parent / "data" / "pairs.jsonl")
    assert CORPUS_STAGE.check_sources(corpus) == []
    store = ArtifactStore(config.settings.root)
    ref, manifest = run_stage(store, CORPUS_STAGE, corpus, {})
    rows = pl.from_arrow(store.read_table("corpus", ref.key))
    mine = rows.filter(pl.col("source") == "toy-jsonl")
    complete = [pair for pair in PAIRS if pair[1] is not None]
    assert mine["text"].to_list() == [text for pair in complete for text in pair]  # pivot first, in line order
    assert mine["lang"].to_list() == ["eng_Latn", "kaz_Cyrl"] * len(complete)
    assert mine["group_id"].unique(maintain_order=True).to_list() == ["toy-jsonl:1", "toy-jsonl:2", "toy-jsonl:3", "toy-jsonl:5"]
    assert set(mine["split"]) == {"train"}
    assert rows.filter(pl.col("source") == "inline")["text"].to_list() == ["Good night."]
    # the English row of line 4 went with its group; the Kazakh one was never there
    assert manifest.dropped["missing"] == 1 and manifest.dropped["group_incomplete"] == 1
    assert manifest.rows_out == 2 * len(complete) + 1


def test_its_key_is_the_file_content_not_its_path(pipeline: Path, tmp_path: Path) -> None:
    corpus = load_config(pipeline).stage_configs["corpus"]
    key = stage_key(CORPUS_STAGE, corpus, {}, source_fingerprints(CORPUS_STAGE, corpus))
    elsewhere = tmp_path / "copy"
    shutil.copytree(pipeline.parent / "data", elsewhere / "data")
    shutil.copy(pipeline, elsewhere / "pipeline.toml")
    moved = load_config(elsewhere / "pipeline.toml").stage_configs["corpus"]
    assert moved.sources[0].path != corpus.sources[0].path
    assert stage_key(CORPUS_STAGE, moved, {}, source_fingerprints(CORPUS_STAGE, moved)) == key
    write_jsonl(elsewhere / "data" / "pairs.jsonl", PAIRS[:-1])
    assert stage_key(CORPUS_STAGE, moved, {}, source_fingerprints(CORPUS_STAGE, moved)) != key


def test_its_check_names_the_bad_line_before_anything_runs(pipeline: Path) -> None:
    with (pipeline.parent / "data" / "pairs.jsonl").open("a", encoding="utf-8") as out:
        out.write("{not json\n")
    corpus = load_config(pipeline).stage_configs["corpus"]
    [problem] = CORPUS_STAGE.check_sources(corpus)
    assert problem.startswith("source 'toy-jsonl': ") and "pairs.jsonl, line 6" in problem


def test_its_settings_are_validated_and_its_kind_is_listed(pipeline: Path) -> None:
    assert SOURCES["jsonl"] is JsonlSource
    pipeline.write_text(PIPELINE.replace('langs = ["en", "kk"]', 'langs = ["en", "klingon"]'), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(pipeline)
    assert "corpus.sources[0].langs" in str(info.value) and "klingon" in str(info.value)
    pipeline.write_text(PIPELINE.replace('kind = "jsonl"', 'kind = "jsonlines"'), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(pipeline)
    assert "corpus.sources[0]: unknown source kind 'jsonlines'" in str(info.value) and "'jsonl'" in str(info.value)
