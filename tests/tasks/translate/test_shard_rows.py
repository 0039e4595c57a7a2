"""A translate shard reads only its own source rows; the plan reads no text (issue 17 §2).

`reference_source_rows` is the code before: every shard read the whole corpus with its texts,
sorted the source rows and took its slice. The streamed read must give the same rows.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tasks.corpus.schema import CORPUS_SCHEMA
from tasks.translate.config import TranslateConfig
from tasks.translate.stage import shard_source_rows, source_group_ids


class PartsArtifact:
    """A corpus artifact of several part tables that records which columns each read asked for."""

    def __init__(self, parts: list[pa.Table]) -> None:
        self.parts = parts
        self.reads: list[list[str] | None] = []

    def read_table(self, columns: list[str] | None = None) -> pa.Table:
        self.reads.append(columns)
        return pa.concat_tables(self.parts).select(columns) if columns else pa.concat_tables(self.parts)

    def iter_batches(self, columns: list[str] | None = None, batch_size: int = 65_536) -> Iterator[pa.RecordBatch]:
        self.reads.append(columns)
        for part in self.parts:
            yield from part.select(columns).to_batches(max_chunksize=7)


def reference_source_rows(config: TranslateConfig, corpus: PartsArtifact) -> pa.Table:
    table = corpus.read_table(["group_id", "lang", "text", "split", "source"])
    table = table.filter(pc.equal(table["lang"], config.source_lang))
    return table.sort_by([("group_id", "ascending")])


def corpus_parts(n_groups: int, seed: int) -> list[pa.Table]:
    rng = random.Random(seed)
    rows = []
    for g in rng.sample(range(n_groups), n_groups):  # parts not in group order
        gid = f"{rng.choice('abcxyz')}{g:05d}"
        for lang in ("eng_Latn", "kaz_Cyrl", "fra_Latn"):
            if lang == "eng_Latn" or rng.random() < 0.5:
                rows.append({"id": f"{gid}:{lang}", "group_id": gid, "lang": lang, "text": f"{lang} text {g}",
                             "split": rng.choice(["train", "dev"]), "source": rng.choice(["mono", "web"])})  # fmt: skip
    table = pa.Table.from_pylist(rows, schema=CORPUS_SCHEMA)
    cuts = sorted(rng.sample(range(1, table.num_rows), 3))
    return [table.slice(a, b - a) for a, b in zip([0, *cuts], [*cuts, table.num_rows])]


@pytest.mark.parametrize("shard_rows", [1, 7, 40, 1000])
def test_each_shard_reads_the_rows_the_whole_read_gave(shard_rows: int) -> None:
    config = TranslateConfig.model_validate({"targets": ["kaz_Cyrl"], "shard_rows": shard_rows})
    corpus = PartsArtifact(corpus_parts(90, seed=shard_rows))
    expected = reference_source_rows(config, corpus)
    ids = source_group_ids(config, corpus)
    assert ids.to_pylist() == expected["group_id"].to_pylist()
    for start in range(0, len(ids), shard_rows):
        stop = min(len(ids), start + shard_rows)
        rows = shard_source_rows(config, corpus, ids[start].as_py(), ids[stop - 1].as_py())
        assert rows.to_pylist() == expected.slice(start, stop - start).to_pylist()
        assert rows.schema == expected.schema


def test_plan_reads_no_text_and_shards_name_their_group_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks.translate import stage

    config = TranslateConfig.model_validate({"targets": ["kaz_Cyrl"], "shard_rows": 25})
    corpus = PartsArtifact(corpus_parts(60, seed=3))
    monkeypatch.setattr(stage, "check_languages", lambda config, info: None)
    monkeypatch.setattr(stage, "model_info", lambda model: {})
    shards = stage.plan_translate_shards(config, {"corpus": corpus, "translate_model": None})
    assert corpus.reads == [["group_id", "lang"]]  # the texts stay on disk at plan time
    ids = reference_source_rows(config, corpus)["group_id"].to_pylist()
    assert [(s.params["start"], s.params["stop"]) for s in shards] == [(0, 25), (25, 50), (50, 60)]
    assert [(s.params["first"], s.params["last"]) for s in shards] == [(ids[0], ids[24]), (ids[25], ids[49]), (ids[50], ids[59])]


def test_duplicate_source_rows_of_a_group_are_refused() -> None:
    config = TranslateConfig.model_validate({"targets": ["kaz_Cyrl"]})
    row = {"id": "g:eng_Latn", "group_id": "g", "lang": "eng_Latn", "text": "t", "split": "train", "source": "s"}
    corpus = PartsArtifact([pa.Table.from_pylist([row, row | {"text": "u"}], schema=CORPUS_SCHEMA)])
    with pytest.raises(ValueError, match="more than one eng_Latn row"):
        source_group_ids(config, corpus)
    with pytest.raises(ValueError, match="more than one eng_Latn row"):
        shard_source_rows(config, corpus, "g", "g")
